/**
 * The `jobs` service: long work of every plugin (a deploy, a redeploy, a rollback, an image pull, a backup, a
 * restore) as jobs of one model. A job has progress and output while it runs, a timeout, a cancel that really stops
 * it, a live stream, and a state that survives the agent: a job the agent was running when it stopped (a restart, a
 * crash) is `interrupted`, never left `running`.
 */
import { createServiceRef, Nullable, Type, type Principal, type Static } from '@agent/sdk';

export const JOB_STATUSES = ['pending', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export const JobProgress = Type.Object({
  step: Type.String({ description: 'what the job does now' }),
  percent: Nullable(Type.Number({ minimum: 0, maximum: 100 })),
  current: Nullable(Type.Integer({ description: 'units done (bytes, items…)' })),
  total: Nullable(Type.Integer({ description: 'units in all, when known' })),
  eta_seconds: Nullable(Type.Integer({ description: 'estimated seconds left, from the pace so far' })),
});
export type JobProgress = Static<typeof JobProgress>;

export const JobView = Type.Object({
  id: Type.String(),
  kind: Type.String({ description: 'e.g. deployment.redeploy, image.pull, backup.create' }),
  title: Type.String(),
  deployment: Nullable(Type.String()),
  status: Type.Union(JOB_STATUSES.map((s) => Type.Literal(s))),
  progress: JobProgress,
  error: Nullable(Type.String()),
  error_code: Nullable(Type.String()),
  result: Type.Unknown(),
  created_by: Nullable(Type.String()),
  cancelled_by: Nullable(Type.String()),
  timeout_seconds: Type.Integer(),
  created_at: Type.String(),
  started_at: Nullable(Type.String()),
  finished_at: Nullable(Type.String()),
  duration_ms: Nullable(Type.Integer()),
});
export type JobView = Static<typeof JobView>;

export interface JobLine {
  seq: number;
  time: string;
  stream: 'stdout' | 'stderr' | 'info';
  text: string;
}

/** What a running job is given. */
export interface JobContext {
  readonly id: string;
  /** Aborted on cancel or timeout (`reason` is an HttpError: 409 JOB_CANCELLED or 504 JOB_TIMEOUT). */
  readonly signal: AbortSignal;
  /** Updates the progress; `percent` and the ETA are computed from `current`/`total` when not given. */
  progress(update: Partial<Pick<JobProgress, 'step' | 'percent' | 'current' | 'total'>>): void;
  /** One line of output (bounded per job; the newest are kept). */
  output(text: string, stream?: JobLine['stream']): void;
  /**
   * Runs a program as an argv array, its output as the job's; it is killed (TERM, then KILL after 3 s) when the job
   * is cancelled or times out, so a cancel stops it within 5 s. Resolves with the exit code.
   */
  exec(argv: string[], options?: { cwd?: string; env?: Record<string, string> }): Promise<number>;
  /**
   * What the record's `result` says however the job ends, from now on: what a cancelled or failed deploy left, the
   * image a failed pull was for. Written to the record at once (a job the agent was running when it died keeps the
   * last report), and also after a cancel recorded the job as ended before its work stopped (the grace ran out): the
   * work's own account of what it left still reaches the record. A job that succeeds shows what `run` returned (its
   * `view`) unless that is undefined.
   */
  report(result: unknown): void;
}

export interface JobSpec<T> {
  kind: string;
  title: string;
  /** The deployment it is about (tenancy: who may read and cancel it), null for global work. */
  deployment: string | null;
  principal: Principal | null;
  /** A job refuses to start (409 JOB_IN_PROGRESS) while another pending or running job holds the same lane. */
  lane?: string;
  /** Seconds; default: the `jobs.timeout` setting. */
  timeoutSeconds?: number;
  run(job: JobContext): Promise<T>;
  /** Turns the result into what the job record shows (`result`); the result itself by default. */
  view?(result: T): unknown;
}

export interface Job<T = unknown> {
  readonly id: string;
  /** Settles with the result once the job ended (rejects when it failed, was cancelled or timed out). */
  readonly done: Promise<T>;
  view(): JobView;
}

export interface JobsService {
  /** Starts a job at once (the answer to a request is 202 with its id) and returns it. */
  start<T>(spec: JobSpec<T>): Job<T>;
  get(id: string): JobView | null;
  /** The output kept for a job, from line `after` on. */
  lines(id: string, after?: number): JobLine[];
  /** Asks a job to stop; resolves once it ended (at most a few seconds). */
  cancel(id: string, by: Principal | null): Promise<JobView>;
  /** Jobs, newest first (`deployments`: only the jobs of these; `[]` finds none). */
  list(filter: { deployment?: string; deployments?: string[]; kind?: string; status?: string; limit: number; offset: number }): {
    items: JobView[];
    total: number;
  };
}

export const jobsService = createServiceRef<JobsService>('jobs', 'long work as jobs: progress, output, timeout, cancel, live stream');

declare module '@agent/sdk' {
  interface AgentEvents {
    /** A job ended (succeeded, failed, cancelled); notifications pick failures up. */
    'job.finished': { id: string; kind: string; deployment: string | null; status: JobStatus; error: string | null };
  }
}
