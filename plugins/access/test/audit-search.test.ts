// The audit journal's search (block postings, block time bounds) agrees with plain SQL over the same rows, for
// many filter and visibility combinations: after ingest, after rows are retimed, deleted or appended by another
// connection, after a restart, and after the migration of a journal of the old layout (nine column indexes).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuditEventInput } from '@agent/sdk';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import type { AuditSearchQuery } from '../src/api.js';
import { AuditJournal, type Journal } from '../src/audit/journal.js';
import { seededRandom } from '../../../test/helpers/random.js';

/** A journal as the plugin host opens one (WAL). */
function openJournal(path: string): Journal {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  return db;
}

const rnd = seededRandom(11);

const ACTORS = [
  ['user', 'user:1'],
  ['user', 'user:2'],
  ['user', 'user:3'],
  ['api_key', 'api_key:1'],
  ['api_key', 'api_key:2'],
  ['system', 'system:backups'],
] as const;
function event(): AuditEventInput {
  const [actor_type, actor_id] = ACTORS[rnd(ACTORS.length)]!;
  const deployment = rnd(10) < 6 ? `app-${rnd(12)}` : null;
  const resource_type = ['deployments', 'users', 'backups', 'proxy'][rnd(4)]!;
  return {
    actor_type,
    actor_id,
    actor_name: actor_id,
    action: `${resource_type}.${['create', 'update', 'delete'][rnd(3)]}`,
    resource_type,
    resource_id: deployment ?? (rnd(3) === 0 ? null : String(rnd(40))),
    deployment,
    success: rnd(8) !== 0,
    status: 200,
    client_ip: rnd(5) === 0 ? null : `10.0.0.${rnd(6)}`,
    detail: rnd(3) === 0 ? { n: rnd(100) } : null,
  };
}

const T0 = Date.UTC(2026, 0, 1);
const MIN = 60_000;

/** A filter (equals, visibility, window) as plain SQL over audit_events: its ids, newest first, and their count. */
function naive(db: Journal, q: Omit<AuditSearchQuery, 'limit'>): number[] {
  const c: string[] = [];
  const p: unknown[] = [];
  for (const [k, v] of Object.entries(q.equals ?? {})) {
    if (v === undefined) continue;
    c.push(`${k} = ?`);
    p.push(k === 'success' ? (v ? 1 : 0) : v);
  }
  if (q.anyOf) {
    const any = q.anyOf.map((a) => {
      if ('present' in a) return 'deployment IS NOT NULL';
      p.push(...a.values);
      return a.values.length ? `${a.field} IN (${a.values.map(() => '?').join(',')})` : '0';
    });
    c.push(any.length ? `(${any.join(' OR ')})` : '0');
  }
  if (q.start_ms !== undefined) (c.push('time_ms >= ?'), p.push(q.start_ms));
  if (q.end_ms !== undefined) (c.push('time_ms <= ?'), p.push(q.end_ms));
  const w = c.length ? `WHERE ${c.join(' AND ')}` : '';
  return db
    .prepare(`SELECT id FROM audit_events ${w} ORDER BY id DESC`)
    .pluck()
    .all(...p) as number[];
}

function queries(): Omit<AuditSearchQuery, 'limit'>[] {
  const base: Omit<AuditSearchQuery, 'limit'>[] = [
    {},
    { equals: { actor_id: 'user:2' } },
    { equals: { actor_type: 'api_key' } },
    { equals: { action: 'users.delete' } },
    { equals: { resource_type: 'proxy' } },
    { equals: { resource_id: '7' } },
    { equals: { resource_id: 'app-3' } },
    { equals: { deployment: 'app-5' } },
    { equals: { success: false } },
    { equals: { success: true } },
    { equals: { client_ip: '10.0.0.4' } },
    { equals: { actor_id: 'user:1', action: 'deployments.update' } },
    { equals: { actor_type: 'user', deployment: 'app-1', success: true } },
    { equals: { actor_id: 'nobody' } },
    { equals: { deployment: 'app-2', resource_type: 'users' } },
    {
      anyOf: [
        { field: 'actor_id', values: ['user:3', 'api_key:2'] },
        { field: 'deployment', values: ['app-1', 'app-9'] },
      ],
    },
    {
      anyOf: [
        { field: 'actor_id', values: ['user:2'] },
        { field: 'deployment', present: true },
      ],
    },
    { anyOf: [{ field: 'actor_id', values: ['user:2'] }], equals: { action: 'backups.create' } },
    { anyOf: [{ field: 'actor_id', values: [] }] },
    { anyOf: [] },
    {
      anyOf: [
        { field: 'deployment', values: ['app-4'] },
        { field: 'actor_id', values: ['system:backups'] },
      ],
      equals: { success: false },
    },
  ];
  const windows: Pick<AuditSearchQuery, 'start_ms' | 'end_ms'>[] = [
    {},
    { start_ms: T0 + 5000 * MIN },
    { end_ms: T0 + 3000 * MIN + 17 },
    { start_ms: T0 + 2000 * MIN - 5, end_ms: T0 + 9000 * MIN + 3 },
    { start_ms: T0 + 100 * MIN, end_ms: T0 + 100 * MIN },
    { start_ms: T0 + 10_000_000 * MIN },
  ];
  const out: Omit<AuditSearchQuery, 'limit'>[] = [];
  for (const b of base) for (const w of windows) out.push({ ...b, ...w });
  return out;
}

function check(audit: AuditJournal, db: Journal) {
  audit.flush();
  const byId = db.prepare('SELECT * FROM audit_events WHERE id = ?');
  for (const q of queries()) {
    const all = naive(db, q);
    for (const [limit, offset] of [
      [50, 0],
      [7, 130],
      [20, 4090],
      [1000, 0],
    ] as const) {
      const got = audit.search({ ...q, limit, offset, countCap: 1_000_000 });
      expect({ q, limit, offset, ids: got.rows.map((r) => r.id), total: got.total, exact: got.exact }).toEqual({
        q,
        limit,
        offset,
        ids: all.slice(offset, offset + limit),
        total: all.length,
        exact: true,
      });
    }
    // A capped count: exact up to the cap, then the cap (unfiltered and time-only totals stay exact).
    const capped = audit.search({ ...q, limit: 5, countCap: 300 });
    const filtered = Object.values(q.equals ?? {}).some((v) => v !== undefined) || q.anyOf !== undefined;
    const total = filtered ? Math.min(all.length, 300) : all.length;
    expect({ q, ids: capped.rows.map((r) => r.id), total: capped.total, exact: capped.exact }).toEqual({
      q,
      ids: all.slice(0, 5),
      total,
      exact: !filtered || all.length <= 300,
    });
    // The rows are the table's.
    expect(capped.rows).toEqual(all.slice(0, 5).map((id) => byId.get(id)));
  }
}

function rowsAndPostingsAgree(db: Journal) {
  // Every block's stored count and bounds match its rows.
  const blocks = db.prepare('SELECT block, n, min_time, max_time FROM audit_blocks ORDER BY block').all();
  const actual = db
    .prepare('SELECT id >> 12 AS block, COUNT(*) AS n, MIN(time_ms) AS min_time, MAX(time_ms) AS max_time FROM audit_events GROUP BY id >> 12 ORDER BY block')
    .all();
  expect(blocks).toEqual(actual);
  const postings = db.prepare('SELECT COUNT(*) AS n FROM audit_postings WHERE block NOT IN (SELECT block FROM audit_blocks)').get() as { n: number };
  expect(postings.n).toBe(0);
}

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tempJournal = () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-audit-search-'));
  dirs.push(dir);
  return join(dir, 'journal.sqlite');
};

describe('audit search', () => {
  it('pages and counts like plain SQL: ingest, retime, cleanup, external writes, restart', () => {
    const path = tempJournal();
    let db = openJournal(path);
    let audit = new AuditJournal(db);
    // Bursts of different sizes, flushed at different points: blocks are finished across flushes.
    for (const size of [5000, 3, 1, 700, 9000, 17, 6000]) {
      for (let i = 0; i < size; i++) audit.record(event());
      audit.flush();
    }
    check(audit, db);
    // Times spread over days (another connection, as an operator or the benchmark would), one block shuffled:
    // its rows are out of time order, which the block bounds must keep exact.
    const other = new Database(path);
    other.prepare('UPDATE audit_events SET time_ms = ? + id * ?').run(T0, MIN);
    other.prepare('UPDATE audit_events SET time_ms = ? + ((id * 7919) % 20000) * ? WHERE id BETWEEN 8192 AND 12287').run(T0, MIN);
    check(audit, db);
    rowsAndPostingsAgree(db);
    // A cleanup cut through a block, then rows deleted and changed by hand.
    const cut = T0 + 6000 * MIN + 30;
    const range = audit.idRange(undefined, cut - 1)!;
    const deleted = db.prepare('DELETE FROM audit_events WHERE id BETWEEN ? AND ? AND time_ms < ?').run(range.first, range.last, cut).changes;
    expect(deleted).toBeGreaterThan(5000);
    other.prepare("DELETE FROM audit_events WHERE actor_id = 'user:3' AND id % 3 = 0").run();
    other.prepare("UPDATE audit_events SET deployment = 'app-5', action = 'users.delete' WHERE id % 17 = 0").run();
    check(audit, db);
    rowsAndPostingsAgree(db);
    // Rows appended by another connection (ids after the writer's), then more from the writer.
    const insert = other.prepare(
      'INSERT INTO audit_events (time, time_ms, actor_type, actor_id, action, resource_type, deployment, success) VALUES (?, ?, ?, ?, ?, ?, ?, 1)',
    );
    for (let i = 0; i < 5000; i++) insert.run('x', T0 + (21_000 + i) * MIN, 'user', 'user:2', 'users.create', 'users', i % 2 ? 'app-1' : null);
    for (let i = 0; i < 300; i++) audit.record(event());
    check(audit, db);
    rowsAndPostingsAgree(db);
    // Restart: the open block is rebuilt from its rows; ids and times carry on.
    const lastId = (db.prepare('SELECT MAX(id) AS id FROM audit_events').get() as { id: number }).id;
    audit.flush();
    db.close();
    db = openJournal(path);
    audit = new AuditJournal(db);
    check(audit, db);
    for (let i = 0; i < 2000; i++) audit.record(event());
    audit.flush();
    const ids = db.prepare('SELECT id, time_ms FROM audit_events WHERE id > ? ORDER BY id').all(lastId) as { id: number; time_ms: number }[];
    expect(ids[0]!.id).toBe(lastId + 1);
    expect(ids.every((r, i) => i === 0 || r.time_ms >= ids[i - 1]!.time_ms)).toBe(true);
    check(audit, db);
    rowsAndPostingsAgree(db);
    other.close();
    db.close();
  });

  it('migrates a journal of the old layout (nine column indexes, rows out of time order)', () => {
    const path = tempJournal();
    const old = new Database(path);
    old.exec(`CREATE TABLE audit_events (
      id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, time_ms INTEGER NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT NOT NULL,
      actor_name TEXT, action TEXT NOT NULL, resource_type TEXT NOT NULL, resource_id TEXT, deployment TEXT, success INTEGER NOT NULL,
      status INTEGER, client_ip TEXT, detail TEXT);
      CREATE INDEX audit_time ON audit_events(time_ms);
      CREATE INDEX audit_actor ON audit_events(actor_id, time_ms);
      CREATE INDEX audit_deployment ON audit_events(deployment, time_ms);
      CREATE INDEX audit_success ON audit_events(success, time_ms);`);
    const insert =
      old.prepare(`INSERT INTO audit_events (time, time_ms, actor_type, actor_id, actor_name, action, resource_type, resource_id, deployment, success, status, client_ip, detail)
      VALUES (@time, @time_ms, @actor_type, @actor_id, @actor_name, @action, @resource_type, @resource_id, @deployment, @success, @status, @client_ip, @detail)`);
    old.transaction(() => {
      for (let i = 1; i <= 14_000; i++) {
        const e = event();
        // Mostly in order, with a few minutes of jitter (requests finishing out of order).
        const time_ms = T0 + i * MIN - rnd(5) * MIN;
        insert.run({
          ...e,
          time: new Date(time_ms).toISOString(),
          time_ms,
          success: e.success ? 1 : 0,
          actor_name: e.actor_name ?? null,
          resource_id: e.resource_id ?? null,
          deployment: e.deployment ?? null,
          status: e.status ?? null,
          client_ip: e.client_ip ?? null,
          detail: e.detail ? JSON.stringify(e.detail) : null,
        });
      }
    })();
    old.close();
    const db = openJournal(path);
    const audit = new AuditJournal(db);
    const indexes = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_events' AND sql IS NOT NULL").all();
    expect(indexes).toEqual([]);
    rowsAndPostingsAgree(db);
    check(audit, db);
    for (let i = 0; i < 1000; i++) audit.record(event());
    check(audit, db);
    db.close();
  });
});
