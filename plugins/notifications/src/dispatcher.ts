/**
 * Routes messages to targets and delivers them: one queue per target (a slow or failing target never holds up
 * another), a few attempts with exponential backoff, and a bounded delivery log in the plugin's journal.
 */
import pRetry from 'p-retry';
import type { Logger, SqlDatabase } from '@agent/sdk';
import type { NotificationMessage } from './api.js';
import { deliver, DeliveryError, type Endpoints, type Outgoing } from './senders.js';
import { maskTargetUrl, parseTargetUrl } from './targets.js';

export interface Target {
  id: string;
  name: string;
  url: string;
  enabled: boolean;
  events: string[];
  severities: string[];
  deployments: string[];
}

export interface DeliveryRecord {
  id: number;
  time: string;
  target_id: string | null;
  target_name: string;
  event: string;
  severity: string;
  title: string;
  deployment: string | null;
  status: 'delivered' | 'failed' | 'dropped';
  attempts: number;
  error: string | null;
  duration_ms: number;
}

export interface DispatcherOptions {
  retries: number;
  backoffMs: number;
  logMax: number;
  queueMax: number;
  endpoints: Endpoints;
  agentName: string;
}

interface Queue {
  pending: Outgoing[];
  running: boolean;
}

export class Dispatcher {
  private readonly queues = new Map<string, Queue>();
  private readonly stopping = new AbortController();
  private readonly insert;
  private readonly trim;
  private inserted = 0;

  constructor(
    private readonly db: SqlDatabase,
    private readonly targets: () => Target[],
    private readonly options: DispatcherOptions,
    private readonly log: Logger,
  ) {
    db.exec(`CREATE TABLE IF NOT EXISTS deliveries (
      id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, target_id TEXT, target_name TEXT NOT NULL,
      event TEXT NOT NULL, severity TEXT NOT NULL, title TEXT NOT NULL, deployment TEXT, status TEXT NOT NULL,
      attempts INTEGER NOT NULL, error TEXT, duration_ms INTEGER NOT NULL)`);
    this.insert = db.prepare(`INSERT INTO deliveries (time, target_id, target_name, event, severity, title, deployment, status, attempts, error, duration_ms)
      VALUES (@time, @target_id, @target_name, @event, @severity, @title, @deployment, @status, @attempts, @error, @duration_ms)`);
    this.trim = db.prepare('DELETE FROM deliveries WHERE id <= (SELECT MAX(id) FROM deliveries) - ?');
  }

  /** The targets a message goes to: named ones when given, else every enabled target whose filters match. */
  route(m: NotificationMessage): Target[] {
    const enabled = this.targets().filter((t) => t.enabled);
    if (m.targets && m.targets.length > 0) {
      const wanted = new Set(m.targets);
      return enabled.filter((t) => wanted.has(t.id) || wanted.has(t.name));
    }
    return enabled.filter(
      (t) =>
        (t.events.length === 0 || t.events.includes(m.event)) &&
        (t.severities.length === 0 || t.severities.includes(m.severity)) &&
        (t.deployments.length === 0 || (!!m.deployment && t.deployments.includes(m.deployment))),
    );
  }

  send(m: NotificationMessage): string[] {
    const outgoing: Outgoing = { ...m, deployment: m.deployment ?? null, time: new Date().toISOString(), agent: this.options.agentName };
    const targets = this.route(m);
    for (const t of targets) this.enqueue(t.id, outgoing);
    return targets.map((t) => t.id);
  }

  /** One attempt, now, outside the queues (the test endpoint). Throws DeliveryError. */
  async sendOnce(url: string, m: Outgoing): Promise<void> {
    await deliver(parseTargetUrl(url), m, this.options.endpoints);
  }

  private enqueue(targetId: string, m: Outgoing): void {
    let q = this.queues.get(targetId);
    if (!q) this.queues.set(targetId, (q = { pending: [], running: false }));
    if (q.pending.length >= this.options.queueMax) {
      const dropped = q.pending.shift()!;
      const t = this.targets().find((x) => x.id === targetId);
      this.record(t ?? null, targetId, dropped, 'dropped', 0, 'queue full', 0);
    }
    q.pending.push(m);
    if (!q.running) void this.drain(targetId, q);
  }

  private async drain(targetId: string, q: Queue): Promise<void> {
    q.running = true;
    try {
      while (q.pending.length > 0 && !this.stopping.signal.aborted) {
        const m = q.pending.shift()!;
        // Read the target at delivery time: it may have been edited or removed while queued.
        const target = this.targets().find((t) => t.id === targetId);
        if (!target || !target.enabled) continue;
        await this.attempt(target, m);
      }
    } finally {
      q.running = false;
    }
  }

  /**
   * Delivers with p-retry: `retries` more attempts after a failed one, `backoffMs` before the first retry and twice
   * as long before each next one, none after a failure retrying cannot mend (4xx but 408/429); the agent's stop
   * cuts the wait short. Each failure is logged and the outcome recorded once, with its attempts.
   */
  private async attempt(target: Target, m: Outgoing): Promise<void> {
    const started = Date.now();
    let attempts = 0;
    let lastError = '';
    let delivered = false;
    await pRetry(
      async (attempt) => {
        attempts = attempt;
        try {
          await deliver(parseTargetUrl(target.url), m, this.options.endpoints);
          delivered = true;
        } catch (err) {
          lastError = err instanceof DeliveryError ? err.message : `unexpected error (${(err as Error).name})`;
          this.log.warn('notification delivery failed', { target: target.name, url: maskTargetUrl(target.url), attempt, error: lastError });
          // p-retry never retries a TypeError (a bug of the caller, it assumes): any failure here is retried alike.
          throw err instanceof DeliveryError ? err : new DeliveryError(lastError);
        }
      },
      {
        retries: this.options.retries,
        minTimeout: this.options.backoffMs,
        factor: 2,
        randomize: false,
        signal: this.stopping.signal,
        shouldRetry: ({ error }) => !(error instanceof DeliveryError) || error.retryable,
      },
    ).catch(() => undefined);
    // A delivery that succeeded while the agent was stopping is still delivered (p-retry rejects it for the stop).
    this.record(target, target.id, m, delivered ? 'delivered' : 'failed', attempts, delivered ? null : lastError, Date.now() - started);
  }

  private record(
    target: Target | null,
    targetId: string,
    m: Outgoing,
    status: DeliveryRecord['status'],
    attempts: number,
    error: string | null,
    duration: number,
  ): void {
    this.insert.run({
      time: new Date().toISOString(),
      target_id: targetId,
      target_name: target?.name ?? targetId,
      event: m.event,
      severity: m.severity,
      title: m.title.slice(0, 500),
      deployment: m.deployment ?? null,
      status,
      attempts,
      error,
      duration_ms: duration,
    });
    if (++this.inserted % 50 === 0) this.trim.run(this.options.logMax);
  }

  deliveries(filter: { target?: string; status?: string; limit: number; offset: number }): { items: DeliveryRecord[]; total: number } {
    this.trim.run(this.options.logMax);
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.target) {
      where.push('(target_id = ? OR target_name = ?)');
      args.push(filter.target, filter.target);
    }
    if (filter.status) {
      where.push('status = ?');
      args.push(filter.status);
    }
    const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM deliveries ${clause}`).get(...args) as { n: number }).n;
    const items = this.db
      .prepare(`SELECT * FROM deliveries ${clause} ORDER BY id DESC LIMIT ? OFFSET ?`)
      .all(...args, filter.limit, filter.offset) as DeliveryRecord[];
    return { items, total };
  }

  /** Resolves once every queue is empty (tests, shutdown). */
  async idle(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ([...this.queues.values()].some((q) => q.running || q.pending.length > 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  stop(): void {
    this.stopping.abort();
  }
}
