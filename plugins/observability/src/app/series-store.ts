/**
 * Metric series in SQLite: raw samples (short retention) and 1-minute rollups (long retention). Both tables are
 * clustered by (series, ts), so a history query is a range scan per series; queries pick a step so that a range
 * answers with at most a few hundred points per series.
 */
import Database from 'better-sqlite3';

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
  series: { key: SeriesRow; points: [number, number][] }[];
}

const MAX_POINTS = 360;
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

export class SeriesStore {
  private readonly db: Database.Database;
  private readonly ids = new Map<string, SeriesRow>();
  private readonly insertSample;
  private readonly insertSeries;
  private readonly updateDeployment;
  private rolledUntil: number;

  constructor(file: string) {
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS series (id INTEGER PRIMARY KEY, container TEXT NOT NULL, deployment TEXT, metric TEXT NOT NULL, UNIQUE (container, metric));
      CREATE INDEX IF NOT EXISTS series_deployment ON series (deployment);
      CREATE TABLE IF NOT EXISTS samples (series INTEGER NOT NULL, ts INTEGER NOT NULL, value REAL NOT NULL, PRIMARY KEY (series, ts)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rollups (series INTEGER NOT NULL, ts INTEGER NOT NULL, avg REAL NOT NULL, min REAL NOT NULL, max REAL NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (series, ts)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    `);
    for (const row of this.db.prepare('SELECT id, container, deployment, metric FROM series').all() as { id: number; container: string; deployment: string | null; metric: string }[]) {
      const key: SeriesRow = { id: row.id, container: row.container === '' ? null : row.container, deployment: row.deployment, metric: row.metric };
      this.ids.set(`${row.container}\u0000${row.metric}`, key);
    }
    this.insertSample = this.db.prepare('INSERT OR REPLACE INTO samples (series, ts, value) VALUES (?, ?, ?)');
    this.insertSeries = this.db.prepare('INSERT INTO series (container, deployment, metric) VALUES (?, ?, ?)');
    this.updateDeployment = this.db.prepare('UPDATE series SET deployment = ? WHERE id = ?');
    const meta = this.db.prepare("SELECT value FROM meta WHERE key = 'rolled_until'").get() as { value: string } | undefined;
    this.rolledUntil = meta ? Number(meta.value) : Math.floor(Date.now() / 60_000) * 60;
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

  /** Folds complete minutes of raw samples into rollups. */
  rollup(nowSeconds = Date.now() / 1000): void {
    const until = Math.floor(nowSeconds / 60) * 60;
    if (until <= this.rolledUntil) return;
    this.db.transaction(() => {
      this.db.prepare(`INSERT OR REPLACE INTO rollups (series, ts, avg, min, max, n)
        SELECT series, (ts / 60) * 60 AS minute, AVG(value), MIN(value), MAX(value), COUNT(*) FROM samples
        WHERE ts >= ? AND ts < ? GROUP BY series, minute`).run(this.rolledUntil, until);
      this.db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('rolled_until', ?)").run(String(until));
    })();
    this.rolledUntil = until;
  }

  /** Drops samples and rollups past their retention (per series: a range delete on the primary key). */
  prune(rawRetention: number, rollupRetention: number, nowSeconds = Date.now() / 1000): void {
    const rawCut = Math.floor(nowSeconds - rawRetention);
    const rollCut = Math.floor(nowSeconds - rollupRetention);
    const delRaw = this.db.prepare('DELETE FROM samples WHERE series = ? AND ts < ?');
    const delRoll = this.db.prepare('DELETE FROM rollups WHERE series = ? AND ts < ?');
    this.db.transaction(() => {
      for (const row of this.ids.values()) {
        delRaw.run(row.id, rawCut);
        delRoll.run(row.id, rollCut);
      }
    })();
  }

  series(filter: { deployment?: string | null; container?: string | null; metric?: string; host?: boolean }): SeriesRow[] {
    return [...this.ids.values()].filter((r) =>
      (filter.host ? r.container === null : r.container !== null) &&
      (filter.deployment === undefined || r.deployment === filter.deployment) &&
      (filter.container === undefined || r.container === filter.container) &&
      (filter.metric === undefined || r.metric === filter.metric));
  }

  /**
   * Points of the given series between `since` and now (seconds), averaged per step. Raw samples when the range
   * lies within the raw retention and the step is under a minute; rollups otherwise (plus raw samples for the
   * minutes not rolled up yet).
   */
  query(rows: SeriesRow[], since: number, sampleInterval: number, rawRetention: number, nowSeconds = Date.now() / 1000): QueryResult {
    const until = Math.floor(nowSeconds);
    since = Math.floor(since);
    const range = Math.max(1, until - since);
    const wanted = Math.max(sampleInterval, range / MAX_POINTS);
    let step = STEPS.find((s) => s >= wanted) ?? 86400;
    const useRaw = step < 60 && until - since <= rawRetention;
    if (!useRaw) step = Math.max(60, step);
    const result: QueryResult = { since, until, step, series: [] };
    if (rows.length === 0) return result;
    const ids = rows.map((r) => r.id);
    const byId = new Map(rows.map((r) => [r.id, new Map<number, [number, number]>()]));
    const add = (series: number, bucket: number, sum: number, n: number) => {
      const m = byId.get(series)!;
      const cur = m.get(bucket);
      if (cur) {
        cur[0] += sum;
        cur[1] += n;
      } else m.set(bucket, [sum, n]);
    };
    const placeholders = ids.map(() => '?').join(',');
    const rawFrom = useRaw ? since : Math.max(since, this.rolledUntil);
    if (!useRaw) {
      const stmt = this.db.prepare(`SELECT series, (ts / ?) * ? AS b, SUM(avg * n) AS s, SUM(n) AS n FROM rollups
        WHERE series IN (${placeholders}) AND ts >= ? AND ts < ? GROUP BY series, b`).raw(true);
      for (const [series, b, s, n] of stmt.iterate(step, step, ...ids, since, this.rolledUntil) as Iterable<[number, number, number, number]>) add(series, b, s, n);
    }
    if (rawFrom <= until) {
      const stmt = this.db.prepare(`SELECT series, (ts / ?) * ? AS b, SUM(value) AS s, COUNT(*) AS n FROM samples
        WHERE series IN (${placeholders}) AND ts >= ? GROUP BY series, b`).raw(true);
      for (const [series, b, s, n] of stmt.iterate(step, step, ...ids, rawFrom) as Iterable<[number, number, number, number]>) add(series, b, s, n);
    }
    for (const row of rows) {
      const buckets = [...byId.get(row.id)!.entries()].sort((a, b) => a[0] - b[0]);
      result.series.push({ key: row, points: buckets.map(([b, [s, n]]) => [b * 1000, s / n]) });
    }
    return result;
  }

  close(): void {
    this.db.close();
  }
}
