// The journal's write side: group commit (records of one turn share a commit and resolve only once it is on disk,
// a failed commit fails its records) and the move of an older agent's events out of the core's journal.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuditEventInput } from '@agent/sdk';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { AUDIT_CACHE_KIB, AuditJournal, type Journal } from '../src/audit/journal.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-audit-journal-'));
  dirs.push(dir);
  return dir;
};
function openJournal(path: string): Journal {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  return db;
}
const event = (i: number): AuditEventInput => ({
  actor_type: 'user',
  actor_id: 'user:1',
  action: 'widgets.create',
  resource_type: 'widgets',
  resource_id: String(i),
  success: true,
  status: 201,
});
const count = (path: string) => {
  const db = new Database(path, { readonly: true });
  const n = (db.prepare('SELECT COUNT(*) AS n FROM audit_events').get() as { n: number }).n;
  db.close();
  return n;
};

describe('audit journal writes', () => {
  it('commits the records of one turn together and resolves them once they are stored', async () => {
    const path = join(tempDir(), 'audit.sqlite');
    const db = openJournal(path);
    const journal = new AuditJournal(db);
    const pending = Array.from({ length: 500 }, (_, i) => journal.record(event(i)));
    // One batch, one promise; nothing is stored before the commit.
    expect(new Set(pending).size).toBe(1);
    expect(count(path)).toBe(0);
    await Promise.all(pending);
    expect(count(path)).toBe(500);
    // The next turn's records are a new batch.
    const next = journal.record(event(500));
    expect(next).not.toBe(pending[0]);
    await next;
    expect(count(path)).toBe(501);
    await journal.close();
    db.close();
  });

  it("keeps the agent's memory flat as the journal grows: no memory-mapped pages, a small page cache", async () => {
    const db = openJournal(join(tempDir(), 'audit.sqlite'));
    db.pragma('mmap_size = 268435456');
    const journal = new AuditJournal(db);
    // Pages read through a mapping stay resident and the page cache keeps what commits wrote: both would grow
    // with the journal (a soak's RSS rose with every audited write).
    expect(db.pragma('mmap_size', { simple: true })).toBe(0);
    expect(db.pragma('cache_size', { simple: true })).toBe(-AUDIT_CACHE_KIB);
    expect(AUDIT_CACHE_KIB).toBeLessThanOrEqual(4096);
    await Promise.all(Array.from({ length: 2000 }, (_, i) => journal.record(event(i))));
    expect(journal.search({ limit: 5 }).total).toBe(2000);
    await journal.close();
    db.close();
  });

  it('indexes after a crash what writes committed without their postings (rows only)', async () => {
    const path = join(tempDir(), 'audit.sqlite');
    let db = openJournal(path);
    const journal = new AuditJournal(db);
    // Across a block boundary (4096 ids), in commits of a few hundred, with no reader in between; then "crash".
    for (let i = 0; i < 5000; i += 250) await Promise.all(Array.from({ length: 250 }, (_, j) => journal.record(event((i + j) % 7))));
    db.close();
    db = openJournal(path);
    const reopened = new AuditJournal(db);
    for (const id of ['0', '3', '6']) {
      const sql = (db.prepare('SELECT COUNT(*) AS n FROM audit_events WHERE resource_id = ?').get(id) as { n: number }).n;
      expect(reopened.search({ equals: { resource_id: id }, limit: 1, countCap: 10_000 }).total).toBe(sql);
    }
    expect(reopened.search({ limit: 1 }).total).toBe(5000);
    db.close();
  });

  it('fails the records of a commit that cannot be written', async () => {
    const db = openJournal(join(tempDir(), 'audit.sqlite'));
    const journal = new AuditJournal(db);
    db.close();
    await expect(journal.record(event(1))).rejects.toThrow(/not open/);
  });

  it("takes over an older agent's events from the core's journal, with their ids, once", async () => {
    const dir = tempDir();
    const legacyPath = join(dir, 'journal.sqlite');
    const legacy = openJournal(legacyPath);
    const older = new AuditJournal(legacy);
    await Promise.all(Array.from({ length: 300 }, (_, i) => older.record(event(i))));
    legacy.exec('CREATE TABLE scheduler_runs (id INTEGER PRIMARY KEY)');
    legacy.close();

    const path = join(dir, 'audit.sqlite');
    let db = openJournal(path);
    let journal = new AuditJournal(db, legacyPath);
    expect(journal.search({ limit: 5 }).total).toBe(300);
    expect(journal.search({ equals: { resource_id: '7' }, limit: 5 }).rows.map((r) => r.id)).toEqual([8]);
    await journal.record(event(300));
    expect(journal.search({ limit: 1 }).rows[0]!.id).toBe(301);
    db.close();
    // The core's journal keeps its own tables and no audit table; opening again copies nothing twice.
    const left = new Database(legacyPath, { readonly: true });
    expect(
      (left.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[]).map(
        (t) => t.name,
      ),
    ).toEqual(['scheduler_runs']);
    // and the pages of the dropped tables are given back.
    expect(left.pragma('freelist_count', { simple: true })).toBe(0);
    left.close();
    db = openJournal(path);
    journal = new AuditJournal(db, legacyPath);
    expect(journal.search({ limit: 1 }).total).toBe(301);
    db.close();
  });

  it('finishes a move interrupted between the copy and the drop without duplicates', async () => {
    const dir = tempDir();
    const legacyPath = join(dir, 'journal.sqlite');
    const legacy = openJournal(legacyPath);
    const older = new AuditJournal(legacy);
    await Promise.all(Array.from({ length: 50 }, (_, i) => older.record(event(i))));
    legacy.close();
    // As if the previous start copied the rows and died before dropping the old tables.
    const path = join(dir, 'audit.sqlite');
    const first = openJournal(path);
    new AuditJournal(first).flush();
    first.prepare('ATTACH DATABASE ? AS legacy').run(legacyPath);
    first.exec('INSERT INTO main.audit_events SELECT * FROM legacy.audit_events; DETACH DATABASE legacy');
    first.close();
    const db = openJournal(path);
    const journal = new AuditJournal(db, legacyPath);
    expect(journal.search({ limit: 100 }).rows.map((r) => r.id)).toEqual(Array.from({ length: 50 }, (_, i) => 50 - i));
    db.close();
  });
});
