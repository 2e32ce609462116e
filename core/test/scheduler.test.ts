import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CoreScheduler } from '../src/scheduler/scheduler.js';
import { openJournal, type Journal } from '../src/store/journal.js';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, child: () => quiet } as never;

describe('CoreScheduler', () => {
  const opened: Journal[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'scheduler-'));
  afterEach(() => {
    for (const db of opened.splice(0)) db.close();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("stopping one agent's scheduler leaves another's jobs in the same process running", async () => {
    const make = (name: string) => {
      const db = openJournal(join(dir, `${name}.sqlite`));
      opened.push(db);
      return new CoreScheduler(db, quiet);
    };
    const a = make('a');
    const b = make('b');
    const fired = { a: 0, b: 0 };
    // Same plugin and job names in both agents.
    const pa = a.forPlugin('plugin');
    const pb = b.forPlugin('plugin');
    pa.job({ name: 'tick', cron: '* * * * * *', run: () => void fired.a++ });
    pb.job({ name: 'tick', cron: '* * * * * *', run: () => void fired.b++ });
    pa.startAll();
    pb.startAll();
    a.stop();
    const before = fired.b;
    await new Promise((r) => setTimeout(r, 2300));
    expect(fired.a).toBe(0);
    expect(fired.b - before).toBeGreaterThanOrEqual(1);
    expect(pb.list()[0]!.next_run).not.toBeNull();
    b.stop();
    expect(pb.list()[0]!.next_run).toBeNull();
  });
});
