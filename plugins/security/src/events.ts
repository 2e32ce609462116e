/**
 * Security events: detected from the traffic nginx sees (see detector.ts, detection.ts) and kept in the plugin's
 * journal, indexed for the list filters, with the position in the traffic stream up to which they were derived.
 */
import type { SqlDatabase } from '@agent/sdk';

export type EventType = 'scan' | 'auth_failure' | 'attack_path' | 'blocked_ip_hit' | 'rate_limit';
export type Severity = 'low' | 'medium' | 'high' | 'critical';

export interface SecurityEventInput {
  time_ms: number;
  type: EventType;
  severity: Severity;
  source_ip: string;
  deployment: string | null;
  host: string;
  path: string;
  details: Record<string, unknown>;
  auto_blocked: boolean;
}

export interface SecurityEvent extends Omit<SecurityEventInput, 'time_ms'> {
  id: number;
  time: string;
}

export interface EventFilter {
  type?: string;
  source_ip?: string;
  deployment?: string;
  deployments?: string[];
  start_ms?: number;
  end_ms?: number;
}

interface Raw {
  id: number;
  time_ms: number;
  type: EventType;
  severity: Severity;
  source_ip: string;
  deployment: string;
  host: string;
  path: string;
  details: string;
  auto_blocked: number;
}

const toEvent = (r: Raw): SecurityEvent => ({
  id: r.id,
  time: new Date(r.time_ms).toISOString(),
  type: r.type,
  severity: r.severity,
  source_ip: r.source_ip,
  deployment: r.deployment || null,
  host: r.host,
  path: r.path,
  details: JSON.parse(r.details) as Record<string, unknown>,
  auto_blocked: r.auto_blocked === 1,
});

/** How far the events were derived from the traffic stream (see `TrafficBatch`). */
export interface StreamPosition {
  stream: string;
  seq: number;
}

export class SecurityEvents {
  constructor(readonly db: SqlDatabase) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS stream_position (id INTEGER PRIMARY KEY CHECK (id = 1), stream TEXT NOT NULL, seq INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS imports (name TEXT PRIMARY KEY, at TEXT NOT NULL, rows INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS security_events (
        id INTEGER PRIMARY KEY,
        time_ms INTEGER NOT NULL,
        type TEXT NOT NULL,
        severity TEXT NOT NULL,
        source_ip TEXT NOT NULL,
        deployment TEXT NOT NULL,
        host TEXT NOT NULL,
        path TEXT NOT NULL,
        details TEXT NOT NULL,
        auto_blocked INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX IF NOT EXISTS security_events_time ON security_events (time_ms);
      CREATE INDEX IF NOT EXISTS security_events_ip ON security_events (source_ip, time_ms);
      CREATE INDEX IF NOT EXISTS security_events_type ON security_events (type, time_ms);
      CREATE INDEX IF NOT EXISTS security_events_deployment ON security_events (deployment, time_ms);
    `);
  }

  add(e: SecurityEventInput): number {
    return Number(
      this.db
        .prepare(
          `INSERT INTO security_events (time_ms, type, severity, source_ip, deployment, host, path, details, auto_blocked)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(e.time_ms, e.type, e.severity, e.source_ip, e.deployment ?? '', e.host, e.path, JSON.stringify(e.details), e.auto_blocked ? 1 : 0).lastInsertRowid,
    );
  }

  /** The position of the last record events were derived from (null: none yet). */
  position(): StreamPosition | null {
    return (this.db.prepare('SELECT stream, seq FROM stream_position WHERE id = 1').get() as StreamPosition | undefined) ?? null;
  }

  /** Adds events and moves the position, in one transaction: after a crash, neither lost nor repeated. */
  commit(events: SecurityEventInput[], position: StreamPosition): number[] {
    return this.db.transaction(() => {
      const ids = events.map((e) => this.add(e));
      this.db
        .prepare('INSERT INTO stream_position (id, stream, seq) VALUES (1, ?, ?) ON CONFLICT(id) DO UPDATE SET stream = excluded.stream, seq = excluded.seq')
        .run(position.stream, position.seq);
      return ids;
    })();
  }

  /** Whether an import (`name`) was done. */
  imported(name: string): boolean {
    return !!this.db.prepare('SELECT 1 FROM imports WHERE name = ?').get(name);
  }

  /**
   * Copies events of another journal (same columns, ids kept, so links to them stay valid), page by page, and
   * records the import in the same transaction: it is done once, whole or not at all.
   */
  import(name: string, page: (afterId: number, limit: number) => Record<string, unknown>[]): number {
    const insert = this.db.prepare(
      `INSERT OR IGNORE INTO security_events (id, time_ms, type, severity, source_ip, deployment, host, path, details, auto_blocked)
      VALUES (@id, @time_ms, @type, @severity, @source_ip, @deployment, @host, @path, @details, @auto_blocked)`,
    );
    return this.db.transaction(() => {
      if (this.imported(name)) return 0;
      let rows = 0;
      for (let after = 0; ;) {
        const batch = page(after, 5000);
        if (batch.length === 0) break;
        for (const r of batch) rows += insert.run(r).changes;
        after = Number(batch.at(-1)!.id);
      }
      this.db.prepare('INSERT INTO imports (name, at, rows) VALUES (?, ?, ?)').run(name, new Date().toISOString(), rows);
      return rows;
    })();
  }

  markBlocked(id: number): void {
    this.db.prepare('UPDATE security_events SET auto_blocked = 1 WHERE id = ?').run(id);
  }

  private where(f: EventFilter) {
    const clauses: string[] = [];
    const params: unknown[] = [];
    const eq = (col: string, v: unknown) => {
      clauses.push(`${col} = ?`);
      params.push(v);
    };
    if (f.type) eq('type', f.type);
    if (f.source_ip) eq('source_ip', f.source_ip);
    if (f.deployment !== undefined) eq('deployment', f.deployment);
    if (f.deployments) {
      // An empty list matches nothing (not the untagged events, whose deployment is '').
      clauses.push(f.deployments.length ? `deployment IN (${f.deployments.map(() => '?').join(',')})` : '0');
      params.push(...f.deployments);
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

  list(f: EventFilter, limit: number, offset: number): { items: SecurityEvent[]; total: number } {
    const { sql, params } = this.where(f);
    const rows = this.db.prepare(`SELECT * FROM security_events ${sql} ORDER BY time_ms DESC, id DESC LIMIT ? OFFSET ?`).all(...params, limit, offset) as Raw[];
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM security_events ${sql}`).get(...params) as { n: number }).n;
    return { items: rows.map(toEvent), total };
  }

  get(id: number): SecurityEvent | null {
    const r = this.db.prepare('SELECT * FROM security_events WHERE id = ?').get(id) as Raw | undefined;
    return r ? toEvent(r) : null;
  }

  stats(f: EventFilter, sinceMs: number) {
    const { sql, params } = this.where(f);
    const and = sql ? `${sql} AND` : 'WHERE';
    const count = (extra = '', p: unknown[] = []) =>
      (this.db.prepare(`SELECT COUNT(*) AS n FROM security_events ${extra || sql}`).get(...(extra ? p : params)) as { n: number }).n;
    const group = (col: string) =>
      Object.fromEntries(
        (this.db.prepare(`SELECT ${col} AS k, COUNT(*) AS n FROM security_events ${sql} GROUP BY ${col}`).all(...params) as { k: string; n: number }[]).map(
          (r) => [r.k, r.n],
        ),
      );
    return {
      total: count(),
      last_24h: count(`${and} time_ms >= ?`, [...params, sinceMs]),
      auto_blocked: count(`${and} auto_blocked = 1`, params),
      by_type: group('type'),
      by_severity: group('severity'),
      top_ips: (
        this.db
          .prepare(
            `SELECT source_ip AS ip, COUNT(*) AS events, MAX(time_ms) AS last FROM security_events ${sql} GROUP BY source_ip ORDER BY events DESC LIMIT 10`,
          )
          .all(...params) as { ip: string; events: number; last: number }[]
      ).map((r) => ({ ip: r.ip, events: r.events, last_seen: new Date(r.last).toISOString() })),
    };
  }

  /**
   * A deleted deployment's events up to `untilMs` move to its retired name: a new deployment of the same name
   * starts without them, and only global principals read them.
   */
  retire(name: string, retiredAs: string, untilMs: number): number {
    return this.db.prepare('UPDATE security_events SET deployment = ? WHERE deployment = ? AND time_ms <= ?').run(retiredAs, name, untilMs).changes;
  }

  /** The deployment names events are tagged with (not the retired names, nor the untagged events). */
  deployments(): string[] {
    return (
      this.db.prepare("SELECT DISTINCT deployment FROM security_events WHERE deployment != '' AND instr(deployment, '~') = 0").all() as { deployment: string }[]
    ).map((r) => r.deployment);
  }

  cleanup(olderThanMs: number): number {
    return this.db.prepare('DELETE FROM security_events WHERE time_ms < ?').run(olderThanMs).changes;
  }
}
