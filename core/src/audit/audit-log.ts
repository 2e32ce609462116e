/**
 * The audit journal. Events are queued and written in one transaction every few milliseconds (or per
 * FLUSH_BATCH events), so a burst of requests costs one commit; `flush()` runs before anything reads the table
 * through `database`, and at shutdown.
 */
import type { AuditEventInput, AuditLog, SqlDatabase } from '@agent/sdk';
import type { Journal } from '../store/journal.js';
import { redactDeep } from '../plans/redact.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS audit_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time TEXT NOT NULL,
  time_ms INTEGER NOT NULL,
  actor_type TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  actor_name TEXT,
  action TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  resource_id TEXT,
  deployment TEXT,
  success INTEGER NOT NULL,
  status INTEGER,
  client_ip TEXT,
  detail TEXT
);
-- One index per filter of the audit endpoints, each (value, time): a filtered page walks one index backwards
-- and a filtered count is a range count. New rows land at the end of each value's range, so an insert touches
-- about one hot page per distinct value and index, which keeps ingest cheap.
CREATE INDEX IF NOT EXISTS audit_time ON audit_events(time_ms);
CREATE INDEX IF NOT EXISTS audit_actor ON audit_events(actor_id, time_ms);
CREATE INDEX IF NOT EXISTS audit_actor_type ON audit_events(actor_type, time_ms);
CREATE INDEX IF NOT EXISTS audit_action ON audit_events(action, time_ms);
DROP INDEX IF EXISTS audit_resource;
CREATE INDEX IF NOT EXISTS audit_resource_type ON audit_events(resource_type, time_ms);
CREATE INDEX IF NOT EXISTS audit_resource_id ON audit_events(resource_id, time_ms);
CREATE INDEX IF NOT EXISTS audit_deployment ON audit_events(deployment, time_ms);
CREATE INDEX IF NOT EXISTS audit_ip ON audit_events(client_ip, time_ms);
CREATE INDEX IF NOT EXISTS audit_success ON audit_events(success, time_ms);
`;

/**
 * Events are written together once this many are queued, or after a delay: FLUSH_DELAY_MS when writes are
 * quick, up to MAX_DELAY_MS when they are slow (a burst): every commit rewrites each index page it touched, so
 * bigger batches under load cost far less per event. Shutdown and every read flush first.
 */
const FLUSH_BATCH = 50_000;
const FLUSH_DELAY_MS = 20;
const MAX_DELAY_MS = 1000;

export class CoreAuditLog implements AuditLog {
  private queue: unknown[][] = [];
  private delayMs = FLUSH_DELAY_MS;
  private timer: NodeJS.Timeout | null = null;
  private readonly insert;
  private readonly insertMany;

  constructor(private readonly db: Journal) {
    db.exec(SCHEMA);
    // Reads of the audit endpoints (counts over large ranges) run from memory-mapped pages.
    db.pragma('mmap_size = 268435456');
    // Index pages stay cached between batches (SQLite grows its cache only as it needs it).
    db.pragma('cache_size = -65536');
    this.insert = db.prepare(`INSERT INTO audit_events (time, time_ms, actor_type, actor_id, actor_name, action,
      resource_type, resource_id, deployment, success, status, client_ip, detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`);
    this.insertMany = db.transaction((rows: unknown[][]) => {
      for (const row of rows) this.insert.run(...row);
    });
  }

  get database(): SqlDatabase {
    this.flush();
    return this.db as unknown as SqlDatabase;
  }

  record(e: AuditEventInput): void {
    const now = Date.now();
    const detail = e.detail ? JSON.stringify(redactDeep(e.detail)) : null;
    this.queue.push([
      new Date(now).toISOString(), now, e.actor_type, e.actor_id, e.actor_name ?? null, e.action, e.resource_type,
      e.resource_id === null || e.resource_id === undefined ? null : String(e.resource_id), e.deployment ?? null, e.success ? 1 : 0, e.status ?? null, e.client_ip ?? null, detail,
    ]);
    if (this.queue.length >= FLUSH_BATCH) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.delayMs).unref();
  }

  flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.queue.length === 0) return;
    const rows = this.queue;
    this.queue = [];
    const t0 = performance.now();
    this.insertMany(rows);
    // The next batch waits twice as long as this one took to write: at most a third of the time goes to flushes.
    this.delayMs = Math.min(MAX_DELAY_MS, Math.max(FLUSH_DELAY_MS, 2 * (performance.now() - t0)));
  }
}
