/** Scheduled work. Every execution is recorded (status, duration, output, error). */

export interface JobRunContext {
  /** Aborted when the agent shuts down. */
  signal: AbortSignal;
  /** Lines appended to the execution's output (bounded). */
  output(line: string): void;
  /** `cron` for a scheduled run, `manual` for `runNow`. */
  trigger: 'cron' | 'manual';
}

export interface JobSpec {
  /** Unique within the plugin: `[a-z0-9][a-z0-9._-]*`. */
  name: string;
  /** Cron expression (5 or 6 fields). */
  cron: string;
  description?: string;
  run(ctx: JobRunContext): Promise<unknown> | unknown;
}

export interface JobExecution {
  id: number;
  plugin: string;
  job: string;
  trigger: 'cron' | 'manual';
  status: 'running' | 'succeeded' | 'failed';
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  output: string;
  error: string | null;
}

export interface JobHandle {
  readonly name: string;
  /** Next scheduled time, or null when cancelled. */
  nextRun(): Date | null;
  /** Runs now, outside the schedule; resolves with the recorded execution. */
  runNow(): Promise<JobExecution>;
  cancel(): void;
}

export interface Scheduler {
  /** Schedules a job; jobs of a plugin start with the plugin and stop with it. */
  job(spec: JobSpec): JobHandle;
  /** Why a cron expression is invalid, or null when it is valid. */
  validateCron(expression: string): string | null;
  /** Recorded executions of this plugin's jobs, newest first. */
  executions(filter?: { job?: string; limit?: number; offset?: number }): JobExecution[];
}
