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
    `);
    this.insert = db.prepare(`INSERT INTO traffic (time_ms, deployment, host, method, path, status, bytes, duration_ms, source_ip, user_agent)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.insertBatch = db.transaction((records: TrafficRecord[]) => {
      for (const r of records) {
        this.insert.run(r.time_ms, r.deployment, r.host, r.method, r.path, r.status, r.bytes, r.duration_ms, r.source_ip, r.user_agent);
      }
    });
  }

  add(records: TrafficRecord[]): void {
    if (records.length) this.insertBatch(records);
  }

  private where(f: TrafficFilter): { sql: string; params: unknown[] } {
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
      clauses.push('method = ?');
      params.push(f.method);
    }
    if (f.status_code !== undefined) {
      clauses.push('status = ?');
      params.push(f.status_code);
    } else if (f.status_group) {
      const base = Number(f.status_group[0]) * 100;
      clauses.push('status BETWEEN ? AND ?');
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

  query(f: TrafficFilter, limit: number, offset: number): { items: TrafficRow[]; total: number } {
    const { sql, params } = this.where(f);
    const rows = this.db.prepare(`SELECT * FROM traffic ${sql} ORDER BY time_ms DESC, id DESC LIMIT ? OFFSET ?`).all(...params, limit, offset) as RawRow[];
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM traffic ${sql}`).get(...params) as { n: number }).n;
    return { items: rows.map(toRow), total };
  }

  /** Requests, status groups, bytes and latency percentiles per deployment. */
  stats(f: TrafficFilter) {
    const { sql, params } = this.where(f);
    const groups = this.db.prepare(`SELECT deployment, status / 100 AS g, COUNT(*) AS n, SUM(bytes) AS b FROM traffic ${sql} GROUP BY deployment, g`).all(...params) as { deployment: string; g: number; n: number; b: number }[];
    const per = new Map<string, { deployment: string | null; requests: number; bytes: number; status: Record<string, number>; p50_ms: number | null; p95_ms: number | null }>();
    for (const row of groups) {
      let s = per.get(row.deployment);
      if (!s) per.set(row.deployment, (s = { deployment: row.deployment || null, requests: 0, bytes: 0, status: { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 }, p50_ms: null, p95_ms: null }));
      s.requests += row.n;
      s.bytes += row.b ?? 0;
      const key = `${row.g}xx`;
      s.status[key] = (s.status[key] ?? 0) + row.n;
    }
    const pct = this.db.prepare(`SELECT duration_ms FROM traffic ${sql ? `${sql} AND` : 'WHERE'} deployment = ? ORDER BY duration_ms LIMIT 1 OFFSET ?`);
    for (const s of per.values()) {
      const at = (p: number) => (pct.get(...params, s.deployment ?? '', Math.min(s.requests - 1, Math.floor(p * s.requests))) as { duration_ms: number } | undefined)?.duration_ms ?? null;
      s.p50_ms = at(0.5);
      s.p95_ms = at(0.95);
    }
    const list = [...per.values()].sort((a, b) => b.requests - a.requests);
    const total = list.reduce((acc, s) => {
      acc.requests += s.requests;
      acc.bytes += s.bytes;
      for (const [k, v] of Object.entries(s.status)) acc.status[k] = (acc.status[k] ?? 0) + v;
      return acc;
    }, { requests: 0, bytes: 0, status: { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 } as Record<string, number> });
    const overall = this.db.prepare(`SELECT duration_ms FROM traffic ${sql} ORDER BY duration_ms LIMIT 1 OFFSET ?`);
    const at = (p: number) => total.requests === 0 ? null : (overall.get(...params, Math.min(total.requests - 1, Math.floor(p * total.requests))) as { duration_ms: number } | undefined)?.duration_ms ?? null;
    return { total: { ...total, p50_ms: at(0.5), p95_ms: at(0.95) }, deployments: list };
  }

  /** Requests for host names no deployment owns (the default server), by host. */
  unknownDomains(f: TrafficFilter, limit: number) {
    const { sql, params } = this.where({ ...f, deployment: '' });
    return this.db.prepare(`SELECT host, COUNT(*) AS requests, COUNT(DISTINCT source_ip) AS sources, MIN(time_ms) AS first, MAX(time_ms) AS last
      FROM traffic ${sql} GROUP BY host ORDER BY requests DESC LIMIT ?`).all(...params, limit) as { host: string; requests: number; sources: number; first: number; last: number }[];
  }

  cleanup(olderThanMs: number): number {
    return this.db.prepare('DELETE FROM traffic WHERE time_ms < ?').run(olderThanMs).changes;
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
