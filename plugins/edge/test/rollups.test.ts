// The traffic rollups (per minute and per hour) answer /traffic/stats and /traffic/unknown-domains exactly as the
// rows do (`statsFromRows`, `unknownDomainsFromRows`: the row scans they replaced), on random rows with times on
// and around minute and hour edges, random windows (on edges too, open ends), deployment filters and a scoped
// principal's deployments; after cleanups through a bucket, retirements, and for a journal written before the
// rollups existed (built on start). The queries read what the plans say (EXPLAIN QUERY PLAN), not every row.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { principalFrom, type PrincipalInfo } from '@agent/sdk';
import { TrafficJournal, type TrafficFilter, type TrafficRecord } from '../src/traffic/journal.js';
import { cover, HOUR_MS, kth, MINUTE_MS, SOURCES_PER_HOST, TrafficRollups } from '../src/traffic/rollups.js';
import { TrafficQueries } from '../src/traffic/queries.js';
import type { Runtime } from '../src/runtime.js';
import { seededRandom } from '../../../test/helpers/random.js';

const T0 = Date.UTC(2026, 0, 1);
const SPAN = 30 * HOUR_MS;

/** A time near a minute or hour edge (on it, just before, just after) or anywhere in the span. */
function edgyTime(rnd: (n: number) => number): number {
  const k = rnd(4);
  if (k === 0) return T0 + rnd(SPAN);
  const size = k === 1 ? HOUR_MS : MINUTE_MS;
  const edge = T0 + rnd(Math.floor(SPAN / size)) * size;
  return edge + [-1, 0, 1, -2, 2][rnd(5)]!;
}

function records(rnd: (n: number) => number, n: number): TrafficRecord[] {
  const out: TrafficRecord[] = [];
  for (let i = 0; i < n; i++) {
    const deployment = ['', 'a', 'b', 'c', 'd'][rnd(5)]!;
    out.push({
      time_ms: edgyTime(rnd),
      deployment,
      host: deployment ? `${deployment}.test` : `u${rnd(7)}.test`,
      method: ['GET', 'POST'][rnd(2)]!,
      path: '/',
      // odd codes too: their groups are keys of their own
      status: [200, 200, 201, 301, 404, 500, 503, 99, 600][rnd(9)]!,
      bytes: rnd(5000),
      // ms steps, fractions and repeats: percentiles must land on exactly the value a sort gives
      duration_ms: rnd(3) === 0 ? rnd(50) : rnd(2000) / 8,
      source_ip: `10.0.${rnd(3)}.${rnd(60)}`,
      user_agent: 'ua',
      blocked: false,
      protected: false,
      user: '',
    });
  }
  return out;
}

/** Windows on and around edges, open at either end, empty, inverted. */
function windows(rnd: (n: number) => number): { start_ms?: number; end_ms?: number }[] {
  const out: { start_ms?: number; end_ms?: number }[] = [{}, { start_ms: T0 + 3 * HOUR_MS }, { end_ms: T0 + 5 * HOUR_MS - 1 }];
  for (let i = 0; i < 14; i++) {
    const a = edgyTime(rnd);
    const b = rnd(3) === 0 ? a + rnd(3 * MINUTE_MS) : edgyTime(rnd);
    out.push({ start_ms: Math.min(a, b), end_ms: Math.max(a, b) });
  }
  out.push(
    { start_ms: T0 + HOUR_MS, end_ms: T0 + HOUR_MS },
    { start_ms: T0 + 2 * HOUR_MS, end_ms: T0 + HOUR_MS },
    { start_ms: T0 - 5 * HOUR_MS, end_ms: T0 - HOUR_MS },
  );
  return out;
}

const scopes: TrafficFilter[] = [
  {},
  { deployment: 'a' },
  { deployment: '' },
  { deployments: ['a', 'c'] },
  { deployments: [] },
  { deployment: 'b', deployments: ['a', 'b'] },
];

async function expectSameAnswers(journal: TrafficJournal, rnd: (n: number) => number): Promise<void> {
  for (const w of windows(rnd)) {
    for (const scope of scopes) {
      const f = { ...scope, ...w };
      expect(await journal.stats(f), JSON.stringify(f)).toEqual(await journal.statsFromRows(f));
    }
    for (const limit of [1, 3, 100]) expect(await journal.unknownDomains(w, limit), JSON.stringify(w)).toEqual(await journal.unknownDomainsFromRows(w, limit));
  }
}

function filled(seed: number, n = 6000): { db: Database.Database; journal: TrafficJournal; rnd: (n: number) => number } {
  const rnd = seededRandom(seed);
  const db = new Database(':memory:');
  const journal = new TrafficJournal(db);
  // Batches as the ingester writes them: whole reads through the appender, and single rows.
  const all = records(rnd, n);
  for (let i = 0; i < all.length;) {
    const size = 1 + rnd(700);
    const a = journal.appender();
    db.transaction(() => {
      a.append(all.slice(i, i + size));
      a.finish();
    })();
    i += size;
  }
  journal.add(records(rnd, 5));
  return { db, journal, rnd };
}

describe('traffic rollups', () => {
  it('split a window into whole hours, whole minutes and at most two partial minutes', () => {
    const h = T0 + 10 * HOUR_MS;
    expect(cover(h + 1500, h + 3 * HOUR_MS + 61_000)).toEqual({
      levels: [
        [
          [(h + MINUTE_MS) / MINUTE_MS, (h + HOUR_MS) / MINUTE_MS - 1],
          [(h + 3 * HOUR_MS) / MINUTE_MS, (h + 3 * HOUR_MS) / MINUTE_MS],
        ],
        [[(h + HOUR_MS) / HOUR_MS, (h + 3 * HOUR_MS) / HOUR_MS - 1]],
      ],
      raw: [
        [h + 1500, h + MINUTE_MS - 1],
        [h + 3 * HOUR_MS + MINUTE_MS, h + 3 * HOUR_MS + 61_000],
      ],
    });
    expect(cover(h, h + HOUR_MS - 1)).toEqual({ levels: [[], [[h / HOUR_MS, h / HOUR_MS]]], raw: [] });
    expect(cover(h + 5, h + 10)).toEqual({ levels: [[], []], raw: [[h + 5, h + 10]] });
    expect(cover(undefined, undefined)).toEqual({ levels: [[], [[-Infinity, Infinity]]], raw: [] });
    expect(cover(h + 1, h)).toEqual({ levels: [[], []], raw: [] });
  });

  it('answer stats and unknown domains exactly as the rows do: random rows and windows on bucket edges, deployment filters', async () => {
    const { journal, rnd } = filled(11);
    await expectSameAnswers(journal, rnd);
  });

  it('stay exact through cleanups that cut buckets, and keep no bucket the cleanup emptied', async () => {
    const { db, journal, rnd } = filled(12);
    for (const before of [T0 + 2 * HOUR_MS + 30_500, T0 + 4 * HOUR_MS, T0 + 7 * HOUR_MS + 2 * MINUTE_MS, T0 + 9 * HOUR_MS + 1]) {
      expect(journal.cleanup(before)).toBeGreaterThan(0);
      await expectSameAnswers(journal, rnd);
      for (const [level, size] of [
        [0, MINUTE_MS],
        [1, HOUR_MS],
      ])
        for (const table of ['traffic_rollup', 'traffic_unknown_rollup'])
          expect(db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE level = ? AND (bucket + 1) * ? <= ?`).get(level, size, before)).toEqual({ n: 0 });
      // Every rollup row holds rows: none left with nothing in it.
      expect(db.prepare('SELECT COUNT(*) AS n FROM traffic_rollup WHERE requests <= 0').get()).toEqual({ n: 0 });
    }
  });

  it('follow a retirement: the moved rows leave the name and join the retired name, chunk by chunk', async () => {
    const { journal, rnd } = filled(13);
    const moved = await journal.retire('a', 'a~1', T0 + 20 * HOUR_MS + 17, 97);
    expect(moved).toBeGreaterThan(500);
    await expectSameAnswers(journal, rnd);
    const f = { deployments: ['a~1'] };
    expect((await journal.stats(f)).total.requests).toBe(moved);
  });

  it('are built on start for a journal written before them, and after a change of their version', async () => {
    const { db, rnd } = filled(14);
    const before = db.prepare('SELECT * FROM traffic_rollup ORDER BY level, bucket, deployment').all();
    db.exec('DROP TABLE traffic_rollup; DROP TABLE traffic_unknown_rollup; DROP TABLE traffic_rollup_version;');
    const reopened = new TrafficJournal(db);
    expect(db.prepare('SELECT * FROM traffic_rollup ORDER BY level, bucket, deployment').all().length).toBe(before.length);
    await expectSameAnswers(reopened, rnd);
    db.exec('UPDATE traffic_rollup_version SET version = 0; DELETE FROM traffic_rollup;');
    await expectSameAnswers(new TrafficJournal(db), rnd);
    // Opening it again builds nothing (the rows are not read again).
    db.exec("INSERT INTO traffic_rollup (level, bucket, deployment, requests, bytes, groups, durations) VALUES (9, 0, 'marker', 1, 0, '[]', x'')");
    new TrafficJournal(db);
    expect(db.prepare('SELECT COUNT(*) AS n FROM traffic_rollup WHERE level = 9').get()).toEqual({ n: 1 });
  });

  it('a migration reads the rows in parts and writes what one pass would', () => {
    const { db } = filled(18, 3000);
    // Status groups compared as sets: their order in the JSON is the order they were first met.
    const rollups = () =>
      (db.prepare('SELECT * FROM traffic_rollup ORDER BY level, bucket, deployment').all() as { groups: string }[]).map((r) => ({
        ...r,
        groups: (JSON.parse(r.groups) as [number, number][]).sort((a, b) => a[0] - b[0]),
      }));
    const whole = rollups();
    const hosts = db.prepare('SELECT level, bucket, host, requests, first_ms, last_ms FROM traffic_unknown_rollup ORDER BY level, bucket, host').all();
    db.exec('DELETE FROM traffic_rollup_version');
    new TrafficRollups(db, () => null, 97);
    expect(rollups()).toEqual(whole);
    expect(db.prepare('SELECT level, bucket, host, requests, first_ms, last_ms FROM traffic_unknown_rollup ORDER BY level, bucket, host').all()).toEqual(hosts);
  });

  it("kth: the value a sort of all the histograms' values puts at each rank", () => {
    const rnd = seededRandom(19);
    for (let round = 0; round < 200; round++) {
      const values: number[] = [];
      const parts: Float64Array[] = [];
      for (let p = 1 + rnd(6); p > 0; p--) {
        const counts = new Map<number, number>();
        for (let i = rnd(round % 3 === 0 ? 3 : 40); i >= 0; i--) {
          const v = rnd(4) === 0 ? rnd(5) : rnd(300) / 4;
          const n = 1 + rnd(5);
          counts.set(v, (counts.get(v) ?? 0) + n);
          for (let j = 0; j < n; j++) values.push(v);
        }
        const sortedValues = [...counts.keys()].sort((a, b) => a - b);
        let cum = 0;
        parts.push(Float64Array.from(sortedValues.flatMap((v) => [v, (cum += counts.get(v)!)])));
      }
      values.sort((a, b) => a - b);
      for (let k = 0; k < values.length; k++) expect(kth(parts, k)).toBe(values[k]);
      expect(() => kth(parts, values.length)).toThrow();
    }
  });

  it('count at most SOURCES_PER_HOST sources per unknown host, as the rows did, across buckets', async () => {
    const rnd = seededRandom(15);
    const db = new Database(':memory:');
    const journal = new TrafficJournal(db);
    const base = records(rnd, 1)[0]!;
    const rows: TrafficRecord[] = [];
    // 12k distinct sources over three hours, no hour alone past the cap; a small host beside it
    for (let i = 0; i < 12_000; i++) rows.push({ ...base, deployment: '', host: 'big.test', time_ms: T0 + i * 900, source_ip: `10.${i >> 8}.${i & 255}.1` });
    for (let i = 0; i < 50; i++) rows.push({ ...base, deployment: '', host: 'small.test', time_ms: T0 + i * 1000, source_ip: `10.9.9.${i % 20}` });
    journal.add(rows);
    const all = await journal.unknownDomains({}, 10);
    expect(all).toEqual(await journal.unknownDomainsFromRows({}, 10));
    expect(all.map((h) => [h.host, h.sources])).toEqual([
      ['big.test', SOURCES_PER_HOST],
      ['small.test', 20],
    ]);
    const w = { start_ms: T0 + 20 * MINUTE_MS + 7, end_ms: T0 + 2 * HOUR_MS + 5 * MINUTE_MS + 3 };
    expect(await journal.unknownDomains(w, 10)).toEqual(await journal.unknownDomainsFromRows(w, 10));
  });

  it("a scoped principal's stats cover its deployments only (through the route's query)", async () => {
    const { journal } = filled(16, 2000);
    const info: PrincipalInfo = {
      type: 'user',
      id: 'user:2',
      name: 'ann',
      role: 'operator',
      user_id: 2,
      permissions: ['traffic:read'],
      deployments: { a: 'read', c: 'write' },
      scope: 'deployments',
    };
    const queries = new TrafficQueries({} as unknown as Runtime, journal);
    const q = { start_time: new Date(T0).toISOString(), end_time: new Date(T0 + SPAN).toISOString() };
    const scoped = await queries.stats(q, principalFrom(info));
    expect(scoped.deployments.map((d) => d.deployment).sort()).toEqual(['a', 'c']);
    const reference = await journal.statsFromRows({ deployments: ['a', 'c'], start_ms: T0, end_ms: T0 + SPAN });
    expect({ total: scoped.total, deployments: scoped.deployments }).toEqual(reference);
    const global = await queries.stats(q, principalFrom({ ...info, scope: 'global', deployments: { '*': 'read' } }));
    expect(global.deployments.map((d) => d.deployment).sort()).toEqual([null, 'a', 'b', 'c', 'd'].sort());
    expect(global.total.requests).toBeGreaterThan(scoped.total.requests);
  });

  it('read the rollups by their key and the edge rows by id range (query plans)', () => {
    const { db } = filled(17, 500);
    const plan = (sql: string, ...p: unknown[]) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...p) as { detail: string }[]).map((r) => r.detail).join('; ');
    expect(
      plan(
        'SELECT deployment, requests, bytes, groups, durations FROM traffic_rollup WHERE level = ? AND bucket BETWEEN ? AND ? AND deployment IN (?, ?)',
        1,
        0,
        9,
        'a',
        'b',
      ),
    ).toMatch(/SEARCH traffic_rollup USING PRIMARY KEY \(level=\? AND bucket>\? AND bucket<\?\)/);
    expect(plan('SELECT host, requests, first_ms, last_ms, sources FROM traffic_unknown_rollup WHERE level = ? AND bucket BETWEEN ? AND ?', 0, 0, 9)).toMatch(
      /SEARCH traffic_unknown_rollup USING PRIMARY KEY \(level=\? AND bucket>\? AND bucket<\?\)/,
    );
    expect(
      plan(
        'SELECT deployment, status, bytes, duration_ms FROM traffic NOT INDEXED WHERE id BETWEEN ? AND ? AND time_ms BETWEEN ? AND ? AND deployment IN (?)',
        1,
        9,
        0,
        9,
        'a',
      ),
    ).toMatch(/SEARCH traffic USING INTEGER PRIMARY KEY \(rowid>\? AND rowid<\?\)/);
  });
});
