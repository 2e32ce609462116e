/** Alert and health events: bounded journals in SQLite (`events.sqlite` in the app data folder). */
import type BetterSqlite3 from 'better-sqlite3';
import { Database } from './sqlite.js';

export interface AlertEventRow {
  id: number;
  time: string;
  rule_id: string;
  rule_name: string;
  deployment: string | null;
  container: string | null;
  metric: string;
  value: number | null;
  threshold: number;
  state: 'pending' | 'firing' | 'resolved';
  message: string;
  /**
   * Whose rule it was: its deployment, `*` for a rule of every container or of the host (global), null for events
   * recorded before this was (seen with their container's deployment alone).
   */
  rule_scope: string | null;
}

export interface HealthEventRow {
  id: number;
  time: string;
  container: string;
  deployment: string | null;
  action: 'restarted' | 'recovered' | 'gave_up' | 'restart_failed';
  attempt: number;
  message: string;
}

export class Journal {
  private readonly db: BetterSqlite3.Database;
  private writes = 0;

  constructor(
    file: string,
    private readonly max: () => number,
  ) {
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS alert_events (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, rule_id TEXT NOT NULL,
        rule_name TEXT NOT NULL, deployment TEXT, container TEXT, metric TEXT NOT NULL, value REAL, threshold REAL NOT NULL,
        state TEXT NOT NULL, message TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS health_events (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, container TEXT NOT NULL,
        deployment TEXT, action TEXT NOT NULL, attempt INTEGER NOT NULL, message TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS alert_states (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    `);
    const columns = (this.db.prepare('PRAGMA table_info(alert_events)').all() as { name: string }[]).map((c) => c.name);
    if (!columns.includes('rule_scope')) this.db.exec('ALTER TABLE alert_events ADD COLUMN rule_scope TEXT');
  }

  private trim(): void {
    if (++this.writes % 20 !== 0) return;
    for (const table of ['alert_events', 'health_events']) {
      this.db.prepare(`DELETE FROM ${table} WHERE id <= (SELECT MAX(id) FROM ${table}) - ?`).run(this.max());
    }
  }

  addAlertEvent(e: Omit<AlertEventRow, 'id' | 'time'>): void {
    this.db
      .prepare(
        `INSERT INTO alert_events (time, rule_id, rule_name, deployment, container, metric, value, threshold, state, message, rule_scope)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(new Date().toISOString(), e.rule_id, e.rule_name, e.deployment, e.container, e.metric, e.value, e.threshold, e.state, e.message, e.rule_scope);
    this.trim();
  }

  addHealthEvent(e: Omit<HealthEventRow, 'id' | 'time'>): void {
    this.db
      .prepare('INSERT INTO health_events (time, container, deployment, action, attempt, message) VALUES (?, ?, ?, ?, ?, ?)')
      .run(new Date().toISOString(), e.container, e.deployment, e.action, e.attempt, e.message);
    this.trim();
  }

  /** Newest first, filtered by `visible` (the caller's scope and grants) while reading, up to `limit`. */
  alertEvents(
    visible: (deployment: string | null, row: AlertEventRow) => boolean,
    filter: { deployment?: string; rule?: string; limit: number },
  ): AlertEventRow[] {
    return this.select<AlertEventRow>(
      'alert_events',
      visible,
      filter.limit,
      filter.deployment,
      filter.rule ? ['rule_id = ? OR rule_name = ?', filter.rule, filter.rule] : null,
    );
  }

  healthEvents(visible: (deployment: string | null, row: HealthEventRow) => boolean, filter: { deployment?: string; limit: number }): HealthEventRow[] {
    return this.select<HealthEventRow>('health_events', visible, filter.limit, filter.deployment, null);
  }

  /**
   * A deployment was deleted at `before` (ISO): its events until then are kept under its retired name, which only
   * global principals reach; a new deployment of the same name starts without them.
   */
  retireDeployment(deployment: string, retiredAs: string, before: string): number {
    let n = 0;
    this.db.transaction(() => {
      n += this.db
        .prepare(`UPDATE alert_events SET deployment = ?, rule_scope = CASE WHEN rule_scope = ? THEN ? ELSE rule_scope END WHERE deployment = ? AND time <= ?`)
        .run(retiredAs, deployment, retiredAs, deployment, before).changes;
      n += this.db.prepare('UPDATE health_events SET deployment = ? WHERE deployment = ? AND time <= ?').run(retiredAs, deployment, before).changes;
    })();
    return n;
  }

  private select<T extends { deployment: string | null }>(
    table: string,
    visible: (d: string | null, row: T) => boolean,
    limit: number,
    deployment: string | undefined,
    extra: [string, ...unknown[]] | null,
  ): T[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (deployment) {
      where.push('deployment = ?');
      args.push(deployment);
    }
    if (extra) {
      where.push(`(${extra[0]})`);
      args.push(...extra.slice(1));
    }
    const sql = `SELECT * FROM ${table} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC`;
    const out: T[] = [];
    for (const row of this.db.prepare(sql).iterate(...args) as Iterable<T>) {
      if (!visible(row.deployment, row)) continue;
      out.push(row);
      if (out.length >= limit) break;
    }
    return out;
  }

  loadStates<T>(): T[] {
    return (this.db.prepare('SELECT value FROM alert_states').all() as { value: string }[]).map((r) => JSON.parse(r.value) as T);
  }

  saveStates(states: { key: string; value: unknown }[]): void {
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM alert_states').run();
      const ins = this.db.prepare('INSERT INTO alert_states (key, value) VALUES (?, ?)');
      for (const s of states) ins.run(s.key, JSON.stringify(s.value));
    })();
  }

  close(): void {
    this.db.close();
  }
}
