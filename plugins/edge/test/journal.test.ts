// The traffic journal's pages and totals (spans, per-part index walks, counts table, hourly source index)
// agree with plain SQL over the same rows, before and after a cleanup, with lines slightly out of time order.
// The access-log parser agrees with JSON.parse, and the reader commits rows and offsets together.
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { Logger, SqlDatabase } from '@agent/sdk';
import { HeavyHitters, select, TrafficJournal, type TrafficFilter, type TrafficRecord } from '../src/traffic/journal.js';
import { pathMatcher, requiredPiece } from '../src/traffic/pattern.js';
import { parseLine, parseLines } from '../src/traffic/parse.js';
import { AccessLogReader } from '../src/traffic/ingest.js';
import { seededRandom } from '../../../test/helpers/random.js';

const rnd = seededRandom(7);

const T0 = Date.UTC(2026, 0, 1);
function records(n: number, from: number): TrafficRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    // ~10 s apart, up to 2 s out of order (workers writing side by side)
    time_ms: T0 + (from + i) * 10_000 - rnd(2000),
    deployment: ['', 'a', 'b', 'c'][rnd(4)]!,
    host: `h${rnd(3)}.test`,
    method: ['GET', 'GET', 'POST', 'DELETE'][rnd(4)]!,
    path: ['/', '/api/x', '/login'][rnd(3)]!,
    status: [200, 200, 201, 404, 500, 503][rnd(6)]!,
    bytes: rnd(1000),
    duration_ms: rnd(100),
    source_ip: `10.0.0.${rnd(40)}`,
    user_agent: 'ua',
    blocked: false,
    protected: false,
    user: '',
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
  if (f.path !== undefined) (c.push("path LIKE ? ESCAPE '\\'"), p.push(likePattern(f.path)));
  const w = c.length ? `WHERE ${c.join(' AND ')}` : '';
  return {
    ids: (db.prepare(`SELECT id FROM traffic ${w} ORDER BY id DESC LIMIT ? OFFSET ?`).all(...p, limit, offset) as { id: number }[]).map((r) => r.id),
    total: (db.prepare(`SELECT COUNT(*) AS n FROM traffic ${w}`).get(...p) as { n: number }).n,
  };
}

/** What ran the path filter before, in SQLite: the reference. `*` → `%`; without one, anywhere in the path. */
function likePattern(pattern: string): string {
  const escaped = pattern.replace(/[\\%_]/g, (c) => `\\${c}`);
  return escaped.includes('*') ? escaped.replace(/\*/g, '%') : `%${escaped}%`;
}

const hour = 3_600_000;
const filters: TrafficFilter[] = [
  {},
  { deployment: 'a' },
  { deployment: '' },
  { deployments: ['a', 'c'] },
  { deployments: [] },
  { deployments: ['a'], status_code: 500 },
  { status_group: '5xx' },
  { status_code: 404 },
  { deployment: 'b', status_group: '2xx' },
  { deployment: 'c', method: 'DELETE', status_code: 500 },
  { method: 'POST' },
  { source_ip: '10.0.0.7' },
  { source_ip: '10.0.0.7', start_ms: T0 + 20 * hour },
  { start_ms: T0 + 10 * hour, end_ms: T0 + 30 * hour + 123 },
  { deployment: 'a', start_ms: T0 + 5 * hour, end_ms: T0 + 9 * hour },
  { host: 'h1.test', status_group: '4xx' },
  { end_ms: T0 + 2 * hour },
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
        for (const [limit, offset] of [
          [50, 0],
          [20, 130],
        ] as const) {
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

  it('an empty deployments list matches nothing, not the rows of unknown hosts', async () => {
    const journal = new TrafficJournal(new Database(':memory:'));
    journal.add(records(500, 0));
    expect(journal.query({ deployments: [] }, 10, 0)).toEqual({ items: [], total: 0, capped: false });
    expect(journal.query({ deployments: [] }, 10, 0, true).total).toBe(0);
    expect((await journal.search({ deployments: [], path: '/' }, 10, 0, true)).total).toBe(0);
    expect((await journal.stats({ deployments: [] })).total.requests).toBe(0);
  });

  it('retires a deployment: its rows up to the cut and their counts move to the retired name, in chunks', async () => {
    const db = new Database(':memory:');
    const journal = new TrafficJournal(db);
    journal.add(records(6000, 0));
    const until = T0 + 10 * hour;
    const count = (sql: string, ...p: unknown[]) => (db.prepare(`SELECT COUNT(*) AS n FROM traffic WHERE ${sql}`).get(...p) as { n: number }).n;
    const old = count('deployment = ? AND time_ms <= ?', 'a', until);
    const later = count('deployment = ? AND time_ms > ?', 'a', until);
    const others = count("deployment <> 'a'");
    expect(old).toBeGreaterThan(500);
    expect(later).toBeGreaterThan(0);
    // Chunks of 97 rows: many transactions per status code.
    expect(await journal.retire('a', 'a~20260101000000', until, 97)).toBe(old);
    expect(count('deployment = ?', 'a~20260101000000')).toBe(old);
    expect(count('deployment = ?', 'a')).toBe(later);
    expect(count("deployment NOT IN ('a', 'a~20260101000000')")).toBe(others);
    // The counts table agrees with the rows, group by group.
    expect(db.prepare('SELECT deployment, method, status, n FROM traffic_counts WHERE n > 0 ORDER BY 1, 2, 3').all()).toEqual(
      db.prepare('SELECT deployment, method, status, COUNT(*) AS n FROM traffic GROUP BY 1, 2, 3 ORDER BY 1, 2, 3').all(),
    );
    for (const f of [
      { deployment: 'a' },
      { deployment: 'a~20260101000000' },
      { deployments: ['a'] },
      { deployment: 'a', status_code: 404 },
    ] as TrafficFilter[]) {
      const got = journal.query(f, 20, 0);
      const want = naive(db, f, 20, 0);
      expect({ f, ids: got.items.map((r) => r.id), total: got.total }).toEqual({ f, ids: want.ids, total: want.total });
    }
    expect(await journal.retire('a', 'a~20260101000001', T0)).toBe(0);
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

/** The parser before the fast path: JSON.parse for every line. */
function reference(line: string): TrafficRecord | null {
  if (line.length < 10 || line.charCodeAt(0) !== 123) return null;
  let o: Record<string, string>;
  try {
    o = JSON.parse(line) as Record<string, string>;
  } catch {
    return null;
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return null;
  const time = Number(o.time);
  const status = Number(o.status);
  if (!Number.isFinite(time) || !Number.isFinite(status)) return null;
  return {
    time_ms: Math.round(time * 1000),
    deployment: o.deployment ?? '',
    host: o.host ?? '',
    method: o.method ?? '',
    path: o.path ?? '',
    status,
    bytes: Number(o.bytes) || 0,
    duration_ms: Math.round((Number(o.duration) || 0) * 1000 * 1000) / 1000,
    source_ip: o.ip ?? '',
    user_agent: o.ua ?? '',
    blocked: o.blocked === '1',
    protected: o.protected === '1',
    user: o.user ?? '',
  };
}

const KEYS = ['time', 'deployment', 'host', 'method', 'path', 'status', 'bytes', 'duration', 'ip', 'ua', 'blocked', 'protected', 'user'];
/** A line as nginx writes it (values raw between the quotes: the caller escapes them, or not, on purpose). */
const nginxLine = (v: Record<string, string>) => `{${KEYS.map((k) => `"${k}":"${v[k] ?? ''}"`).join(',')}}`;
const base: Record<string, string> = {
  time: '1700000000.250',
  deployment: 'app',
  host: 'a.test',
  method: 'GET',
  path: '/x',
  status: '404',
  bytes: '12',
  duration: '0.015',
  ip: '1.2.3.4',
  ua: 'curl/8',
  blocked: '0',
  protected: '1',
  user: 'bob',
};
const oddLines = [
  nginxLine(base),
  nginxLine({ ...base, path: '/x?a=\\"1\\"', ua: 'back\\\\slash' }), // escapes (escape=json)
  nginxLine({ ...base, path: '/\\u001b[31m', ua: 'tab\\there' }), // escaped control characters
  nginxLine({ ...base, path: '/é/日本/😀', ua: 'Ünïcödé', user: 'zoë' }), // raw UTF-8
  nginxLine({ ...base, path: '/a\tb' }), // a raw control character: invalid JSON, refused by both
  nginxLine({ ...base, deployment: '', user: '', ua: '', bytes: '-', duration: '' }), // empty and non-numeric values
  nginxLine({ ...base, time: 'x' }),
  nginxLine({ ...base, status: '' }),
  nginxLine({ ...base, status: '5e2' }),
  '{"time":"1700000000.5","status":"200"}', // missing fields (an older log_format)
  '{"status":"200","time":"1700000000.5","ip":"9.9.9.9","deployment":"z"}', // another key order
  '{"time":1700000000.5,"status":200,"bytes":7,"deployment":3}', // numbers instead of strings
  `${nginxLine(base).slice(0, -1)},"extra":"1"}`, // an extra key
  `${nginxLine(base)}\r`,
  ` ${nginxLine(base)}`,
  `${nginxLine(base)} `,
  `${nginxLine(base)}}`,
  nginxLine(base).slice(0, -1),
  'not json',
  '',
  '[1,2,3,4,5,6,7,8,9,10]',
  'null      ',
  '{"time":"1","status":"2"',
  '{}        ',
];

describe('traffic path patterns', () => {
  it("match as SQLite's LIKE did, on random patterns and paths, also through the journal and its prefilter", async () => {
    const db = new Database(':memory:');
    const like = db.prepare("SELECT ? LIKE ? ESCAPE '\\' AS m").pluck();
    const rnd = seededRandom(3);
    const chars = ['a', 'A', 'b', '/', '%', '_', '\\', '?', 'é', 'É', '*'];
    const text = (n: number, alphabet: string[]) => Array.from({ length: n }, () => alphabet[rnd(alphabet.length)]).join('');
    const paths = Array.from({ length: 300 }, () => text(rnd(9), chars.slice(0, -1)));
    let compared = 0;
    for (let i = 0; i < 600; i++) {
      const pattern = text(rnd(6), chars);
      const m = pathMatcher(pattern);
      for (const path of paths) {
        expect(m(path), `${pattern} ${path}`).toBe(like.get(path, likePattern(pattern)) === 1);
        compared++;
      }
    }
    expect(compared).toBe(180_000);
    // The same paths as rows: the prefilter (`instr(lower(path), piece)`) never leaves out a row LIKE matches.
    const journal = new TrafficJournal(db);
    journal.add(records(paths.length, 0).map((r, i) => ({ ...r, path: paths[i]! })));
    for (let i = 0; i < 300; i++) {
      const pattern = text(1 + rnd(5), chars);
      const got = await journal.search({ path: pattern }, 1000, 0, true);
      const want = naive(db, { path: pattern }, 1000, 0);
      expect({ pattern, ids: got.items.map((r) => r.id) }).toEqual({ pattern, ids: want.ids });
    }
    expect(requiredPiece('/API/*x*Édition-longue')).toBe('dition-l');
    expect(requiredPiece('*é*')).toBeNull();
    expect(requiredPiece('*')).toBeNull();
  });

  it('cost one pass over the path, whatever the pattern: ≤ 2 steps per character', () => {
    const path = `/${'a'.repeat(8190)}`;
    for (const pattern of [
      `${'a'.repeat(500)}b`,
      `*${'a'.repeat(300)}b*`,
      `${'*a'.repeat(15)}*b`,
      `/*${'a'.repeat(200)}*${'a'.repeat(200)}c`,
      `*${'ab'.repeat(200)}`,
    ]) {
      const m = pathMatcher(pattern);
      expect(m(path), pattern).toBe(false);
      expect(m.steps, pattern).toBeLessThanOrEqual(2 * (path.length + pattern.length));
    }
  });

  it('page and count like LIKE through the journal, with the other filters', async () => {
    const db = new Database(':memory:');
    const journal = new TrafficJournal(db);
    const rows = records(6000, 0).map((r, i) => ({ ...r, path: ['/', '/api/x', '/API/y?q=1', '/login', `/static/${i % 7}.js`, '/100%_off'][i % 6]! }));
    journal.add(rows);
    const cases: TrafficFilter[] = [
      { path: '/api/*' },
      { path: 'api' },
      { path: '*.js' },
      { path: '%_' },
      { path: '/nothing*' },
      { path: '/*/*', deployment: 'a' },
      { path: 'api', deployments: ['a', 'c'], status_group: '5xx' },
      { path: '/login', start_ms: T0 + 2 * hour, end_ms: T0 + 9 * hour },
      { path: '*', source_ip: '10.0.0.7' },
    ];
    for (const f of cases) {
      for (const [limit, offset] of [
        [50, 0],
        [20, 130],
        [10, 5990],
      ] as const) {
        const got = await journal.search(f, limit, offset, true);
        const want = naive(db, f, limit, offset);
        expect({ f, ids: got.items.map((r) => r.id), total: got.total, capped: got.capped }).toEqual({ f, ids: want.ids, total: want.total, capped: false });
      }
    }
    // Counting stops past the cap, as for the other filters.
    journal.add(records(12_000, 6000).map((r) => ({ ...r, path: '/many' })));
    const capped = await journal.search({ path: '/many' }, 10, 0);
    expect(capped).toMatchObject({ total: 10_000, capped: true });
    expect(capped.items.map((r) => r.id)).toEqual(naive(db, { path: '/many' }, 10, 0).ids);
    expect(() => journal.query({ path: '/many' }, 10, 0)).toThrow(/search/);
  });

  it('a search over long repetitive paths reads in slices, lets the event loop turn between them, and stops at its budget', async () => {
    const db = new Database(':memory:');
    const journal = new TrafficJournal(db);
    // 30k rows of 2 kB paths of one character: what made LIKE quadratic (here: one pass each).
    const long = `/${'a'.repeat(2047)}`;
    for (let i = 0; i < 30_000; i += 5000) journal.add(records(5000, i).map((r) => ({ ...r, path: long })));
    const pattern = `*${'a'.repeat(500)}b*`;
    const slices: { ms: number; rows: number }[] = [];
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    const found = await journal.search({ path: pattern }, 100, 0, true, { sliceMs: 8, onSlice: (ms, rows) => slices.push({ ms, rows }) });
    clearInterval(timer);
    expect(found).toEqual({ items: [], total: 0, capped: false });
    expect(slices.reduce((n, s) => n + s.rows, 0)).toBe(30_000);
    expect(slices.length).toBeGreaterThan(1);
    // Other work ran between the slices: the timer fired in most of the gaps.
    expect(ticks).toBeGreaterThanOrEqual(slices.length / 2);
    // Each slice checks the clock every 64 rows (≈ 64 × 2 kB compared), so none reads a large share of the rows, and
    // a typical slice ends near its 8 ms. The longest slice is not bounded here: on a loaded machine the scheduler
    // can stretch any one of them, which says nothing of the search (its latency effect is test/no-stall's figure).
    expect(Math.max(...slices.map((s) => s.rows))).toBeLessThan(30_000 / 4);
    const byTime = slices.map((s) => s.ms).sort((a, b) => a - b);
    expect(byTime[Math.floor(byTime.length / 2)]!).toBeLessThan(50);
    // Two searches at once take turns: both finish, neither waits for the other to end.
    const order: string[] = [];
    await Promise.all(['x', 'y'].map((who) => journal.search({ path: pattern }, 10, 0, true, { sliceMs: 4, onSlice: () => order.push(who) })));
    const switches = order.filter((w, i) => i > 0 && w !== order[i - 1]).length;
    expect(switches).toBeGreaterThan(order.length / 3);
    // A budget too small for the journal: refused with 503 SEARCH_TIMEOUT, not an incomplete page.
    await expect(journal.search({ path: pattern }, 10, 0, true, { sliceMs: 2, budgetMs: 20 })).rejects.toMatchObject({ status: 503, code: 'SEARCH_TIMEOUT' });
    // A full page by then answers, with the count so far.
    const early = await journal.search({ path: '/a*' }, 10, 0, true, { sliceMs: 1, budgetMs: 1 });
    expect(early.items).toHaveLength(10);
    expect(early.capped).toBe(true);
  });
});

describe('traffic aggregates', () => {
  it('stats, top values and unknown domains agree with GROUP BY, read in slices', async () => {
    const db = new Database(':memory:');
    const journal = new TrafficJournal(db);
    journal.add(records(20_000, 0).map((r, i) => ({ ...r, path: `/p${i % 37}`, host: r.deployment ? r.host : `u${i % 13}.test` })));
    const window = { start_ms: T0 + 3 * hour, end_ms: T0 + 40 * hour };
    const sql = (q: string, ...p: unknown[]) => db.prepare(q).all(...p) as Record<string, number | string>[];
    const stats = await journal.stats({ ...window, deployments: ['a', 'b'] });
    const grouped = sql(
      'SELECT deployment, COUNT(*) AS n, SUM(bytes) AS bytes FROM traffic WHERE time_ms BETWEEN ? AND ? AND deployment IN (?, ?) GROUP BY deployment ORDER BY n DESC',
      window.start_ms,
      window.end_ms,
      'a',
      'b',
    );
    expect(stats.deployments.map((d) => [d.deployment, d.requests, d.bytes])).toEqual(grouped.map((g) => [g.deployment, g.n, g.bytes]));
    expect(stats.total.requests).toBe(grouped.reduce((n, g) => n + (g.n as number), 0));
    const durations = db
      .prepare('SELECT duration_ms FROM traffic WHERE time_ms BETWEEN ? AND ? AND deployment IN (?, ?) ORDER BY duration_ms')
      .pluck()
      .all(window.start_ms, window.end_ms, 'a', 'b') as number[];
    expect(stats.total.p50_ms).toBe(durations[Math.floor(0.5 * durations.length)]);
    expect(stats.total.p95_ms).toBe(durations[Math.floor(0.95 * durations.length)]);
    const top = await journal.top({ deployment: 'a', ...window }, 'path', 5);
    const topSql = sql(
      'SELECT path AS value, COUNT(*) AS requests FROM traffic WHERE deployment = ? AND time_ms BETWEEN ? AND ? GROUP BY path ORDER BY requests DESC, path LIMIT 5',
      'a',
      window.start_ms,
      window.end_ms,
    );
    expect(top).toEqual(topSql);
    const unknown = await journal.unknownDomains(window, 4);
    const unknownSql = sql(
      `SELECT host, COUNT(*) AS requests, COUNT(DISTINCT source_ip) AS sources, MIN(time_ms) AS first, MAX(time_ms) AS last FROM traffic
       WHERE deployment = '' AND time_ms BETWEEN ? AND ? GROUP BY host ORDER BY requests DESC, host LIMIT 4`,
      window.start_ms,
      window.end_ms,
    );
    expect(unknown).toEqual(unknownSql);
  });

  it('a time window costs a scan no more than the rows it reads (each statement seeks its own id range)', async () => {
    const journal = new TrafficJournal(new Database(':memory:'));
    for (let i = 0; i < 100_000; i += 10_000) journal.add(records(10_000, i));
    const time = async (f: TrafficFilter) => {
      const started = performance.now();
      const found = await journal.search({ ...f, path: '/nothing' }, 10, 0, true, { sliceMs: 1 });
      expect(found.total).toBe(0);
      return performance.now() - started;
    };
    const whole = await time({});
    // The window covers every row: the same work. (A second range on the rowid in the statement once made SQLite
    // seek from the window's start for every statement: quadratic, 10× slower at 100k rows and worse beyond.)
    const windowed = await time({ start_ms: T0 - hour, end_ms: T0 + 1000 * hour });
    expect(windowed).toBeLessThan(3 * whole + 50);
  });

  it('percentiles by selection give what a sort gives', () => {
    const rnd = seededRandom(12);
    for (const n of [1, 2, 7, 100, 5000]) {
      for (const spread of [1, 3, 1000]) {
        const values = Float64Array.from({ length: n }, () => rnd(spread) / 10);
        const sorted = Float64Array.from(values).sort();
        for (const p of [0, 0.5, 0.95, 0.999]) {
          const k = Math.min(n - 1, Math.floor(p * n));
          expect(select(Float64Array.from(values), k), `${n} ${spread} ${p}`).toBe(sorted[k]);
        }
      }
    }
  });

  it('heavy hitters: exact below capacity; past it, bounded and keeping every value more frequent than n / capacity', () => {
    const rnd = seededRandom(8);
    const small = new HeavyHitters<null>(100);
    const truth = new Map<string, number>();
    for (let i = 0; i < 5000; i++) {
      const k = `k${rnd(60)}`;
      small.add(k, () => null);
      truth.set(k, (truth.get(k) ?? 0) + 1);
    }
    const exact = [...truth].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 10);
    expect(small.top(10).map((t) => [t.key, t.count])).toEqual(exact);
    // 200,000 keys, all different but three frequent ones (what a flood of random paths looks like).
    const flood = new HeavyHitters<null>(1000);
    for (let i = 0; i < 200_000; i++) flood.add(i % 50 === 0 ? `hot${i % 3}` : `cold${i}`, () => null);
    const hot = flood.top(3);
    expect(hot.map((t) => t.key).sort()).toEqual(['hot0', 'hot1', 'hot2']);
    for (const t of hot) expect(t.count - 200_000 / 150).toBeLessThanOrEqual(200_000 / 1000);
    expect(flood.top(5000)).toHaveLength(1000);
  });
});

describe('access-log parsing and reading', () => {
  it('gives what JSON.parse gives, line by line and over a chunk', () => {
    for (const line of oddLines) expect({ line, r: parseLine(line) }).toEqual({ line, r: reference(line) });
    const got: TrafficRecord[] = [];
    parseLines(oddLines.join('\n'), (records) => got.push(...records), 3);
    expect(got).toEqual(oddLines.map(reference).filter((r) => r !== null));
    expect(got.length).toBeGreaterThan(8);
  });

  it('reads appended lines once, in groups, with the offset committed with the rows', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'edge-ingest-'));
    const path = join(dir, 'access.log');
    try {
      const lines = Array.from({ length: 1000 }, (_, i) =>
        nginxLine({ ...base, time: `${1_700_000_000 + i}.000`, ip: `10.0.${i % 7}.1`, path: i % 10 ? `/p${i}` : `/q"${i}`.replace('"', '\\"') }),
      );
      writeFileSync(path, `${lines.slice(0, 600).join('\n')}\n${lines[600]!.slice(0, 20)}`); // ends mid-line
      const db = new Database(':memory:');
      const journal = new TrafficJournal(db);
      const seen: TrafficRecord[] = [];
      const ends: boolean[] = [];
      const log = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined } as unknown as Logger;
      const sink = { observe: (r: TrafficRecord[]) => void seen.push(...r), end: (ok: boolean) => void ends.push(ok) };
      const reader = new AccessLogReader(path, db as unknown as SqlDatabase, journal, sink, log);
      expect(await reader.readNew()).toBe(600);
      appendFileSync(path, `${lines[600]!.slice(20)}\n${lines.slice(601).join('\n')}\n`);
      expect(await reader.readNew()).toBe(400);
      expect(await reader.readNew()).toBe(0);
      expect(seen).toEqual(lines.map(reference));
      expect(ends).toEqual([true, true]);
      const want = new Database(':memory:');
      new TrafficJournal(want).add(lines.map(reference) as TrafficRecord[]);
      for (const table of ['traffic', 'traffic_counts'])
        expect(db.prepare(`SELECT * FROM ${table} ORDER BY 1, 2, 3`).all()).toEqual(want.prepare(`SELECT * FROM ${table} ORDER BY 1, 2, 3`).all());
      // A trickle extends the last span: the two reads' spans cover the rows exactly
      expect(db.prepare('SELECT SUM(rows) AS n, MIN(first_id) AS lo, MAX(last_id) AS hi FROM traffic_spans').get()).toEqual({ n: 1000, lo: 1, hi: 1000 });

      // A read whose insert fails leaves no rows, and its lines are skipped (not retried forever).
      appendFileSync(path, `${lines.slice(0, 5).join('\n')}\n`);
      db.exec("CREATE TRIGGER refuse BEFORE INSERT ON traffic WHEN NEW.path = '/p3' BEGIN SELECT RAISE(FAIL, 'refused'); END");
      expect(await reader.readNew()).toBe(0);
      expect(ends).toEqual([true, true, false]);
      expect((db.prepare('SELECT COUNT(*) AS n FROM traffic').get() as { n: number }).n).toBe(1000);
      expect(db.prepare('SELECT SUM(n) AS n FROM traffic_counts').get()).toEqual({ n: 1000 });
      db.exec('DROP TRIGGER refuse');
      expect(await reader.readNew()).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('numbers the records it hands over: the same numbers when lines are read again, none reused after a failed read', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'edge-seq-'));
    const path = join(dir, 'access.log');
    try {
      const lines = Array.from({ length: 250 }, (_, i) => nginxLine({ ...base, time: `${1_700_000_000 + i}.000`, path: `/n${i}` }));
      writeFileSync(path, `${lines.slice(0, 10).join('\n')}\n`);
      const db = new Database(':memory:');
      const journal = new TrafficJournal(db);
      const log = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined } as unknown as Logger;
      const numbered: [number, string][] = [];
      const commits: number[] = [];
      const sink = {
        observe: (records: TrafficRecord[], seq: number) => records.forEach((r, i) => numbered.push([seq + i, r.path])),
        commit: () => void commits.push(numbered.length),
        end: () => undefined,
      };
      const reader = new AccessLogReader(path, db as unknown as SqlDatabase, journal, sink, log);
      expect(await reader.readNew()).toBe(10);
      expect(numbered).toEqual(lines.slice(0, 10).map((_, i) => [i + 1, `/n${i}`]));
      expect(commits).toEqual([10]);

      // The commit of the next read is lost (a crash before it reached the disk): position and numbers as before it.
      const saved = { pos: db.prepare('SELECT * FROM ingest_position').all(), seq: db.prepare('SELECT * FROM ingest_sequence').get() };
      appendFileSync(path, `${lines.slice(10, 20).join('\n')}\n`);
      expect(await reader.readNew()).toBe(10);
      const firstTime = numbered.slice(10);
      db.prepare('DELETE FROM ingest_position').run();
      for (const p of saved.pos as { path: string; ino: number; offset: number }[])
        db.prepare('INSERT INTO ingest_position VALUES (?, ?, ?)').run(p.path, p.ino, p.offset);
      db.prepare('UPDATE ingest_sequence SET seq = ?').run((saved.seq as { seq: number }).seq);
      expect(await reader.readNew()).toBe(10);
      expect(numbered.slice(20)).toEqual(firstTime);
      expect(firstTime[0]).toEqual([11, '/n10']);

      // A read the journal refuses skips its lines; the numbers of the records observers saw before it failed
      // (its first group of 200) stay used: an observer may have kept what it derived from them.
      db.exec("CREATE TRIGGER refuse BEFORE INSERT ON traffic WHEN NEW.path = '/n240' BEGIN SELECT RAISE(FAIL, 'refused'); END");
      appendFileSync(path, `${lines.slice(20, 250).join('\n')}\n`);
      numbered.length = 0;
      expect(await reader.readNew()).toBe(0);
      expect(numbered.length).toBe(200);
      db.exec('DROP TRIGGER refuse');
      appendFileSync(path, `${lines[0]}\n`);
      numbered.length = 0;
      expect(await reader.readNew()).toBe(1);
      expect(numbered).toEqual([[221, '/n0']]);
      expect(db.prepare('SELECT stream FROM ingest_sequence').get()).toEqual({ stream: reader.stream });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
