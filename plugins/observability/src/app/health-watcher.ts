/**
 * The health watcher: a container whose healthcheck reports `unhealthy` is restarted (through the agent's API),
 * at most once per cooldown and at most `max_retries` times; when it turns healthy again that is a recovery, when
 * the retries run out the watcher gives up. Each of these is a health event and a notification.
 */
import type { Notice } from './notice.js';
import type { ContainerInfo } from './collector.js';
import type { Journal } from './journal.js';
import type { Logger } from './log.js';

interface Watch {
  deployment: string | null;
  attempts: number;
  lastRestart: number;
  restarting: boolean;
  gaveUp: boolean;
  seen: number;
}

export interface WatcherOptions {
  enabled: boolean;
  cooldown: number;
  max_retries: number;
  scope: 'deployments' | 'all';
}

export interface WatcherActions {
  restart(containerId: string): Promise<void>;
  notify(m: Notice): Promise<void>;
}

export class HealthWatcher {
  private readonly watches = new Map<string, Watch>();

  constructor(
    private readonly journal: Journal,
    private readonly actions: WatcherActions,
    private readonly options: () => WatcherOptions,
    private readonly log: Logger,
    /** Whether a container belongs to a deployment of this agent (scope `deployments`). */
    private readonly managed: (deployment: string | null) => boolean,
  ) {}

  /** A deleted deployment's containers start over (a new one of the same name reuses their names). */
  forgetDeployment(deployment: string): void {
    for (const [name, w] of this.watches) if (w.deployment === deployment) this.watches.delete(name);
  }

  status(name: string): { restarts: number; gaveUp: boolean } {
    const w = this.watches.get(name);
    return { restarts: w?.attempts ?? 0, gaveUp: w?.gaveUp ?? false };
  }

  /** Looks at the current container list (after each collection round and each health event of the engine). */
  check(containers: ContainerInfo[], now = Date.now()): void {
    const opts = this.options();
    for (const c of containers) {
      if (opts.scope === 'deployments' && !this.managed(c.deployment)) continue;
      let w = this.watches.get(c.name);
      if (!w) {
        if (c.health !== 'unhealthy') continue;
        w = { deployment: c.deployment, attempts: 0, lastRestart: 0, restarting: false, gaveUp: false, seen: now };
        this.watches.set(c.name, w);
      }
      w.seen = now;
      if (c.health === 'healthy') {
        if (w.attempts > 0 || w.gaveUp) {
          const message = `${c.name} is healthy again after ${w.attempts} restart(s) by the health watcher`;
          this.journal.addHealthEvent({ container: c.name, deployment: c.deployment, action: 'recovered', attempt: w.attempts, message });
          void this.actions.notify({ event: 'health.recovered', severity: 'info', title: `Container recovered: ${c.name}`, message, deployment: c.deployment });
          this.log.info('container recovered', { container: c.name, attempts: w.attempts });
        }
        this.watches.delete(c.name);
        continue;
      }
      if (c.health !== 'unhealthy' || !opts.enabled || w.restarting || w.gaveUp) continue;
      if (now - w.lastRestart < opts.cooldown * 1000) continue;
      if (w.attempts >= opts.max_retries) {
        w.gaveUp = true;
        const message = `${c.name} is still unhealthy after ${w.attempts} restart(s); the health watcher gave up`;
        this.journal.addHealthEvent({ container: c.name, deployment: c.deployment, action: 'gave_up', attempt: w.attempts, message });
        void this.actions.notify({
          event: 'health.gave_up',
          severity: 'critical',
          title: `Container still unhealthy: ${c.name}`,
          message,
          deployment: c.deployment,
        });
        this.log.warn('health watcher gave up', { container: c.name });
        continue;
      }
      w.attempts++;
      w.restarting = true;
      w.lastRestart = now;
      const attempt = w.attempts;
      const watch = w;
      this.log.info('restarting unhealthy container', { container: c.name, attempt });
      this.actions
        .restart(c.id)
        .then(
          () => {
            this.journal.addHealthEvent({
              container: c.name,
              deployment: c.deployment,
              action: 'restarted',
              attempt,
              message: `${c.name} was unhealthy: restarted (attempt ${attempt} of ${opts.max_retries})`,
            });
          },
          (err: unknown) => {
            this.journal.addHealthEvent({
              container: c.name,
              deployment: c.deployment,
              action: 'restart_failed',
              attempt,
              message: `restarting ${c.name} failed: ${(err as Error).message}`,
            });
            this.log.warn('restart failed', { container: c.name, error: String(err) });
          },
        )
        .finally(() => {
          watch.restarting = false;
          watch.lastRestart = Date.now();
        });
    }
    // Forget containers not seen for an hour (removed for good).
    for (const [name, w] of this.watches) if (now - w.seen > 3600_000) this.watches.delete(name);
  }
}
