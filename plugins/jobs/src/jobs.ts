/**
 * Jobs: their records in the plugin's journal (a job survives the agent as a record; one the agent was running when
 * it stopped is marked `interrupted` at the next start), their output (the newest lines per job), their live
 * listeners, lanes (one job at a time per lane), timeouts and cancels. Progress is written at most a few times a
 * second; listeners get every update at once.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { execa } from 'execa';
import { errors, HttpError, isHttpError, type EventBus, type Logger, type Principal, type SqlDatabase } from '@agent/sdk';
import type { Job, JobContext, JobLine, JobProgress, JobSpec, JobStatus, JobsService, JobView } from './api.js';

/** Output lines kept per job (the newest), and jobs kept in all (the newest; older ones are dropped hourly). */
export const KEEP_LINES = 2000;
export const KEEP_JOBS = 2000;
/** A cancelled job whose work does not end by then is recorded as cancelled anyway (and its process killed). */
const CANCEL_GRACE_MS = 5000;
const PROGRESS_WRITE_MS = 250;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  title TEXT NOT NULL,
  deployment TEXT,
  status TEXT NOT NULL,
  progress TEXT NOT NULL,
  error TEXT,
  error_code TEXT,
  result TEXT,
  created_by TEXT,
  cancelled_by TEXT,
  timeout_seconds INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  started_at TEXT,
  finished_at TEXT,
  duration_ms INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_deployment ON jobs(deployment, created_at);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_at);
CREATE TABLE IF NOT EXISTS job_processes (
  job_id TEXT NOT NULL,
  pid INTEGER NOT NULL,
  start_ticks TEXT NOT NULL,
  PRIMARY KEY (job_id, pid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_lines (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  time TEXT NOT NULL,
  stream TEXT NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
`;

interface Row {
  id: string;
  kind: string;
  title: string;
  deployment: string | null;
  status: JobStatus;
  progress: string;
  error: string | null;
  error_code: string | null;
  result: string | null;
  created_by: string | null;
  cancelled_by: string | null;
  timeout_seconds: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
}

export type JobEvent = { type: 'line'; line: JobLine } | { type: 'progress'; progress: JobProgress } | { type: 'end'; job: JobView };

/** A job the agent runs now. */
interface Running {
  view: JobView;
  lane: string | null;
  controller: AbortController;
  listeners: Set<(e: JobEvent) => void>;
  seq: number;
  settled: Promise<unknown>;
  lastWrite: number;
  pendingWrite: NodeJS.Timeout | null;
  startedMs: number;
  /** What the job last reported (`job.report`): its record's result unless it succeeds with a result of its own. */
  reported: unknown;
}

const toView = (r: Row): JobView => ({
  ...r,
  progress: JSON.parse(r.progress) as JobProgress,
  result: r.result === null ? null : (JSON.parse(r.result) as unknown),
});

/** A process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat): tells a pid from its reuse. */
function startTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Signals a process group (the job's process and what it started); gone already is fine. */
function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    /* already gone */
  }
}

const emptyProgress = (): JobProgress => ({ step: 'pending', percent: null, current: null, total: null, eta_seconds: null });

export class Jobs implements JobsService {
  private readonly running = new Map<string, Running>();

  constructor(
    private readonly db: SqlDatabase,
    private readonly opts: { log: Logger; events: EventBus; timeoutSeconds: () => number },
  ) {
    db.exec(SCHEMA);
    // What the agent was running when it stopped did not finish, whatever it was: the records say so, and the
    // processes its jobs started (which outlive a killed agent) are ended.
    for (const p of db.prepare(`SELECT pid, start_ticks FROM job_processes`).all() as { pid: number; start_ticks: string }[]) {
      if (startTicks(p.pid) === p.start_ticks) {
        killGroup(p.pid, 'SIGKILL');
        opts.log.warn('process of an interrupted job ended', { pid: p.pid });
      }
    }
    db.exec('DELETE FROM job_processes');
    const now = new Date().toISOString();
    const stale = db.prepare(
      `UPDATE jobs SET status = 'interrupted', finished_at = ?, error = ?, error_code = 'INTERRUPTED' WHERE status IN ('pending', 'running')`,
    );
    const changed = stale.run(now, 'the agent stopped while the job ran').changes;
    if (changed) opts.log.warn('jobs interrupted by the agent stopping', { count: changed });
  }

  start<T>(spec: JobSpec<T>): Job<T> {
    if (spec.lane && [...this.running.values()].some((r) => r.lane === spec.lane)) {
      const busy = [...this.running.values()].find((r) => r.lane === spec.lane)!;
      throw errors.conflict(
        `another job (${busy.view.kind} ${busy.view.id}) is running for ${spec.deployment ?? spec.lane}; wait for it or cancel it`,
        'JOB_IN_PROGRESS',
        {
          job_id: busy.view.id,
        },
      );
    }
    const id = `job_${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
    const timeout = spec.timeoutSeconds ?? this.opts.timeoutSeconds();
    const view: JobView = {
      id,
      kind: spec.kind,
      title: spec.title,
      deployment: spec.deployment,
      status: 'pending',
      progress: emptyProgress(),
      error: null,
      error_code: null,
      result: null,
      created_by: spec.principal?.id ?? null,
      cancelled_by: null,
      timeout_seconds: timeout,
      created_at: new Date().toISOString(),
      started_at: null,
      finished_at: null,
      duration_ms: null,
    };
    this.db
      .prepare(
        `INSERT INTO jobs (id, kind, title, deployment, status, progress, created_by, timeout_seconds, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)`,
      )
      .run(id, view.kind, view.title, view.deployment, JSON.stringify(view.progress), view.created_by, timeout, view.created_at);
    const controller = new AbortController();
    const entry: Running = {
      view,
      lane: spec.lane ?? null,
      controller,
      listeners: new Set(),
      seq: 0,
      settled: Promise.resolve(),
      lastWrite: 0,
      pendingWrite: null,
      startedMs: Date.now(),
      reported: undefined,
    };
    this.running.set(id, entry);
    const timer = setTimeout(
      () => controller.abort(new HttpError(504, 'JOB_TIMEOUT', `the job took longer than its ${timeout} s timeout and was stopped`)),
      timeout * 1000,
    );
    timer.unref();
    const done = (async () => {
      // Started on the next turn: the caller answers with the job first.
      await new Promise((resolve) => setImmediate(resolve));
      entry.view.status = 'running';
      entry.view.started_at = new Date().toISOString();
      entry.view.progress = { ...entry.view.progress, step: 'running' };
      this.db
        .prepare(`UPDATE jobs SET status = 'running', started_at = ?, progress = ? WHERE id = ?`)
        .run(entry.view.started_at, JSON.stringify(entry.view.progress), id);
      return spec.run(this.context(entry));
    })();
    entry.settled = done.then(
      (result) => this.finish(entry, 'succeeded', null, spec.view ? spec.view(result) : result),
      (err: unknown) => {
        const reason = controller.signal.aborted ? (controller.signal.reason as HttpError) : null;
        const status: JobStatus = reason?.code === 'JOB_CANCELLED' ? 'cancelled' : reason?.code === 'INTERRUPTED' ? 'interrupted' : 'failed';
        this.finish(entry, status, reason ?? err, null);
      },
    );
    void entry.settled.finally(() => clearTimeout(timer));
    return { id, done, view: () => ({ ...entry.view }) };
  }

  private context(entry: Running): JobContext {
    const { view, controller } = entry;
    return {
      id: view.id,
      signal: controller.signal,
      progress: (update) => {
        const next = { ...view.progress, ...update };
        if (update.percent === undefined && next.current !== null && next.total)
          next.percent = Math.min(100, Math.round((next.current / next.total) * 1000) / 10);
        const elapsed = (Date.now() - entry.startedMs) / 1000;
        next.eta_seconds = next.percent && next.percent > 0 && next.percent < 100 ? Math.round((elapsed * (100 - next.percent)) / next.percent) : null;
        view.progress = next;
        this.emit(entry, { type: 'progress', progress: next });
        this.writeProgress(entry);
      },
      output: (text, stream = 'stdout') => this.line(entry, text, stream),
      report: (result) => {
        entry.reported = result;
        // Written at once, to the record whether or not the job still runs: a report that comes after a cancel
        // outlived its grace is the work's own account of what it left, and belongs to the final record.
        const json = result === undefined ? null : JSON.stringify(result);
        if (this.running.has(view.id)) view.result = result ?? null;
        this.db.prepare('UPDATE jobs SET result = ? WHERE id = ?').run(json, view.id);
      },
      exec: async (argv, options = {}) => {
        // Its own process group, so that a cancel ends what it started too; recorded, so that an agent started
        // after a crash ends it.
        const child = execa(argv[0]!, argv.slice(1), {
          cwd: options.cwd,
          env: options.env,
          extendEnv: !options.env,
          reject: false,
          all: true,
          buffer: false,
          stdin: 'ignore',
          detached: true,
        });
        const pid = child.pid;
        let force: NodeJS.Timeout | null = null;
        const stop = () => {
          if (pid === undefined) return;
          killGroup(pid, 'SIGTERM');
          force = setTimeout(() => killGroup(pid, 'SIGKILL'), 3000);
          force.unref();
        };
        if (pid !== undefined)
          this.db.prepare('INSERT OR REPLACE INTO job_processes (job_id, pid, start_ticks) VALUES (?, ?, ?)').run(view.id, pid, startTicks(pid) ?? '');
        if (controller.signal.aborted) stop();
        else controller.signal.addEventListener('abort', stop, { once: true });
        let partial = '';
        child.all!.setEncoding('utf8');
        child.all!.on('data', (chunk: string) => {
          const lines = (partial + chunk).split(/\r?\n/);
          partial = lines.pop()!;
          for (const l of lines) this.line(entry, l, 'stdout');
        });
        const result = await child;
        controller.signal.removeEventListener('abort', stop);
        if (force) clearTimeout(force);
        if (pid !== undefined) this.db.prepare('DELETE FROM job_processes WHERE job_id = ? AND pid = ?').run(view.id, pid);
        if (partial) this.line(entry, partial, 'stdout');
        if (controller.signal.aborted) throw controller.signal.reason;
        return result.exitCode ?? 1;
      },
    };
  }

  private line(entry: Running, text: string, stream: JobLine['stream']): void {
    const line: JobLine = { seq: ++entry.seq, time: new Date().toISOString(), stream, text: text.length > 8192 ? `${text.slice(0, 8192)}…` : text };
    this.db
      .prepare('INSERT INTO job_lines (job_id, seq, time, stream, text) VALUES (?, ?, ?, ?, ?)')
      .run(entry.view.id, line.seq, line.time, stream, line.text);
    if (line.seq > KEEP_LINES && line.seq % 100 === 0)
      this.db.prepare('DELETE FROM job_lines WHERE job_id = ? AND seq <= ?').run(entry.view.id, line.seq - KEEP_LINES);
    this.emit(entry, { type: 'line', line });
  }

  /** Progress reaches the journal at most every 250 ms (listeners get every update). */
  private writeProgress(entry: Running): void {
    const write = () => {
      entry.pendingWrite = null;
      entry.lastWrite = Date.now();
      this.db.prepare('UPDATE jobs SET progress = ? WHERE id = ?').run(JSON.stringify(entry.view.progress), entry.view.id);
    };
    if (Date.now() - entry.lastWrite >= PROGRESS_WRITE_MS) write();
    else entry.pendingWrite ??= setTimeout(write, PROGRESS_WRITE_MS).unref();
  }

  private finish(entry: Running, status: JobStatus, err: unknown, result: unknown): void {
    if (!this.running.has(entry.view.id)) return;
    if (entry.pendingWrite) clearTimeout(entry.pendingWrite);
    const { view } = entry;
    view.status = status;
    view.finished_at = new Date().toISOString();
    view.duration_ms = Date.now() - entry.startedMs;
    if (status === 'succeeded') {
      view.progress = { ...view.progress, step: 'done', percent: 100, eta_seconds: null };
      view.result = result ?? entry.reported ?? null;
    } else {
      view.result = entry.reported ?? null;
      view.error = err instanceof Error ? err.message : String(err);
      view.error_code = isHttpError(err) ? err.code : status === 'cancelled' ? 'JOB_CANCELLED' : 'JOB_FAILED';
      if (!isHttpError(err)) this.opts.log.warn('job failed', { job: view.id, kind: view.kind, error: view.error });
    }
    this.db
      .prepare(
        `UPDATE jobs SET status = ?, progress = ?, error = ?, error_code = ?, result = ?, cancelled_by = ?, finished_at = ?, duration_ms = ? WHERE id = ?`,
      )
      .run(
        status,
        JSON.stringify(view.progress),
        view.error,
        view.error_code,
        view.result === null ? null : JSON.stringify(view.result),
        view.cancelled_by,
        view.finished_at,
        view.duration_ms,
        view.id,
      );
    this.running.delete(view.id);
    this.emit(entry, { type: 'end', job: { ...view } });
    entry.listeners.clear();
    this.opts.events.emit('job.finished', { id: view.id, kind: view.kind, deployment: view.deployment, status, error: view.error });
  }

  private emit(entry: Running, event: JobEvent): void {
    for (const listener of entry.listeners) listener(event);
  }

  get(id: string): JobView | null {
    const live = this.running.get(id);
    if (live) return { ...live.view };
    const row = this.db.prepare('SELECT * FROM jobs WHERE id = ?').get(id) as Row | undefined;
    return row ? toView(row) : null;
  }

  list(filter: { deployments?: string[]; deployment?: string; kind?: string; status?: string; limit: number; offset: number }): {
    items: JobView[];
    total: number;
  } {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.deployment !== undefined) {
      where.push('deployment = ?');
      params.push(filter.deployment);
    }
    if (filter.deployments) {
      // A principal limited to some deployments: only their jobs, never global ones.
      if (!filter.deployments.length) return { items: [], total: 0 };
      where.push(`deployment IN (${filter.deployments.map(() => '?').join(', ')})`);
      params.push(...filter.deployments);
    }
    if (filter.kind) {
      where.push('kind = ?');
      params.push(filter.kind);
    }
    if (filter.status) {
      where.push('status = ?');
      params.push(filter.status);
    }
    const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM jobs ${clause}`).get(...params) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT * FROM jobs ${clause} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`)
      .all(...params, filter.limit, filter.offset) as Row[];
    return { items: rows.map((r) => this.running.get(r.id)?.view ?? toView(r)).map((v) => ({ ...v })), total };
  }

  lines(id: string, after = 0): JobLine[] {
    return this.db.prepare('SELECT seq, time, stream, text FROM job_lines WHERE job_id = ? AND seq > ? ORDER BY seq').all(id, after) as JobLine[];
  }

  /** Subscribes to a running job's events; null when it is not running (its record is final). */
  subscribe(id: string, listener: (e: JobEvent) => void): (() => void) | null {
    const entry = this.running.get(id);
    if (!entry) return null;
    entry.listeners.add(listener);
    return () => entry.listeners.delete(listener);
  }

  async cancel(id: string, by: Principal | null): Promise<JobView> {
    const entry = this.running.get(id);
    if (!entry) {
      const view = this.get(id);
      if (!view) throw errors.notFound(`job '${id}' not found`);
      throw errors.conflict(`job '${id}' already ended (${view.status})`, 'JOB_ENDED');
    }
    entry.view.cancelled_by = by?.id ?? null;
    this.line(entry, `cancel asked${by ? ` by ${by.name}` : ''}`, 'info');
    entry.controller.abort(new HttpError(409, 'JOB_CANCELLED', `the job was cancelled${by ? ` by ${by.name}` : ''}`));
    // The work stops on its signal; one that does not within the grace time is recorded as cancelled anyway.
    await Promise.race([entry.settled, new Promise((resolve) => setTimeout(resolve, CANCEL_GRACE_MS).unref())]);
    if (this.running.has(id)) {
      this.opts.log.warn('a cancelled job did not stop in time; recorded as cancelled', { job: id, kind: entry.view.kind });
      this.finish(entry, 'cancelled', entry.controller.signal.reason, null);
    }
    return this.get(id)!;
  }

  /** Drops the oldest finished jobs beyond `KEEP_JOBS`, and their output. */
  prune(): number {
    const old = this.db.prepare(`SELECT id FROM jobs WHERE status NOT IN ('pending', 'running') ORDER BY created_at DESC LIMIT -1 OFFSET ?`).all(KEEP_JOBS) as {
      id: string;
    }[];
    for (const { id } of old) {
      this.db.prepare('DELETE FROM job_lines WHERE job_id = ?').run(id);
      this.db.prepare('DELETE FROM jobs WHERE id = ?').run(id);
    }
    return old.length;
  }

  /** At shutdown: running jobs are stopped and recorded as `interrupted` (as after a crash, but with their output). */
  async stopAll(): Promise<void> {
    const entries = [...this.running.values()];
    for (const entry of entries) entry.controller.abort(new HttpError(503, 'INTERRUPTED', 'the agent stopped while the job ran'));
    await Promise.race([Promise.all(entries.map((e) => e.settled)), new Promise((resolve) => setTimeout(resolve, CANCEL_GRACE_MS).unref())]);
    for (const entry of entries) if (this.running.has(entry.view.id)) this.finish(entry, 'interrupted', entry.controller.signal.reason, null);
  }
}
