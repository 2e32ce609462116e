/**
 * Metric series in SQLite: raw samples (short retention), 1-minute rollups (long retention) and 5-minute rollups
 * derived from those (same retention; a day at 5-minute steps reads 288 rows per series instead of 1440). Every
 * table is clustered by (series, ts), so a history query is a range scan per series. A query picks a step that
 * gives at most a few hundred points per series and reads the coarsest tier that still fits the step, then the
 * finer tiers for the recent part not folded yet.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { Database } from './sqlite.js';
import { TierCache, type TierRow } from './tier-cache.js';

export interface SeriesKey {
  /** `null` for host series. */
  container: string | null;
  deployment: string | null;
  metric: string;
}

export interface SeriesRow extends SeriesKey {
  id: number;
}

export interface QueryResult {
  since: number;
  until: number;
  step: number;
  /** Unix milliseconds of the buckets where at least one series has a value, oldest first. */
  timestamps: number[];
  /** One value per timestamp (null where this series has none). */
  series: { key: SeriesRow; values: (number | null)[] }[];
}

const MAX_POINTS = 360;

/** 6 significant digits (cheaper than `Number(v.toPrecision(6))`, and enough for a chart). */
function round6(v: number): number {
  if (v === 0 || !Number.isFinite(v)) return v;
  const digits = 5 - Math.floor(Math.log10(Math.abs(v)));
  // Powers of ten as integers keep the result exact: scale up for small values, down for large ones.
  if (digits >= 0) {
    const scale = 10 ** digits;
    return Math.round(v * scale) / scale;
  }
  const step = 10 ** -digits;
  return Math.round(v / step) * step;
}
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

export class SeriesStore {
  private readonly db: BetterSqlite3.Database;
  private readonly ids = new Map<string, SeriesRow>();
  private readonly insertSample;
  private readonly insertSeries;
  private readonly updateDeployment;
  /** Raw samples before this time (seconds) are folded into `rollups`. */
  private rolledUntil: number;
  /** 1-minute rollups before this time are folded into `rollups5`. */
  private rolled5Until: number;
  private readonly tier5 = new TierCache(2048);
  private readonly tier5Range;

  /** `nowSeconds`: where rolling up starts in a new file (tests pass a fixed clock). */
  constructor(file: string, nowSeconds = Date.now() / 1000) {
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS series (id INTEGER PRIMARY KEY, container TEXT NOT NULL, deployment TEXT, metric TEXT NOT NULL, UNIQUE (container, metric));
      CREATE INDEX IF NOT EXISTS series_deployment ON series (deployment);
      CREATE TABLE IF NOT EXISTS samples (series INTEGER NOT NULL, ts INTEGER NOT NULL, value REAL NOT NULL, PRIMARY KEY (series, ts)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rollups (series INTEGER NOT NULL, ts INTEGER NOT NULL, avg REAL NOT NULL, min REAL NOT NULL, max REAL NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (series, ts)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rollups5 (series INTEGER NOT NULL, ts INTEGER NOT NULL, avg REAL NOT NULL, min REAL NOT NULL, max REAL NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (series, ts)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    `);
    for (const row of this.db.prepare('SELECT id, container, deployment, metric FROM series').all() as {
      id: number;
      container: string;
      deployment: string | null;
      metric: string;
    }[]) {
      const key: SeriesRow = { id: row.id, container: row.container === '' ? null : row.container, deployment: row.deployment, metric: row.metric };
      this.ids.set(`${row.container}\u0000${row.metric}`, key);
    }
    this.insertSample = this.db.prepare('INSERT OR REPLACE INTO samples (series, ts, value) VALUES (?, ?, ?)');
    this.insertSeries = this.db.prepare('INSERT INTO series (container, deployment, metric) VALUES (?, ?, ?)');
    this.updateDeployment = this.db.prepare('UPDATE series SET deployment = ? WHERE id = ?');
    this.tier5Range = this.db.prepare('SELECT ts, avg * n AS sum, n FROM rollups5 WHERE series = ? AND ts >= ? AND ts < ? ORDER BY ts');
    const meta = (key: string) => (this.db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined)?.value;
    const now = nowSeconds;
    this.rolledUntil = Number(meta('rolled_until') ?? Math.floor(now / 60) * 60);
    this.rolled5Until = Number(meta('rolled5_until') ?? Math.floor(now / 300) * 300);
  }

  private seriesFor(key: SeriesKey): SeriesRow {
    const k = `${key.container ?? ''}\u0000${key.metric}`;
    let row = this.ids.get(k);
    if (!row) {
      const id = Number(this.insertSeries.run(key.container ?? '', key.deployment, key.metric).lastInsertRowid);
      row = { id, container: key.container, deployment: key.deployment, metric: key.metric };
      this.ids.set(k, row);
    } else if (row.deployment !== key.deployment) {
      // A container name reused by another deployment: the series follows the newest owner.
      this.updateDeployment.run(key.deployment, row.id);
      row.deployment = key.deployment;
    }
    return row;
  }

  /** Writes one tick of samples in a single transaction. `ts` in seconds. */
  write(ts: number, samples: { key: SeriesKey; value: number }[]): void {
    this.db.transaction(() => {
      for (const s of samples) if (Number.isFinite(s.value)) this.insertSample.run(this.seriesFor(s.key).id, ts, s.value);
    })();
  }

  /** Folds complete minutes of raw samples into 1-minute rollups, and complete 5 minutes of those into 5-minute ones. */
  rollup(nowSeconds = Date.now() / 1000): void {
    const until = Math.floor(nowSeconds / 60) * 60;
    const until5 = Math.floor(until / 300) * 300;
    const setMeta = this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
    this.db.transaction(() => {
      if (until > this.rolledUntil) {
        this.db
          .prepare(
            `INSERT OR REPLACE INTO rollups (series, ts, avg, min, max, n)
          SELECT series, (ts / 60) * 60 AS minute, AVG(value), MIN(value), MAX(value), COUNT(*) FROM samples
          WHERE ts >= ? AND ts < ? GROUP BY series, minute`,
          )
          .run(this.rolledUntil, until);
        setMeta.run('rolled_until', String(until));
      }
      if (until5 > this.rolled5Until) {
        this.db
          .prepare(
            `INSERT OR REPLACE INTO rollups5 (series, ts, avg, min, max, n)
          SELECT series, (ts / 300) * 300 AS bucket, SUM(avg * n) / SUM(n), MIN(min), MAX(max), SUM(n) FROM rollups
          WHERE ts >= ? AND ts < ? GROUP BY series, bucket`,
          )
          .run(this.rolled5Until, until5);
        setMeta.run('rolled5_until', String(until5));
      }
    })();
    this.rolledUntil = Math.max(this.rolledUntil, until);
    if (until5 > this.rolled5Until) {
      for (const id of this.tier5.cachedSeries()) this.tier5.append(id, this.tier5Range.all(id, this.rolled5Until, until5) as TierRow[]);
      this.rolled5Until = until5;
    }
  }

  /** Drops samples and rollups past their retention (per series: a range delete on the primary key). */
  prune(rawRetention: number, rollupRetention: number, nowSeconds = Date.now() / 1000): void {
    const rawCut = Math.floor(nowSeconds - rawRetention);
    const rollCut = Math.floor(nowSeconds - rollupRetention);
    const delRaw = this.db.prepare('DELETE FROM samples WHERE series = ? AND ts < ?');
    const delRoll = this.db.prepare('DELETE FROM rollups WHERE series = ? AND ts < ?');
    const delRoll5 = this.db.prepare('DELETE FROM rollups5 WHERE series = ? AND ts < ?');
    this.db.transaction(() => {
      for (const row of this.ids.values()) {
        delRaw.run(row.id, rawCut);
        delRoll.run(row.id, rollCut);
        delRoll5.run(row.id, rollCut);
      }
    })();
    this.tier5.prune(rollCut);
  }

  /**
   * A deployment was deleted: the history of its containers before `before` (seconds) goes, so that a new
   * deployment of the same name (whose containers may carry the same names, continuing the same series) starts
   * without it. Measurements are not kept under the retired name: nothing could query them there.
   */
  forgetDeployment(deployment: string, before: number): number {
    const rows = this.series({ deployment });
    const cut = Math.floor(before);
    this.db.transaction(() => {
      for (const table of ['samples', 'rollups', 'rollups5']) {
        const del = this.db.prepare(`DELETE FROM ${table} WHERE series = ? AND ts < ?`);
        for (const row of rows) del.run(row.id, cut);
      }
    })();
    for (const row of rows) this.tier5.forget(row.id);
    return rows.length;
  }

  series(filter: { deployment?: string | null; container?: string | null; metric?: string; host?: boolean }): SeriesRow[] {
    return [...this.ids.values()].filter(
      (r) =>
        (filter.host ? r.container === null : r.container !== null) &&
        (filter.deployment === undefined || r.deployment === filter.deployment) &&
        (filter.container === undefined || r.container === filter.container) &&
        (filter.metric === undefined || r.metric === filter.metric),
    );
  }

  /**
   * Points of the given series between `since` and now (seconds), averaged per step. Raw samples when the range
   * lies within the raw retention and the step is under a minute; otherwise the coarsest rollup tier whose
   * resolution divides the step, then finer tiers (down to raw samples) for the recent part not folded yet.
   */
  query(rows: SeriesRow[], since: number, sampleInterval: number, rawRetention: number, nowSeconds = Date.now() / 1000): QueryResult {
    const until = Math.floor(nowSeconds);
    since = Math.min(Math.floor(since), until);
    const range = Math.max(1, until - since);
    const wanted = Math.max(sampleInterval, range / MAX_POINTS);
    let step = STEPS.find((s) => s >= wanted) ?? 86400;
    const useRaw = step < 60 && range <= rawRetention;
    if (!useRaw) step = Math.max(60, step);
    const result: QueryResult = { since, until, step, timestamps: [], series: [] };
    if (rows.length === 0) return result;
    const ids = rows.map((r) => r.id);
    // A fixed grid of buckets per series: index = (bucket - first) / step.
    const first = since - (since % step);
    const size = Math.floor((until - first) / step) + 1;
    const grids = new Map(ids.map((id) => [id, { sum: new Float64Array(size), n: new Float64Array(size) }]));
    const add = (id: number, bucket: number, sum: number, n: number) => {
      const g = grids.get(id)!;
      const i = (bucket - first) / step;
      if (i < 0 || i >= size) return;
      g.sum[i] += sum;
      g.n[i] += n;
    };
    const placeholders = ids.map(() => '?').join(',');
    // `step` is one of STEPS (an integer) and is written into the SQL: a bound JS number is a REAL in SQLite,
    // which would make the bucket division a float division.
    const read = (table: 'samples' | 'rollups', from: number, to: number) => {
      if (from >= to) return;
      const sql =
        table === 'samples'
          ? `SELECT series, (ts / ${step}) * ${step} AS b, SUM(value), COUNT(*) FROM samples`
          : `SELECT series, (ts / ${step}) * ${step} AS b, SUM(avg * n), SUM(n) FROM rollups`;
      const stmt = this.db.prepare(`${sql} WHERE series IN (${placeholders}) AND ts >= ? AND ts < ? GROUP BY series, b`).raw(true);
      for (const [series, bucket, sum, n] of stmt.iterate(...ids, from, to) as Iterable<[number, number, number, number]>) add(series, bucket, sum, n);
    };
    const end = until + 1;
    if (useRaw) read('samples', since, end);
    else {
      let from = since;
      if (step % 300 === 0) {
        const to = Math.min(end, this.rolled5Until);
        if (from < to) {
          for (const id of ids) {
            this.tier5.collect(
              id,
              from,
              to,
              step,
              (loadFrom) => this.tier5Range.iterate(id, loadFrom, this.rolled5Until) as Iterable<TierRow>,
              (bucket, sum, n) => add(id, bucket, sum, n),
            );
          }
        }
        from = Math.max(from, this.rolled5Until);
      }
      read('rollups', from, Math.min(end, this.rolledUntil));
      read('samples', Math.max(from, this.rolledUntil), end);
    }
    // Columns: the buckets any series has a value for; 6 significant digits are plenty for a chart.
    const used: number[] = [];
    for (let i = 0; i < size; i++) if (ids.some((id) => grids.get(id)!.n[i]! > 0)) used.push(i);
    result.timestamps = used.map((i) => (first + i * step) * 1000);
    for (const row of rows) {
      const g = grids.get(row.id)!;
      result.series.push({ key: row, values: used.map((i) => (g.n[i]! > 0 ? round6(g.sum[i]! / g.n[i]!) : null)) });
    }
    return result;
  }

  close(): void {
    this.db.close();
  }
}
