/**
 * Per-deployment backup configuration: schedule, retention, what to include, where to upload. Each enabled
 * configuration is a scheduler job of this plugin (`config.<deployment>`); its runs are recorded by the core.
 */
import { errors, Type, type Document, type JobHandle, type Logger, type PluginStore, type Scheduler, type Static } from '@agent/sdk';

export const BackupConfig = Type.Object({
  enabled: Type.Boolean(),
  schedule: Type.String({ description: 'cron expression (5 or 6 fields)' }),
  retention: Type.Integer({ minimum: 0, maximum: 1000, description: 'backups of the deployment kept; 0 keeps all' }),
  include_database: Type.Boolean(),
  exclude_patterns: Type.Array(Type.String()),
  destination: Type.String({ description: "'local' or the name of an object store" }),
  updated_at: Type.Union([Type.String(), Type.Null()]),
  next_run: Type.Union([Type.String(), Type.Null()]),
});
export type BackupConfig = Static<typeof BackupConfig>;

export type Stored = Omit<BackupConfig, 'next_run'>;

export const DEFAULT_CONFIG: Stored = {
  enabled: false,
  schedule: '0 3 * * *',
  retention: 7,
  include_database: true,
  exclude_patterns: [],
  destination: 'local',
  updated_at: null,
};

export class BackupConfigs {
  private readonly handles = new Map<string, JobHandle>();

  private constructor(
    private readonly doc: Document<{ configs: Record<string, Stored> }>,
    private readonly scheduler: Scheduler,
    private readonly log: Logger,
    private readonly runScheduled: (deployment: string, config: Stored, output: (line: string) => void) => Promise<void>,
  ) {}

  static async open(store: PluginStore, scheduler: Scheduler, log: Logger, run: BackupConfigs['runScheduled']): Promise<BackupConfigs> {
    const configs = new BackupConfigs(await store.document({ configs: {} as Record<string, Stored> }, 'backup-configs'), scheduler, log, run);
    for (const [deployment, config] of Object.entries(configs.doc.data.configs)) configs.arm(deployment, config);
    return configs;
  }

  get(deployment: string): BackupConfig {
    const stored = this.doc.data.configs[deployment] ?? DEFAULT_CONFIG;
    return { ...stored, next_run: this.handles.get(deployment)?.nextRun()?.toISOString() ?? null };
  }

  /** Every deployment with a stored configuration. */
  deployments(): string[] {
    return Object.keys(this.doc.data.configs);
  }

  /** The configuration as stored (the default when none is): what a change depends on. */
  stored(deployment: string): Stored {
    return this.doc.data.configs[deployment] ?? DEFAULT_CONFIG;
  }

  /** The configuration `set` would store; throws 400 INVALID_CRON for a schedule the scheduler refuses. Changes nothing. */
  planned(deployment: string, patch: Partial<Stored>): Stored {
    const next: Stored = { ...DEFAULT_CONFIG, ...this.stored(deployment), ...patch, updated_at: new Date().toISOString() };
    const problem = this.scheduler.validateCron(next.schedule);
    if (problem) throw errors.badRequest(`body.schedule: invalid cron expression '${next.schedule}': ${problem}`, 'INVALID_CRON');
    return next;
  }

  async set(deployment: string, patch: Partial<Stored>): Promise<BackupConfig> {
    const next = this.planned(deployment, patch);
    await this.doc.update((d) => {
      d.configs[deployment] = next;
    });
    this.arm(deployment, next);
    return this.get(deployment);
  }

  async remove(deployment: string): Promise<void> {
    this.disarm(deployment);
    if (!this.doc.data.configs[deployment]) return;
    await this.doc.update((d) => {
      delete d.configs[deployment];
    });
  }

  private disarm(deployment: string): void {
    this.handles.get(deployment)?.cancel();
    this.handles.delete(deployment);
  }

  private arm(deployment: string, config: Stored): void {
    this.disarm(deployment);
    if (!config.enabled) return;
    try {
      const handle = this.scheduler.job({
        name: `config.${deployment}`,
        cron: config.schedule,
        description: `scheduled backup of ${deployment}`,
        run: async (run) => {
          const current = this.doc.data.configs[deployment];
          if (!current?.enabled) return;
          await this.runScheduled(deployment, current, (line) => run.output(line));
        },
      });
      this.handles.set(deployment, handle);
    } catch (err) {
      this.log.error('could not schedule backups', { deployment, error: (err as Error).message });
    }
  }

  /** Runs the scheduled backup now (tests, "run now"). */
  async runNow(deployment: string): Promise<void> {
    const handle = this.handles.get(deployment);
    if (!handle) throw errors.conflict(`scheduled backups of '${deployment}' are not enabled`, 'SCHEDULE_DISABLED');
    const execution = await handle.runNow();
    if (execution.status === 'failed') throw new Error(execution.error ?? 'scheduled backup failed');
  }
}
