/**
 * The container state of every deployment, so listing never calls the engine per deployment: one container
 * listing (all compose projects) fills it, engine events schedule a debounced refresh, and a timer reconciles it
 * periodically in case an event was missed.
 */
import type { Logger } from '@agent/sdk';
import type { ContainerSummary, DockerService } from '@agent/plugin-docker/api';
import type { DeploymentServiceState, DeploymentStatus } from './api.js';

export const PROJECT_LABEL = 'com.docker.compose.project';

/** Exit codes of a container that was stopped (SIGTERM/SIGKILL) rather than one that failed. */
const STOP_EXIT_CODES = new Set([0, 137, 143]);

export const exitCodeOf = (c: ContainerSummary): number | null => {
  const m = /Exited \((-?\d+)\)/.exec(c.status);
  return m ? Number(m[1]) : null;
};

export function serviceStates(services: string[], containers: ContainerSummary[]): DeploymentServiceState[] {
  const byService = new Map<string, ContainerSummary[]>();
  for (const c of containers) {
    if (!c.service) continue;
    byService.set(c.service, [...(byService.get(c.service) ?? []), c]);
  }
  const names = [...new Set([...services, ...[...byService.keys()].filter((s) => !services.includes(s))])];
  return names.map((name) => {
    const list = byService.get(name) ?? [];
    const c = list.find((x) => x.state === 'running') ?? list[0];
    if (!c) return { name, status: 'missing', health: 'none', container_id: null, container_name: null, image: null };
    return { name, status: c.state, health: c.health, container_id: c.id, container_name: c.name, image: c.image };
  });
}

export function deploymentStatus(services: string[], containers: ContainerSummary[], engineUp: boolean, startFailed = false): DeploymentStatus {
  if (!engineUp) return 'unknown';
  if (services.length === 0) return 'unknown';
  const states = serviceStates(services, containers).filter((s) => services.includes(s.name));
  const running = states.filter((s) => s.status === 'running').length;
  if (running === states.length) return 'running';
  if (running > 0) return 'partial';
  const failed =
    startFailed || containers.some((c) => c.state === 'dead' || c.state === 'restarting' || (c.state === 'exited' && !STOP_EXIT_CODES.has(exitCodeOf(c) ?? 0)));
  return failed ? 'failed' : 'stopped';
}

export class StateCache {
  private byDeployment = new Map<string, ContainerSummary[]>();
  private timer: NodeJS.Timeout | null = null;
  private debounce: NodeJS.Timeout | null = null;
  private trailing: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private unsubscribe: (() => void) | null = null;
  /** Whether the last reconcile reached the engine. */
  private fresh = false;
  private readonly changeListeners = new Set<() => void>();
  private readonly held = new Map<string, number>();

  constructor(
    private readonly docker: DockerService,
    private readonly log: Logger,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.unsubscribe = this.docker.onEvent((e) => {
      if (e.type === 'container' && e.deployment && !e.action.startsWith('exec_') && !this.held.has(e.deployment)) this.schedule();
    });
    const tick = () => {
      this.timer = setTimeout(() => void this.reconcile().finally(tick), this.intervalMs);
      this.timer.unref();
    };
    tick();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.debounce) clearTimeout(this.debounce);
    if (this.trailing) clearTimeout(this.trailing);
    this.unsubscribe?.();
  }

  /**
   * While compose works on a deployment, its events are ignored (the caller reconciles once at the end): listing
   * containers on every event of an `up` only competes with compose for the engine.
   */
  hold(deployment: string): () => void {
    this.held.set(deployment, (this.held.get(deployment) ?? 0) + 1);
    return () => {
      const n = (this.held.get(deployment) ?? 1) - 1;
      if (n <= 0) this.held.delete(deployment);
      else this.held.set(deployment, n);
    };
  }

  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /**
   * Events arrive in bursts (create, start, health…): one listing per burst, plus a trailing one, because the
   * engine sends `die` before its container listing shows the new state.
   */
  schedule(): void {
    if (this.trailing) clearTimeout(this.trailing);
    this.trailing = setTimeout(() => {
      this.trailing = null;
      void this.reconcile();
    }, 400);
    this.trailing.unref();
    if (this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = null;
      void this.reconcile();
    }, 30);
  }

  engineUp(): boolean {
    return this.docker.available() && this.fresh;
  }

  containers(name: string): ContainerSummary[] {
    return this.byDeployment.get(name) ?? [];
  }

  /** One engine call for every deployment; concurrent callers share it (and a call during it triggers one more). */
  reconcile(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          if (!this.docker.available()) {
            this.fresh = false;
            continue;
          }
          const list = await this.docker.listContainers({ all: true, labels: { [PROJECT_LABEL]: '' } });
          const next = new Map<string, ContainerSummary[]>();
          for (const c of list) {
            if (!c.deployment) continue;
            next.set(c.deployment, [...(next.get(c.deployment) ?? []), c]);
          }
          this.byDeployment = next;
          this.fresh = true;
        } catch (err) {
          this.fresh = false;
          this.log.warn('state reconcile failed', { error: String((err as Error)?.message ?? err) });
        }
      } while (this.again);
    })().finally(() => {
      this.running = null;
      for (const l of this.changeListeners) l();
    });
    return this.running;
  }
}
