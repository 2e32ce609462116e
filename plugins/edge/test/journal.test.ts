// The traffic journal's pages and totals (spans, per-part index walks, counts table, hourly source index)
// agree with plain SQL over the same rows, before and after a cleanup, with lines slightly out of time order.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { TrafficJournal, type TrafficFilter, type TrafficRecord } from '../src/traffic/journal.js';

let seed = 7;
const rnd = (n: number) => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) % n;
};

const T0 = Date.UTC(2026, 0, 1);
function records(n: number, from: number): TrafficRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    // ~10 s apart, up to 2 s out of order (workers writing side by side)
    time_ms: T0 + (from + i) * 10_000 - rnd(2000),
    deployment: ['', 'a', 'b', 'c'][rnd(4)]!, host: `h${rnd(3)}.test`, method: ['GET', 'GET', 'POST', 'DELETE'][rnd(4)]!,
    path: ['/', '/api/x', '/login'][rnd(3)]!, status: [200, 200, 201, 404, 500, 503][rnd(6)]!, bytes: rnd(1000), duration_ms: rnd(100),
    source_ip: `10.0.0.${rnd(40)}`, user_agent: 'ua', blocked: false, protected: false, user: '',
  }));
}

function naive(db: Database.Database, f: TrafficFilter, limit: number, offset: number) {
  const c: string[] = [];
  const p: unknown[] = [];
  if (f.deployment !== undefined) (c.push('deployment = ?'), p.push(f.deployment));
  if (f.deployments) (c.push(`deployment IN (${f.deployments.map(() => '?').join(',')})`), p.push(...f.deployments));
  if (f.method) (c.push('method = ?'), p.push(f.method));
  if (f.status_code !== undefined) (c.push('status = ?'), p.push(f.status_code));
  if (f.status_group) (c.push('status / 100 = ?'), p.push(Number(f.status_group[0])));
  if (f.source_ip) (c.push('source_ip = ?'), p.push(f.source_ip));
  if (f.host) (c.push('host = ?'), p.push(f.host));
  if (f.start_ms !== undefined) (c.push('time_ms >= ?'), p.push(f.start_ms));
  if (f.end_ms !== undefined) (c.push('time_ms <= ?'), p.push(f.end_ms));
  const w = c.length ? `WHERE ${c.join(' AND ')}` : '';
  return {
    ids: (db.prepare(`SELECT id FROM traffic ${w} ORDER BY id DESC LIMIT ? OFFSET ?`).all(...p, limit, offset) as { id: number }[]).map((r) => r.id),
    total: (db.prepare(`SELECT COUNT(*) AS n FROM traffic ${w}`).get(...p) as { n: number }).n,
  };
}

const hour = 3_600_000;
const filters: TrafficFilter[] = [
  {}, { deployment: 'a' }, { deployment: '' }, { deployments: ['a', 'c'] }, { status_group: '5xx' }, { status_code: 404 },
  { deployment: 'b', status_group: '2xx' }, { deployment: 'c', method: 'DELETE', status_code: 500 }, { method: 'POST' },
  { source_ip: '10.0.0.7' }, { source_ip: '10.0.0.7', start_ms: T0 + 20 * hour }, { start_ms: T0 + 10 * hour, end_ms: T0 + 30 * hour + 123 },
  { deployment: 'a', start_ms: T0 + 5 * hour, end_ms: T0 + 9 * hour }, { host: 'h1.test', status_group: '4xx' }, { end_ms: T0 + 2 * hour },
];

describe('traffic journal', () => {
  it('pages and counts like plain SQL, before and after a cleanup', () => {
    const db = new Database(':memory:');
    const journal = new TrafficJournal(db);
    // Batches of different sizes: big ones (split into spans), a trickle (extending the last span)
    let n = 0;
    for (const size of [5000, 3, 1, 700, 2500, 17]) {
      journal.add(records(size, n));
      n += size;
    }
    const check = () => {
      for (const f of filters) {
        for (const [limit, offset] of [[50, 0], [20, 130]] as const) {
          const got = journal.query(f, limit, offset, true);
          const want = naive(db, f, limit, offset);
          expect({ f, ids: got.items.map((r) => r.id), total: got.total }).toEqual({ f, ids: want.ids, total: want.total });
        }
        const capped = journal.query(f, 10, 0);
        expect(capped.total).toBe(Math.min(naive(db, f, 1, 0).total, 10_000));
      }
    };
    check();
    const before = T0 + 12 * hour + 777;
    const expected = (db.prepare('SELECT COUNT(*) AS n FROM traffic WHERE time_ms < ?').get(before) as { n: number }).n;
    expect(journal.cleanup(before)).toBe(expected);
    expect((db.prepare('SELECT COUNT(*) AS n FROM traffic WHERE time_ms < ?').get(before) as { n: number }).n).toBe(0);
    check();
    // The counts table still matches the rows
    expect(db.prepare('SELECT SUM(n) AS n FROM traffic_counts').get()).toEqual(db.prepare('SELECT COUNT(*) AS n FROM traffic').get());
  });

  it('builds spans and counts for a journal written before they existed', () => {
    const db = new Database(':memory:');
    new TrafficJournal(db).add(records(3000, 0));
    db.exec('DELETE FROM traffic_spans; DELETE FROM traffic_counts;');
    const journal = new TrafficJournal(db);
    const f = { deployment: 'b', start_ms: T0 + hour, end_ms: T0 + 5 * hour };
    expect(journal.query(f, 10, 0, true).total).toBe(naive(db, f, 10, 0).total);
    expect(journal.query({ status_code: 201 }, 10, 0).total).toBe(naive(db, { status_code: 201 }, 10, 0).total);
  });
});
