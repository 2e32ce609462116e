import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JournalSync, openJournal, type Journal } from '../src/store/journal.js';

/** A JournalSync whose file syncs are recorded and completed by the test. */
function recordingSync() {
  const calls: { fd: number; done: (err: NodeJS.ErrnoException | null) => void }[] = [];
  const sync = new JournalSync((fd, done) => calls.push({ fd, done }));
  const finish = (err: NodeJS.ErrnoException | null = null) => calls.splice(0).forEach((c) => c.done(err));
  return { sync, calls, finish };
}

const settled = async (p: Promise<unknown>) => {
  let state = 'pending';
  p.then(
    () => (state = 'resolved'),
    () => (state = 'rejected'),
  );
  await new Promise((r) => setImmediate(r));
  return state;
};

describe('JournalSync', () => {
  let dir: string;
  let a: Journal;
  let b: Journal;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'journal-sync-'));
    a = openJournal(join(dir, 'a.sqlite'));
    b = openJournal(join(dir, 'b.sqlite'));
    for (const db of [a, b]) db.exec('CREATE TABLE t (v TEXT)');
  });
  afterEach(() => {
    a.close();
    b.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('syncs nothing when no tracked journal changed', async () => {
    const { sync, calls } = recordingSync();
    sync.track(a);
    await sync.sync();
    expect(calls).toHaveLength(0);
  });

  it('waits for one sync of each changed journal, shared by every caller of the moment', async () => {
    const { sync, calls, finish } = recordingSync();
    sync.track(a);
    sync.track(b);
    a.prepare('INSERT INTO t VALUES (?)').run('x');
    const waiting = Array.from({ length: 10 }, () => sync.sync());
    await new Promise((r) => setImmediate(r));
    expect(calls).toHaveLength(1); // a only: b did not change
    expect(await settled(Promise.all(waiting))).toBe('pending');
    finish();
    expect(await settled(Promise.all(waiting))).toBe('resolved');
    // Covered: a caller that comes after, with no new change, waits for nothing more.
    await sync.sync();
    expect(calls).toHaveLength(0);
  });

  it('a change made while a sync runs is covered by the next round, not by the running one', async () => {
    const { sync, calls, finish } = recordingSync();
    sync.track(a);
    a.prepare('INSERT INTO t VALUES (?)').run('1');
    const first = sync.sync();
    await new Promise((r) => setImmediate(r));
    expect(calls).toHaveLength(1);
    a.prepare('INSERT INTO t VALUES (?)').run('2');
    const second = sync.sync();
    const third = sync.sync();
    finish();
    expect(await settled(first)).toBe('resolved');
    expect(await settled(second)).toBe('pending');
    expect(calls).toHaveLength(1); // the second round started once the first ended
    finish();
    expect(await settled(Promise.all([second, third]))).toBe('resolved');
  });

  it('a failed sync fails its callers and the next round still runs', async () => {
    const { sync, calls, finish } = recordingSync();
    sync.track(a);
    a.prepare('INSERT INTO t VALUES (?)').run('1');
    const failing = sync.sync();
    await new Promise((r) => setImmediate(r));
    a.prepare('INSERT INTO t VALUES (?)').run('2');
    const next = sync.sync();
    finish(Object.assign(new Error('EIO'), { code: 'EIO' }));
    await expect(failing).rejects.toThrow('EIO');
    await new Promise((r) => setImmediate(r));
    expect(calls).toHaveLength(1);
    finish();
    await expect(next).resolves.toBeUndefined();
  });

  it('forgets a journal once it is closed, and leaves untracked journals alone', async () => {
    const { sync, calls } = recordingSync();
    sync.track(a);
    b.prepare('INSERT INTO t VALUES (?)').run('untracked');
    a.prepare('INSERT INTO t VALUES (?)').run('x');
    a.close();
    await sync.sync();
    expect(calls).toHaveLength(0);
    a = openJournal(join(dir, 'a.sqlite'));
  });

  it('really syncs the WAL file of a changed journal', async () => {
    const sync = new JournalSync();
    sync.track(a);
    a.prepare('INSERT INTO t VALUES (?)').run('x');
    await expect(sync.sync()).resolves.toBeUndefined();
    sync.close();
  });
});
