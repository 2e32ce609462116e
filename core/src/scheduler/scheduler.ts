/**
 * Scheduled jobs (node-schedule) with recorded executions. A plugin's jobs fire only while it runs; a run that
 * is still going when the next one is due is skipped, never stacked.
 */
import { createRequire } from 'node:module';
import schedule from 'node-schedule';
import cronParser from 'cron-parser';
import { errors, type JobExecution, type JobSpec, type Logger, type Scheduler } from '@agent/sdk';
import type { Journal } from '../store/journal.js';

const OUTPUT_LIMIT = 64 * 1024;

// node-schedule's date library (luxon, via cron-parser) asks ICU for the system locale on its first date, which
// maps ~7 MB of ICU data into the process for good; schedules need no locale (the time zone is unaffected).
// luxon stays outside the bundle (scripts/lib.mjs) so that this is the copy cron-parser uses.
(createRequire(import.meta.url)('luxon') as { Settings: { defaultLocale: string } }).Settings.defaultLocale = 'en-US';
const JOB_NAME = /^[a-z0-9][a-z0-9._-]{0,127}$/;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS job_executions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  plugin TEXT NOT NULL,
  job TEXT NOT NULL,
  trigger TEXT NOT NULL,
  status TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  duration_ms INTEGER,
  output TEXT NOT NULL DEFAULT '',
  error TEXT
);
CREATE INDEX IF NOT EXISTS job_executions_job ON job_executions(plugin, job, id);
`;

function validateCron(expression: string): string | null {
  const fields = expression.trim().split(/\s+/);
  if (fields.length < 5 || fields.length > 6) return `expected 5 or 6 fields, got ${fields.length}`;
  try {
    cronParser.parseExpression(expression);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The scheduler a plugin sees; its jobs are armed by `startAll` and cancelled by `stopAll`. */
export type PluginScheduler = Scheduler & { startAll(): void; stopAll(): void; list(): { name: string; cron: string; next_run: string | null }[] };

interface Entry {
  spec: JobSpec;
  job: schedule.Job | null;
  running: boolean;
}

export class CoreScheduler {
  private readonly insert;
  private readonly finish;
  private readonly shutdown = new AbortController();
  /** Every plugin's scheduler, so that `stop` cancels this agent's jobs (and no other agent's in the process). */
  private readonly plugins = new Set<PluginScheduler>();

  constructor(
    private readonly db: Journal,
    private readonly log: Logger,
  ) {
    db.exec(SCHEMA);
    // Runs cut short by a crash are not left "running" forever.
    db.prepare(`UPDATE job_executions SET status = 'failed', error = 'interrupted by agent stop' WHERE status = 'running'`).run();
    this.insert = db.prepare(`INSERT INTO job_executions (plugin, job, trigger, status, started_at) VALUES (?, ?, ?, 'running', ?)`);
    this.finish = db.prepare(`UPDATE job_executions SET status = ?, finished_at = ?, duration_ms = ?, output = ?, error = ? WHERE id = ?`);
  }

  private async runEntry(plugin: string, entry: Entry, trigger: 'cron' | 'manual'): Promise<JobExecution> {
    const job = entry.spec.name;
    if (entry.running && trigger === 'cron') {
      this.log.warn('job still running; this run is skipped', { plugin, job });
      throw new Error('already running');
    }
    entry.running = true;
    const started = Date.now();
    const id = Number(this.insert.run(plugin, job, trigger, new Date(started).toISOString()).lastInsertRowid);
    let output = '';
    const append = (line: string) => {
      if (output.length < OUTPUT_LIMIT) output = (output + line + '\n').slice(0, OUTPUT_LIMIT);
    };
    let error: string | null = null;
    try {
      await entry.spec.run({ signal: this.shutdown.signal, trigger, output: append });
    } catch (err) {
      error = (err as Error)?.message ?? String(err);
      this.log.error('job failed', { plugin, job, error });
    } finally {
      entry.running = false;
    }
    const ended = Date.now();
    this.finish.run(error ? 'failed' : 'succeeded', new Date(ended).toISOString(), ended - started, output, error, id);
    return this.db.prepare(`SELECT * FROM job_executions WHERE id = ?`).get(id) as JobExecution;
  }

  forPlugin(plugin: string): PluginScheduler {
    const entries = new Map<string, Entry>();
    let started = false;
    const arm = (entry: Entry) => {
      // Unnamed: node-schedule keeps named jobs in one map for the whole process, which two agents would share.
      entry.job = schedule.scheduleJob(entry.spec.cron, () => {
        this.runEntry(plugin, entry, 'cron').catch(() => undefined);
      });
    };
    const disarm = (entry: Entry) => {
      entry.job?.cancel();
      entry.job = null;
    };
    const scheduler: PluginScheduler = {
      job: (spec) => {
        if (!JOB_NAME.test(spec.name)) throw new Error(`invalid job name '${spec.name}'`);
        if (entries.has(spec.name)) throw new Error(`job '${spec.name}' is already scheduled`);
        const problem = validateCron(spec.cron);
        if (problem) throw errors.badRequest(`invalid cron expression '${spec.cron}': ${problem}`, 'INVALID_CRON');
        const entry: Entry = { spec, job: null, running: false };
        entries.set(spec.name, entry);
        if (started) arm(entry);
        return {
          name: spec.name,
          nextRun: () => entry.job?.nextInvocation() ?? null,
          runNow: () => this.runEntry(plugin, entry, 'manual'),
          cancel: () => {
            disarm(entry);
            entries.delete(spec.name);
          },
        };
      },
      validateCron,
      executions: (filter) => {
        const job = filter?.job ? ' AND job = ?' : '';
        const args = [plugin, ...(job ? [filter!.job] : []), Math.min(filter?.limit ?? 50, 1000), filter?.offset ?? 0];
        return this.db.prepare(`SELECT * FROM job_executions WHERE plugin = ?${job} ORDER BY id DESC LIMIT ? OFFSET ?`).all(...args) as JobExecution[];
      },
      startAll: () => {
        started = true;
        for (const entry of entries.values()) if (!entry.job) arm(entry);
      },
      stopAll: () => {
        started = false;
        for (const entry of entries.values()) disarm(entry);
      },
      list: () => [...entries.values()].map((e) => ({ name: e.spec.name, cron: e.spec.cron, next_run: e.job?.nextInvocation()?.toISOString() ?? null })),
    };
    this.plugins.add(scheduler);
    return scheduler;
  }

  /** Cancels this agent's jobs and tells running ones to stop (their signal). */
  stop(): void {
    this.shutdown.abort();
    for (const plugin of this.plugins) plugin.stopAll();
  }
}
