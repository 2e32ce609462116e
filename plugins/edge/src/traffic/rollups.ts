/**
 * Per-minute and per-hour rollups of the traffic journal, so that the console's charts cost a few hundred rollup
 * rows instead of a day's million requests (issue 28: every screen call < 100 ms p99 at 1M rows).
 *
 * - `traffic_rollup`: per (level, bucket, deployment): requests, bytes, counts per status group and the exact
 *   histogram of durations (a BLOB of (duration, count) pairs). Percentiles need the exact values to stay what a
 *   sort of the rows gives; durations are nginx's `$request_time` (millisecond steps), so a bucket holds a few
 *   hundred distinct values where it holds thousands of rows.
 * - `traffic_unknown_rollup`: per (level, bucket, host) of rows no deployment owns: requests, first and last time,
 *   and up to SOURCES_PER_HOST distinct sources. Keeping at most that many per bucket keeps the answer exact: the
 *   answer is min(distinct sources, SOURCES_PER_HOST), and a bucket that reached the cap makes any union reach it.
 *
 * Rollups change in the transactions that change the rows: appends (the ingester's read), retirements (a delta
 * moved from one name to the other) and cleanups (whole buckets dropped, the cut ones rebuilt from their rows).
 * A window is answered from whole hours, whole minutes at its edges, and raw rows only for the (at most two)
 * partial minutes (`cover`).
 */
import type { SqlDatabase, SqlStatement } from '@agent/sdk';

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
/** Bucket sizes by level: 0 minutes, 1 hours. */
const SIZE = [MINUTE_MS, HOUR_MS] as const;
type Level = 0 | 1;
/** Distinct sources counted per unknown host at most (then the count says "at least"). */
export const SOURCES_PER_HOST = 10_000;
/** Bumped when the rollups' layout or meaning changes: journals without that version get theirs rebuilt on start. */
const VERSION = 1;
/** Rows a rebuild reads and gathers in memory before writing them (see `rebuildRows`). */
const REBUILD_ROWS = 50_000;
/** SQLite compares these with any time or bucket; an unbounded end of a window. */
const NO_BOUND = Number.MAX_VALUE;

/** What the rollups need of a row. */
export interface RollupRow {
  time_ms: number;
  deployment: string;
  host: string;
  status: number;
  bytes: number;
  duration_ms: number;
  source_ip: string;
}

/** The deployments a query covers, as the journal's filters say them. */
export interface DeploymentScope {
  deployment?: string;
  /** Only these; empty matches nothing (not even unknown hosts' rows). */
  deployments?: string[];
}

interface StatsAcc {
  requests: number;
  bytes: number;
  /** status / 100 (floored) → requests. */
  groups: Map<number, number>;
  /** duration → requests. */
  durations: Map<number, number>;
}
interface HostAcc {
  requests: number;
  first: number;
  last: number;
  sources: Set<string>;
}

const statsAcc = (): StatsAcc => ({ requests: 0, bytes: 0, groups: new Map(), durations: new Map() });
const hostAcc = (): HostAcc => ({ requests: 0, first: Infinity, last: -Infinity, sources: new Set() });
const bump = <K>(m: Map<K, number>, k: K, n: number) => {
  const v = (m.get(k) ?? 0) + n;
  if (v === 0) m.delete(k);
  else m.set(k, v);
};

/** A duration histogram as stored: float64 pairs (duration, count). */
/**
 * A duration histogram as stored: float64 pairs (duration, cumulative count), ascending by duration. Sorted and
 * cumulative, a query finds a percentile by binary searches in each bucket (`kth`) instead of adding every
 * bucket's values up in one map: a day of 11 deployments with a few thousand distinct durations each was 500k
 * map updates.
 */
function sorted(durations: Map<number, number>): Float64Array {
  const values = Float64Array.from(durations.keys()).sort();
  const a = new Float64Array(values.length * 2);
  let cum = 0;
  for (let i = 0; i < values.length; i++) {
    cum += durations.get(values[i]!)!;
    a[2 * i] = values[i]!;
    a[2 * i + 1] = cum;
  }
  return a;
}
const encode = (durations: Map<number, number>): Buffer => Buffer.from(sorted(durations).buffer);
/** A copy: SQLite's buffer need not be 8-byte aligned. */
const pairs = (blob: Buffer): Float64Array => new Float64Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength));
function decodeInto(blob: Buffer, into: Map<number, number>, sign = 1): void {
  const a = pairs(blob);
  for (let i = 0; i < a.length; i += 2) bump(into, a[i]!, sign * (a[i + 1]! - (i ? a[i - 1]! : 0)));
}

/**
 * The k-th smallest value (0-based) of the values the histograms `parts` hold together (sorted (value, cumulative
 * count) pairs). Each part keeps a window of candidates; the pivot is the weighted median of the windows' middles,
 * so every round drops at least a quarter of the candidates left; ranks come from the cumulative counts found by
 * binary search. O(parts × log² values), whatever the number of rows.
 */
export function kth(parts: Float64Array[], k: number): number {
  const lo = parts.map(() => 0);
  const hi = parts.map((p) => p.length / 2);
  const cumBefore = (p: Float64Array, i: number) => (i === 0 ? 0 : p[2 * i - 1]!);
  /** The first index in [from, to) whose value is ≥ v (or > v when `after`), else `to`. */
  const search = (p: Float64Array, from: number, to: number, v: number, after: boolean) => {
    while (from < to) {
      const mid = (from + to) >> 1;
      const x = p[2 * mid]!;
      if (x < v || (after && x === v)) from = mid + 1;
      else to = mid;
    }
    return from;
  };
  for (;;) {
    const middles: { v: number; w: number }[] = [];
    let weight = 0;
    for (let i = 0; i < parts.length; i++) {
      const w = hi[i]! - lo[i]!;
      if (w <= 0) continue;
      middles.push({ v: parts[i]![2 * ((lo[i]! + hi[i]!) >> 1)]!, w });
      weight += w;
    }
    if (middles.length === 0) throw new Error(`rank ${k} is past the histograms' values`);
    middles.sort((a, b) => a.v - b.v);
    let pivot = middles[0]!.v;
    for (let i = 0, seen = 0; i < middles.length; i++) {
      seen += middles[i]!.w;
      pivot = middles[i]!.v;
      if (2 * seen >= weight) break;
    }
    let less = 0;
    let upTo = 0;
    const below: number[] = [];
    const above: number[] = [];
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i]!;
      const a = search(p, lo[i]!, hi[i]!, pivot, false);
      const b = search(p, a, hi[i]!, pivot, true);
      below.push(a);
      above.push(b);
      less += cumBefore(p, a);
      upTo += cumBefore(p, b);
    }
    if (k < less) for (let i = 0; i < parts.length; i++) hi[i] = below[i]!;
    else if (k < upTo) return pivot;
    else for (let i = 0; i < parts.length; i++) lo[i] = above[i]!;
  }
}
const encodeGroups = (g: Map<number, number>) => JSON.stringify([...g]);
function decodeGroupsInto(text: string, into: Map<number, number>, sign = 1): void {
  for (const [g, n] of JSON.parse(text) as [number, number][]) bump(into, g, sign * n);
}

/**
 * Changes to the rollups, gathered in memory by minute (hours are summed from minutes when written), then written
 * in one go: a read of the log touches each (minute, deployment) once whatever its number of lines.
 */
export class RollupDelta {
  readonly stats = new Map<number, Map<string, StatsAcc>>();
  readonly hosts = new Map<number, Map<string, HostAcc>>();

  constructor(private readonly sign: 1 | -1 = 1) {}

  add(r: RollupRow, deployment = r.deployment): void {
    const minute = Math.floor(r.time_ms / MINUTE_MS);
    let m = this.stats.get(minute);
    if (!m) this.stats.set(minute, (m = new Map()));
    let s = m.get(deployment);
    if (!s) m.set(deployment, (s = statsAcc()));
    const sign = this.sign;
    s.requests += sign;
    s.bytes += sign * r.bytes;
    bump(s.groups, Math.floor(r.status / 100), sign);
    bump(s.durations, r.duration_ms, sign);
    if (deployment !== '') return;
    // Sources cannot be taken out of a set: rows of unknown hosts only ever leave by a cleanup, which rebuilds.
    if (sign < 0) throw new Error('rows of unknown hosts leave the rollups by a rebuild, not a delta');
    let hm = this.hosts.get(minute);
    if (!hm) this.hosts.set(minute, (hm = new Map()));
    let h = hm.get(r.host);
    if (!h) hm.set(r.host, (h = hostAcc()));
    h.requests++;
    if (r.time_ms < h.first) h.first = r.time_ms;
    if (r.time_ms > h.last) h.last = r.time_ms;
    if (h.sources.size < SOURCES_PER_HOST) h.sources.add(r.source_ip);
  }

  /** The same changes by hour. */
  hours(): RollupDelta {
    const out = new RollupDelta(this.sign);
    const fold = <A>(from: Map<number, Map<string, A>>, to: Map<number, Map<string, A>>, merge: (into: A, a: A) => void, init: () => A) => {
      for (const [minute, m] of from) {
        const hour = Math.floor(minute / 60);
        let hm = to.get(hour);
        if (!hm) to.set(hour, (hm = new Map()));
        for (const [key, a] of m) {
          let into = hm.get(key);
          if (!into) hm.set(key, (into = init()));
          merge(into, a);
        }
      }
    };
    fold(this.stats, out.stats, mergeStats, statsAcc);
    fold(this.hosts, out.hosts, mergeHosts, hostAcc);
    return out;
  }
}

function mergeStats(into: StatsAcc, a: StatsAcc): void {
  into.requests += a.requests;
  into.bytes += a.bytes;
  for (const [g, n] of a.groups) bump(into.groups, g, n);
  for (const [d, n] of a.durations) bump(into.durations, d, n);
}
function mergeHosts(into: HostAcc, a: HostAcc): void {
  into.requests += a.requests;
  into.first = Math.min(into.first, a.first);
  into.last = Math.max(into.last, a.last);
  for (const s of a.sources) {
    if (into.sources.size >= SOURCES_PER_HOST) break;
    into.sources.add(s);
  }
}

/** A window split into what answers it (see `cover`). */
export interface Cover {
  /** Bucket ranges (inclusive) by level. */
  levels: [[number, number][], [number, number][]];
  /** Time ranges (inclusive, ms) read from the rows. */
  raw: [number, number][];
}

/**
 * Splits the window [start, end] (ms, inclusive; undefined: unbounded) into whole hours, whole minutes at its
 * edges and the partial minutes left, which only raw rows can answer: at most two minutes of rows.
 */
export function cover(start?: number, end?: number): Cover {
  const out: Cover = { levels: [[], []], raw: [] };
  const lo = start ?? -Infinity;
  const hi = end ?? Infinity;
  if (lo <= hi) split(lo, hi, 1, out);
  return out;
}
function split(lo: number, hi: number, level: Level, out: Cover): void {
  const size = SIZE[level];
  const edge = (a: number, b: number): void => {
    if (level === 1) split(a, b, 0, out);
    else out.raw.push([a, b]);
  };
  // Whole buckets: the first starting at or after lo, the last ending at or before hi (times are whole ms).
  const first = lo === -Infinity ? -Infinity : Math.ceil(lo / size);
  const last = hi === Infinity ? Infinity : Math.floor((hi + 1) / size) - 1;
  if (first > last) return edge(lo, hi);
  out.levels[level].push([first, last]);
  if (first !== -Infinity && lo < first * size) edge(lo, first * size - 1);
  if (last !== Infinity && (last + 1) * size <= hi) edge((last + 1) * size, hi);
}

const bound = (v: number) => (v === -Infinity ? -NO_BOUND : v === Infinity ? NO_BOUND : v);

/**
 * The SQL conditions of a deployment scope, for the rollups and the journal's rows alike. An empty list matches
 * nothing (not the rows of unknown hosts, whose deployment is '').
 */
export function scopeClauses(f: DeploymentScope): { clauses: string[]; params: string[] } {
  const clauses: string[] = [];
  const params: string[] = [];
  if (f.deployment !== undefined) {
    clauses.push('deployment = ?');
    params.push(f.deployment);
  }
  if (f.deployments) {
    clauses.push(f.deployments.length ? `deployment IN (${f.deployments.map(() => '?').join(',')})` : '0');
    params.push(...f.deployments);
  }
  return { clauses, params };
}

/** The SQL condition of a deployment scope, as `AND …` to append to a WHERE. */
function scopeSql(f: DeploymentScope): { sql: string; params: string[] } {
  const { clauses, params } = scopeClauses(f);
  return { sql: clauses.map((c) => ` AND ${c}`).join(''), params };
}

export interface StatsAnswer {
  total: { requests: number; bytes: number; status: Record<string, number>; p50_ms: number | null; p95_ms: number | null };
  deployments: {
    deployment: string | null;
    requests: number;
    bytes: number;
    status: Record<string, number>;
    p50_ms: number | null;
    p95_ms: number | null;
  }[];
}

export interface UnknownHost {
  host: string;
  requests: number;
  sources: number;
  first: number;
  last: number;
}

/** The status groups of an answer: 1xx … 5xx always, others (odd status codes) when they have rows. */
export function statusGroups(groups: Map<number, number>): Record<string, number> {
  const out: Record<string, number> = { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 };
  for (const [g, n] of [...groups].sort((a, b) => a[0] - b[0])) out[`${g}xx`] = n;
  return out;
}

/**
 * The value a sort of the durations would put at floor(p × n) (what the row scan gives), from a histogram.
 * Ascending order of distinct values, then counts until past that rank.
 */
function percentiles(parts: Float64Array[], n: number): { p50_ms: number | null; p95_ms: number | null } {
  if (n === 0) return { p50_ms: null, p95_ms: null };
  return { p50_ms: kth(parts, Math.min(n - 1, Math.floor(0.5 * n))), p95_ms: kth(parts, Math.min(n - 1, Math.floor(0.95 * n))) };
}

/** Deployments by requests, most first; ties by name (the row scan's order of first appearance was an accident). */
export function byRequests<T extends { deployment: string | null; requests: number }>(a: T, b: T): number {
  return b.requests - a.requests || ((a.deployment ?? '') < (b.deployment ?? '') ? -1 : (a.deployment ?? '') > (b.deployment ?? '') ? 1 : 0);
}

export class TrafficRollups {
  private readonly getStats: SqlStatement;
  private readonly putStats: SqlStatement;
  private readonly dropStats: SqlStatement;
  private readonly getHost: SqlStatement;
  private readonly putHost: SqlStatement;

  /**
   * `rawIds(start, end)`: the ids that can hold rows of a time window (the journal's spans), null when none can.
   */
  constructor(
    private readonly db: SqlDatabase,
    private readonly rawIds: (start: number, end: number) => { lo: number; hi: number } | null,
    /** Rows a rebuild reads at a time (tests make it small). */
    private readonly chunk = REBUILD_ROWS,
  ) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS traffic_rollup (
        level INTEGER NOT NULL, bucket INTEGER NOT NULL, deployment TEXT NOT NULL,
        requests INTEGER NOT NULL, bytes NOT NULL, groups TEXT NOT NULL, durations BLOB NOT NULL,
        PRIMARY KEY (level, bucket, deployment)
      ) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS traffic_unknown_rollup (
        level INTEGER NOT NULL, bucket INTEGER NOT NULL, host TEXT NOT NULL,
        requests INTEGER NOT NULL, first_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL, sources TEXT NOT NULL,
        PRIMARY KEY (level, bucket, host)
      ) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS traffic_rollup_version (version INTEGER NOT NULL);
    `);
    this.getStats = db.prepare('SELECT requests, bytes, groups, durations FROM traffic_rollup WHERE level = ? AND bucket = ? AND deployment = ?');
    this.putStats = db.prepare(
      'INSERT OR REPLACE INTO traffic_rollup (level, bucket, deployment, requests, bytes, groups, durations) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    this.dropStats = db.prepare('DELETE FROM traffic_rollup WHERE level = ? AND bucket = ? AND deployment = ?');
    this.getHost = db.prepare('SELECT requests, first_ms, last_ms, sources FROM traffic_unknown_rollup WHERE level = ? AND bucket = ? AND host = ?');
    this.putHost = db.prepare(
      'INSERT OR REPLACE INTO traffic_unknown_rollup (level, bucket, host, requests, first_ms, last_ms, sources) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    this.migrate();
  }

  /** A journal written before the rollups (or with an older layout of them): built from every row, once. */
  private migrate(): void {
    const v = this.db.prepare('SELECT MAX(version) AS v FROM traffic_rollup_version').get() as { v: number | null };
    if (v.v === VERSION) return;
    this.db.transaction(() => {
      this.db.exec('DELETE FROM traffic_rollup; DELETE FROM traffic_unknown_rollup; DELETE FROM traffic_rollup_version;');
      this.rebuildRows(-NO_BOUND, NO_BOUND, [0, 1]);
      this.db.prepare('INSERT INTO traffic_rollup_version (version) VALUES (?)').run(VERSION);
    })();
  }

  /**
   * Adds the rows of [start, end] (by time) to the rollups of `levels` (their buckets there must be empty), read by
   * id in parts of `chunk` rows: writes are additive, so a million-row migration holds one part in memory (and
   * better-sqlite3 runs no write while a read is still open).
   */
  private rebuildRows(start: number, end: number, levels: Level[]): void {
    // A bucket's rows through the spans' id range (there is no time index); the whole journal when migrating.
    const ids = start === -NO_BOUND && end === NO_BOUND ? { lo: -NO_BOUND, hi: NO_BOUND } : this.rawIds(start, end);
    if (!ids) return;
    const part = this.db.prepare(
      'SELECT id, time_ms, deployment, host, status, bytes, duration_ms, source_ip FROM traffic WHERE id > ? AND id <= ? AND time_ms BETWEEN ? AND ? ORDER BY id LIMIT ?',
    );
    let after = ids.lo - 1;
    for (;;) {
      const rows = part.all(after, ids.hi, start, end, this.chunk) as (RollupRow & { id: number })[];
      if (rows.length === 0) return;
      const delta = new RollupDelta();
      for (const r of rows) delta.add(r);
      this.apply(delta, levels);
      after = rows[rows.length - 1]!.id;
    }
  }

  /** Writes a delta (inside the caller's transaction) to the minute and hour rollups, or those of `levels`. */
  apply(delta: RollupDelta, levels: Level[] = [0, 1]): void {
    for (const level of levels) {
      const d = level === 0 ? delta : delta.hours();
      for (const [bucket, m] of d.stats) for (const [deployment, acc] of m) this.writeStats(level, bucket, deployment, acc);
      for (const [bucket, m] of d.hosts) for (const [host, acc] of m) this.writeHost(level, bucket, host, acc);
    }
  }

  private writeStats(level: Level, bucket: number, deployment: string, acc: StatsAcc): void {
    const old = this.getStats.get(level, bucket, deployment) as { requests: number; bytes: number; groups: string; durations: Buffer } | undefined;
    if (old) {
      const merged = statsAcc();
      merged.requests = old.requests;
      merged.bytes = old.bytes;
      decodeGroupsInto(old.groups, merged.groups);
      decodeInto(old.durations, merged.durations);
      mergeStats(merged, acc);
      acc = merged;
    }
    if (acc.requests <= 0) this.dropStats.run(level, bucket, deployment);
    else this.putStats.run(level, bucket, deployment, acc.requests, acc.bytes, encodeGroups(acc.groups), encode(acc.durations));
  }

  private writeHost(level: Level, bucket: number, host: string, acc: HostAcc): void {
    const old = this.getHost.get(level, bucket, host) as { requests: number; first_ms: number; last_ms: number; sources: string } | undefined;
    if (old) {
      const merged: HostAcc = { requests: old.requests, first: old.first_ms, last: old.last_ms, sources: new Set(JSON.parse(old.sources) as string[]) };
      mergeHosts(merged, acc);
      acc = merged;
    }
    this.putHost.run(level, bucket, host, acc.requests, acc.first, acc.last, JSON.stringify([...acc.sources]));
  }

  /**
   * After the rows before `before` were deleted: whole buckets before it go, and the (at most one per level) bucket
   * the cut goes through is rebuilt from the rows it keeps.
   */
  prune(before: number): void {
    for (const level of [0, 1] as const) {
      const size = SIZE[level];
      const cut = Math.floor(before / size);
      for (const table of ['traffic_rollup', 'traffic_unknown_rollup'])
        this.db.prepare(`DELETE FROM ${table} WHERE level = ? AND bucket ${before > cut * size ? '<=' : '<'} ?`).run(level, cut);
      if (before > cut * size) this.rebuildRows(cut * size, (cut + 1) * size - 1, [level]);
    }
  }

  /** Requests, bytes, status groups and exact p50/p95 of a window, per deployment and in total. */
  stats(f: DeploymentScope & { start_ms?: number; end_ms?: number }): StatsAnswer {
    /** Per deployment: its sums (durations: of the edge rows only) and its buckets' histograms. */
    const per = new Map<string, StatsAcc & { parts: Float64Array[] }>();
    const scope = scopeSql(f);
    const c = cover(f.start_ms, f.end_ms);
    const acc = (deployment: string) => {
      let s = per.get(deployment);
      if (!s) per.set(deployment, (s = { ...statsAcc(), parts: [] }));
      return s;
    };
    const read = this.db.prepare(
      `SELECT deployment, requests, bytes, groups, durations FROM traffic_rollup WHERE level = ? AND bucket BETWEEN ? AND ?${scope.sql}`,
    );
    for (const level of [1, 0] as const)
      for (const [lo, hi] of c.levels[level])
        for (const r of read.iterate(level, bound(lo), bound(hi), ...scope.params) as IterableIterator<{
          deployment: string;
          requests: number;
          bytes: number;
          groups: string;
          durations: Buffer;
        }>) {
          const s = acc(r.deployment);
          s.requests += r.requests;
          s.bytes += r.bytes;
          decodeGroupsInto(r.groups, s.groups);
          s.parts.push(pairs(r.durations));
        }
    for (const [start, end] of c.raw) {
      const ids = this.rawIds(start, end);
      if (!ids) continue;
      // NOT INDEXED: the id range of a minute is a few spans; a deployment's index would be all of its rows.
      const rows = this.db
        .prepare(`SELECT deployment, status, bytes, duration_ms FROM traffic NOT INDEXED WHERE id BETWEEN ? AND ? AND time_ms BETWEEN ? AND ?${scope.sql}`)
        .iterate(ids.lo, ids.hi, start, end, ...scope.params) as IterableIterator<{ deployment: string; status: number; bytes: number; duration_ms: number }>;
      for (const r of rows) {
        const s = acc(r.deployment);
        s.requests++;
        s.bytes += r.bytes;
        bump(s.groups, Math.floor(r.status / 100), 1);
        bump(s.durations, r.duration_ms, 1);
      }
    }
    const total = statsAcc();
    const all: Float64Array[] = [];
    const deployments = [...per]
      .map(([deployment, s]) => {
        total.requests += s.requests;
        total.bytes += s.bytes;
        for (const [g, n] of s.groups) bump(total.groups, g, n);
        if (s.durations.size) s.parts.push(sorted(s.durations));
        all.push(...s.parts);
        return {
          deployment: deployment || null,
          requests: s.requests,
          bytes: s.bytes,
          status: statusGroups(s.groups),
          ...percentiles(s.parts, s.requests),
        };
      })
      .sort(byRequests);
    return {
      total: { requests: total.requests, bytes: total.bytes, status: statusGroups(total.groups), ...percentiles(all, total.requests) },
      deployments,
    };
  }

  /** Requests for host names no deployment owns, by host, most first (ties by host): the `limit` first. */
  unknownDomains(f: { start_ms?: number; end_ms?: number }, limit: number): UnknownHost[] {
    const hosts = new Map<string, HostAcc>();
    const acc = (host: string) => {
      let h = hosts.get(host);
      if (!h) hosts.set(host, (h = hostAcc()));
      return h;
    };
    const c = cover(f.start_ms, f.end_ms);
    const read = this.db.prepare('SELECT host, requests, first_ms, last_ms, sources FROM traffic_unknown_rollup WHERE level = ? AND bucket BETWEEN ? AND ?');
    for (const level of [1, 0] as const)
      for (const [lo, hi] of c.levels[level])
        for (const r of read.iterate(level, bound(lo), bound(hi)) as IterableIterator<{
          host: string;
          requests: number;
          first_ms: number;
          last_ms: number;
          sources: string;
        }>) {
          const h = acc(r.host);
          h.requests += r.requests;
          if (r.first_ms < h.first) h.first = r.first_ms;
          if (r.last_ms > h.last) h.last = r.last_ms;
          // Once a host has counted the cap, its sources need not be read (the answer is "at least" the cap).
          if (h.sources.size < SOURCES_PER_HOST)
            for (const s of JSON.parse(r.sources) as string[]) {
              h.sources.add(s);
              if (h.sources.size >= SOURCES_PER_HOST) break;
            }
        }
    for (const [start, end] of c.raw) {
      const ids = this.rawIds(start, end);
      if (!ids) continue;
      const rows = this.db
        .prepare("SELECT host, source_ip, time_ms FROM traffic NOT INDEXED WHERE id BETWEEN ? AND ? AND time_ms BETWEEN ? AND ? AND deployment = ''")
        .iterate(ids.lo, ids.hi, start, end) as IterableIterator<{ host: string; source_ip: string; time_ms: number }>;
      for (const r of rows) {
        const h = acc(r.host);
        h.requests++;
        if (r.time_ms < h.first) h.first = r.time_ms;
        if (r.time_ms > h.last) h.last = r.time_ms;
        if (h.sources.size < SOURCES_PER_HOST) h.sources.add(r.source_ip);
      }
    }
    return [...hosts]
      .map(([host, h]) => ({ host, requests: h.requests, sources: h.sources.size, first: h.first, last: h.last }))
      .sort((a, b) => b.requests - a.requests || (a.host < b.host ? -1 : a.host > b.host ? 1 : 0))
      .slice(0, limit);
  }
}
