/**
 * The traffic journal (SQLite): one row per request nginx served through an agent server, indexed for the
 * filters of 4.14. Inserts are batched in transactions (the ingester hands over whole reads).
 */
import type { SqlDatabase, SqlStatement } from '@agent/sdk';

export interface TrafficRecord {
  time_ms: number;
  deployment: string;
  host: string;
  method: string;
  path: string;
  status: number;
  bytes: number;
  duration_ms: number;
  source_ip: string;
  user_agent: string;
  /** Denied by a block (403 from the proxy itself). */
  blocked: boolean;
  /** Served by a location protected with basic auth. */
  protected: boolean;
  user: string;
}

export interface TrafficFilter {
  deployment?: string;
  /** Only these deployments (non-admin principals); undefined: all. */
  deployments?: string[];
  method?: string;
  status_group?: string;
  status_code?: number;
  source_ip?: string;
  path?: string;
  host?: string;
  start_ms?: number;
  end_ms?: number;
}

export interface TrafficRow {
  id: number;
  time: string;
  deployment: string | null;
  host: string;
  method: string;
  path: string;
  status: number;
  bytes: number;
  duration_ms: number;
  source_ip: string;
  user_agent: string;
}

interface RawRow {
  id: number; time_ms: number; deployment: string; host: string; method: string; path: string; status: number;
  bytes: number; duration_ms: number; source_ip: string; user_agent: string;
}

/** `*` wildcards become LIKE `%`; without a wildcard the pattern matches anywhere in the path. */
export function likePattern(pattern: string): string {
  const escaped = pattern.replace(/[\\%_]/g, (c) => `\\${c}`);
  return escaped.includes('*') ? escaped.replace(/\*/g, '%') : `%${escaped}%`;
}

const ROWS_PER_STATEMENT = 50;
/** Matches counted at most for `total` (unless an exact total is asked). */
export const COUNT_CAP = 10_000;
/** Below this many matches, fetching them all and sorting beats walking the time order. */
const RARE_MATCHES = 1000;

export class TrafficJournal {
  private readonly insert: SqlStatement;
  private readonly insertBatch: (records: TrafficRecord[]) => void;

  constructor(readonly db: SqlDatabase) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS traffic (
        id INTEGER PRIMARY KEY,
        time_ms INTEGER NOT NULL,
        deployment TEXT NOT NULL,
        host TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        status INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        duration_ms REAL NOT NULL,
        source_ip TEXT NOT NULL,
        user_agent TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS traffic_time ON traffic (time_ms);
      CREATE INDEX IF NOT EXISTS traffic_deployment ON traffic (deployment, time_ms);
      CREATE INDEX IF NOT EXISTS traffic_status ON traffic (status, time_ms);
      CREATE INDEX IF NOT EXISTS traffic_ip ON traffic (source_ip, time_ms);
      -- Counts of the common filter combinations (deployment [+ method] [+ status]) read this index alone.
      DROP INDEX IF EXISTS traffic_counts;
      CREATE INDEX IF NOT EXISTS traffic_dep_method_status ON traffic (deployment, method, status);
      -- Exact row count without scanning (kept by add and cleanup in the same transactions).
      CREATE TABLE IF NOT EXISTS traffic_rows (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
      INSERT OR IGNORE INTO traffic_rows (id, n) SELECT 1, COUNT(*) FROM traffic;
    `);
    const cols = '(time_ms, deployment, host, method, path, status, bytes, duration_ms, source_ip, user_agent)';
    const values = (n: number) => Array.from({ length: n }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ');
    this.insert = db.prepare(`INSERT INTO traffic ${cols} VALUES ${values(1)}`);
    // Many rows per statement: far fewer calls into SQLite per line.
    const wide = db.prepare(`INSERT INTO traffic ${cols} VALUES ${values(ROWS_PER_STATEMENT)}`);
    const bump = db.prepare('UPDATE traffic_rows SET n = n + ? WHERE id = 1');
    const params = (r: TrafficRecord) => [r.time_ms, r.deployment, r.host, r.method, r.path, r.status, r.bytes, r.duration_ms, r.source_ip, r.user_agent];
    this.insertBatch = db.transaction((records: TrafficRecord[]) => {
      let i = 0;
      for (; i + ROWS_PER_STATEMENT <= records.length; i += ROWS_PER_STATEMENT) {
        const flat: unknown[] = [];
        for (let k = i; k < i + ROWS_PER_STATEMENT; k++) flat.push(...params(records[k]!));
        wide.run(...flat);
      }
      for (; i < records.length; i++) this.insert.run(...params(records[i]!));
      bump.run(records.length);
    });
    this.deleteOld = db.transaction((before: number) => {
      const n = db.prepare('DELETE FROM traffic WHERE time_ms < ?').run(before).changes;
      db.prepare('UPDATE traffic_rows SET n = MAX(0, n - ?) WHERE id = 1').run(n);
      return n;
    });
  }

  private readonly deleteOld: (before: number) => number;

  private count(sql: string, params: unknown[]): number {
    if (!sql) return (this.db.prepare('SELECT n FROM traffic_rows WHERE id = 1').get() as { n: number } | undefined)?.n ?? 0;
    return (this.db.prepare(`SELECT COUNT(*) AS n FROM traffic ${sql}`).get(...params) as { n: number }).n;
  }

  add(records: TrafficRecord[]): void {
    if (records.length) this.insertBatch(records);
  }

  /**
   * WHERE clause of a filter. For pages (`page`), the unary `+` keeps SQLite from choosing an index on the status
   * range or the method, which would force a sort of every match: pages walk an index that is already in time
   * order (time, deployment+time, status+time for one code, source+time) and stop after `limit` rows.
   */
  private where(f: TrafficFilter, page = false): { sql: string; params: unknown[] } {
    const plus = page ? '+' : '';
    const clauses: string[] = [];
    const params: unknown[] = [];
    if (f.deployment !== undefined) {
      clauses.push('deployment = ?');
      params.push(f.deployment);
    }
    if (f.deployments) {
      clauses.push(`deployment IN (${f.deployments.map(() => '?').join(',') || "''"})`);
      params.push(...f.deployments);
    }
    if (f.method) {
      clauses.push(`${plus}method = ?`);
      params.push(f.method);
    }
    if (f.status_code !== undefined) {
      clauses.push('status = ?');
      params.push(f.status_code);
    } else if (f.status_group) {
      const base = Number(f.status_group[0]) * 100;
      clauses.push(`${plus}status BETWEEN ? AND ?`);
      params.push(base, base + 99);
    }
    if (f.source_ip) {
      clauses.push('source_ip = ?');
      params.push(f.source_ip);
    }
    if (f.host) {
      clauses.push('host = ?');
      params.push(f.host);
    }
    if (f.path) {
      clauses.push("path LIKE ? ESCAPE '\\'");
      params.push(likePattern(f.path));
    }
    if (f.start_ms !== undefined) {
      clauses.push('time_ms >= ?');
      params.push(f.start_ms);
    }
    if (f.end_ms !== undefined) {
      clauses.push('time_ms <= ?');
      params.push(f.end_ms);
    }
    return { sql: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params };
  }

  /**
   * One page, newest first, and the number of matches. Counting stops at `COUNT_CAP` matches (`capped`) unless
   * `exact` is asked: an exact count of a broad filter reads every matching index entry, which is what made
   * pages slow. Rare matches (up to RARE_MATCHES) are fetched through the most selective index and sorted;
   * more frequent ones by walking a time-ordered index until the page is full (a short walk when matches are
   * frequent).
   */
  query(f: TrafficFilter, limit: number, offset: number, exact = false): { items: TrafficRow[]; total: number; capped: boolean } {
    const { sql, params } = this.where(f);
    let total: number;
    let capped = false;
    if (!sql || exact) total = this.count(sql, params);
    else {
      total = (this.db.prepare(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM traffic ${sql} LIMIT ${COUNT_CAP + 1})`).get(...params) as { n: number }).n;
      if (total > COUNT_CAP) {
        total = COUNT_CAP;
        capped = true;
      }
    }
    if (total === 0 || offset >= total && !capped) return { items: [], total, capped };
    let rows: RawRow[];
    if (sql && total <= RARE_MATCHES) {
      rows = this.db.prepare(`SELECT * FROM traffic WHERE id IN (SELECT id FROM traffic ${sql}) ORDER BY time_ms DESC, id DESC LIMIT ? OFFSET ?`).all(...params, limit, offset) as RawRow[];
    } else {
      const page = this.where(f, true);
      rows = this.db.prepare(`SELECT * FROM traffic ${page.sql} ORDER BY time_ms DESC, id DESC LIMIT ? OFFSET ?`).all(...page.params, limit, offset) as RawRow[];
    }
    return { items: rows.map(toRow), total, capped };
  }

  /** Requests, status groups, bytes and latency percentiles per deployment (one pass over the rows). */
  stats(f: TrafficFilter) {
    const { sql, params } = this.where(f);
    type Acc = { deployment: string | null; requests: number; bytes: number; status: Record<string, number>; durations: number[] };
    const groups = () => ({ '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 } as Record<string, number>);
    const per = new Map<string, Acc>();
    const all: number[] = [];
    const total = { requests: 0, bytes: 0, status: groups() };
    for (const row of this.db.prepare(`SELECT deployment, status, bytes, duration_ms FROM traffic ${sql}`).iterate(...params) as IterableIterator<{ deployment: string; status: number; bytes: number; duration_ms: number }>) {
      let s = per.get(row.deployment);
      if (!s) per.set(row.deployment, (s = { deployment: row.deployment || null, requests: 0, bytes: 0, status: groups(), durations: [] }));
      const key = `${Math.floor(row.status / 100)}xx`;
      s.requests++;
      s.bytes += row.bytes;
      s.status[key] = (s.status[key] ?? 0) + 1;
      s.durations.push(row.duration_ms);
      total.requests++;
      total.bytes += row.bytes;
      total.status[key] = (total.status[key] ?? 0) + 1;
      all.push(row.duration_ms);
    }
    const pct = (values: number[], p: number) => {
      if (values.length === 0) return null;
      const sorted = Float64Array.from(values).sort();
      return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
    };
    const deployments = [...per.values()].sort((a, b) => b.requests - a.requests)
      .map(({ durations, ...s }) => ({ ...s, p50_ms: pct(durations, 0.5), p95_ms: pct(durations, 0.95) }));
    return { total: { ...total, p50_ms: pct(all, 0.5), p95_ms: pct(all, 0.95) }, deployments };
  }

  /** Requests for host names no deployment owns (the default server), by host. */
  unknownDomains(f: TrafficFilter, limit: number) {
    const { sql, params } = this.where({ ...f, deployment: '' });
    return this.db.prepare(`SELECT host, COUNT(*) AS requests, COUNT(DISTINCT source_ip) AS sources, MIN(time_ms) AS first, MAX(time_ms) AS last
      FROM traffic ${sql} GROUP BY host ORDER BY requests DESC LIMIT ?`).all(...params, limit) as { host: string; requests: number; sources: number; first: number; last: number }[];
  }

  cleanup(olderThanMs: number): number {
    return this.deleteOld(olderThanMs);
  }
}

const toRow = (r: RawRow): TrafficRow => ({
  id: r.id, time: new Date(r.time_ms).toISOString(), deployment: r.deployment || null, host: r.host, method: r.method,
  path: r.path, status: r.status, bytes: r.bytes, duration_ms: r.duration_ms, source_ip: r.source_ip, user_agent: r.user_agent,
});

/** One JSON access-log line (see the log_format in render.ts) → record; null for anything else. */
export function parseLine(line: string): TrafficRecord | null {
  if (line.length < 10 || line.charCodeAt(0) !== 123) return null;
  let o: Record<string, string>;
  try {
    o = JSON.parse(line) as Record<string, string>;
  } catch {
    return null;
  }
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
