/**
 * Background jobs of the plugin (backups, restores, replications): recorded in the plugin's journal so their
 * status survives restarts, run one at a time per lane, with progress visible while they run.
 */
import { randomBytes } from 'node:crypto';
import { Type, type Logger, type SqlDatabase, type Static } from '@agent/sdk';

export const JobView = Type.Object({
  id: Type.String(),
  type: Type.Union([Type.Literal('backup'), Type.Literal('restore'), Type.Literal('replicate')]),
  status: Type.Union([Type.Literal('pending'), Type.Literal('running'), Type.Literal('completed'), Type.Literal('failed')]),
  deployment: Type.Union([Type.String(), Type.Null()]),
  backup_id: Type.Union([Type.String(), Type.Null()]),
  trigger: Type.String({ description: 'manual, scheduled or task' }),
  progress: Type.Object({
    step: Type.String(),
    bytes: Type.Integer({ description: 'bytes processed so far (uncompressed for backups)' }),
    total_bytes: Type.Union([Type.Integer(), Type.Null()]),
  }),
  error: Type.Union([Type.String(), Type.Null()]),
  result: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
  created_by: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String(),
  started_at: Type.Union([Type.String(), Type.Null()]),
  finished_at: Type.Union([Type.String(), Type.Null()]),
  duration_ms: Type.Union([Type.Integer(), Type.Null()]),
});
export type JobView = Static<typeof JobView>;
export type JobType = JobView['type'];

interface Row {
  id: string;
  type: JobType;
  status: JobView['status'];
  deployment: string | null;
  backup_id: string | null;
  trigger: string;
  step: string;
  bytes: number;
  total_bytes: number | null;
  error: string | null;
  result: string | null;
  created_by: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  status TEXT NOT NULL,
  deployment TEXT,
  backup_id TEXT,
  trigger TEXT NOT NULL,
  step TEXT NOT NULL DEFAULT '',
  bytes INTEGER NOT NULL DEFAULT 0,
  total_bytes INTEGER,
  error TEXT,
  result TEXT,
  created_by TEXT,
  created_at TEXT NOT NULL,
  started_at TEXT,
  finished_at TEXT,
  duration_ms INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_at);
`;

export interface JobContext {
  id: string;
  signal: AbortSignal;
  progress(update: { step?: string; bytes?: number; total_bytes?: number | null }): void;
}

export interface JobSpec {
  type: JobType;
  deployment: string | null;
  backup_id?: string | null;
  trigger: string;
  created_by: string | null;
  /** Returns the job's result (stored as JSON); throwing fails the job with the error's message. */
  run(ctx: JobContext): Promise<Record<string, unknown> | void>;
}

export const newId = (prefix: string): string =>
  `${prefix}_${new Date()
    .toISOString()
    .replace(/[-:TZ.]/g, '')
    .slice(0, 14)}_${randomBytes(4).toString('hex')}`;

const view = (r: Row): JobView => ({
  id: r.id,
  type: r.type,
  status: r.status,
  deployment: r.deployment,
  backup_id: r.backup_id,
  trigger: r.trigger,
  progress: { step: r.step, bytes: r.bytes, total_bytes: r.total_bytes },
  error: r.error,
  result: r.result ? (JSON.parse(r.result) as Record<string, unknown>) : null,
  created_by: r.created_by,
  created_at: r.created_at,
  started_at: r.started_at,
  finished_at: r.finished_at,
  duration_ms: r.duration_ms,
});

export class Jobs {
  private readonly lanes = new Map<string, Promise<unknown>>();
  private readonly live = new Map<string, Row>();
  private readonly shutdown = new AbortController();
  private readonly finished = new Set<(job: JobView) => void>();

  constructor(
    private readonly db: SqlDatabase,
    private readonly log: Logger,
  ) {
    db.exec(SCHEMA);
    // Jobs cut short by a stop or a crash are failed, never left running.
    db.prepare(
      `UPDATE jobs SET status = 'failed', error = 'interrupted: the agent stopped while the job ran', finished_at = ? WHERE status IN ('pending', 'running')`,
    ).run(new Date().toISOString());
  }

  get(id: string): JobView | undefined {
    const live = this.live.get(id);
    if (live) return view(live);
    const row = this.db.prepare('SELECT * FROM jobs WHERE id = ?').get(id) as Row | undefined;
    return row ? view(row) : undefined;
  }

  /**
   * A page of jobs, newest first. `deployments`: only jobs of these deployments (a principal limited to its
   * deployments; jobs of no deployment are left out); omitted: every job.
   */
  list(filter: { deployment?: string; deployments?: string[]; type?: JobType; limit: number; offset: number }): { items: JobView[]; total: number } {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.deployment) {
      where.push('deployment = ?');
      args.push(filter.deployment);
    }
    if (filter.deployments) {
      where.push(filter.deployments.length ? `deployment IN (${filter.deployments.map(() => '?').join(', ')})` : '0');
      args.push(...filter.deployments);
    }
    if (filter.type) {
      where.push('type = ?');
      args.push(filter.type);
    }
    const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM jobs ${clause}`).get(...args) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT * FROM jobs ${clause} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?`)
      .all(...args, filter.limit, filter.offset) as Row[];
    return { items: rows.map((r) => (this.live.has(r.id) ? view(this.live.get(r.id)!) : view(r))), total };
  }

  /**
   * A deleted deployment's jobs stay, under its retired name: a new deployment of the same name does not see them.
   * Jobs still running keep running; they are recorded under the retired name too.
   */
  retire(deployment: string, retiredAs: string): number {
    for (const row of this.live.values()) if (row.deployment === deployment) row.deployment = retiredAs;
    return Number(this.db.prepare('UPDATE jobs SET deployment = ? WHERE deployment = ?').run(retiredAs, deployment).changes);
  }

  /** Whether a job of the deployment is pending or running. */
  busy(deployment: string): JobView | undefined {
    for (const row of this.live.values()) if (row.deployment === deployment) return view(row);
    return undefined;
  }

  onFinished(listener: (job: JobView) => void): () => void {
    this.finished.add(listener);
    return () => this.finished.delete(listener);
  }

  /** Records a pending job and runs it when its lane is free; resolves with the job (pending). */
  submit(spec: JobSpec, lane = 'default'): JobView {
    const id = newId('job');
    const row: Row = {
      id,
      type: spec.type,
      status: 'pending',
      deployment: spec.deployment,
      backup_id: spec.backup_id ?? null,
      trigger: spec.trigger,
      step: 'queued',
      bytes: 0,
      total_bytes: null,
      error: null,
      result: null,
      created_by: spec.created_by,
      created_at: new Date().toISOString(),
      started_at: null,
      finished_at: null,
      duration_ms: null,
    };
    this.db
      .prepare(`INSERT INTO jobs (id, type, status, deployment, backup_id, trigger, step, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(id, row.type, row.status, row.deployment, row.backup_id, row.trigger, row.step, row.created_by, row.created_at);
    this.live.set(id, row);
    const previous = this.lanes.get(lane) ?? Promise.resolve();
    const done = previous.then(() => this.execute(row, spec));
    this.lanes.set(
      lane,
      done.catch(() => undefined),
    );
    return view(row);
  }

  /** Resolves with the job once it has finished. */
  async wait(id: string, signal?: AbortSignal): Promise<JobView> {
    for (;;) {
      const job = this.get(id);
      if (!job) throw new Error(`job ${id} not found`);
      if (job.status === 'completed' || job.status === 'failed') return job;
      await new Promise<void>((resolve) => {
        const off = this.onFinished((j) => {
          if (j.id === id) {
            off();
            resolve();
          }
        });
        signal?.addEventListener(
          'abort',
          () => {
            off();
            resolve();
          },
          { once: true },
        );
      });
      signal?.throwIfAborted();
    }
  }

  private save(row: Row): void {
    this.db
      .prepare(
        `UPDATE jobs SET status = ?, step = ?, bytes = ?, total_bytes = ?, error = ?, result = ?, started_at = ?, finished_at = ?, duration_ms = ?, backup_id = ? WHERE id = ?`,
      )
      .run(row.status, row.step, row.bytes, row.total_bytes, row.error, row.result, row.started_at, row.finished_at, row.duration_ms, row.backup_id, row.id);
  }

  private async execute(row: Row, spec: JobSpec): Promise<void> {
    row.status = 'running';
    row.step = 'starting';
    const started = Date.now();
    row.started_at = new Date(started).toISOString();
    this.save(row);
    let lastSave = 0;
    try {
      const result = await spec.run({
        id: row.id,
        signal: this.shutdown.signal,
        progress: (u) => {
          if (u.step !== undefined) row.step = u.step;
          if (u.bytes !== undefined) row.bytes = u.bytes;
          if (u.total_bytes !== undefined) row.total_bytes = u.total_bytes;
          if (Date.now() - lastSave > 1000) {
            lastSave = Date.now();
            this.save(row);
          }
        },
      });
      row.status = 'completed';
      row.step = 'done';
      row.result = result ? JSON.stringify(result) : null;
      if (result && typeof result.backup_id === 'string') row.backup_id = result.backup_id;
    } catch (err) {
      row.status = 'failed';
      row.error = (err as Error)?.message ?? String(err);
      this.log.warn('job failed', { job: row.id, type: row.type, deployment: row.deployment, error: row.error });
    }
    row.finished_at = new Date().toISOString();
    row.duration_ms = Date.now() - started;
    this.save(row);
    this.live.delete(row.id);
    const final = view(row);
    for (const l of this.finished) {
      try {
        l(final);
      } catch {
        /* listeners must not break the queue */
      }
    }
  }

  /** Aborts running jobs (agent stop); waits for them to settle. */
  async close(): Promise<void> {
    this.shutdown.abort();
    await Promise.allSettled([...this.lanes.values()]);
  }
}
