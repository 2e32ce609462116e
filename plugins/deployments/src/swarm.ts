/**
 * Swarm deployments (`runtime: swarm`): the state of their stacks as the deployment answers show it, in the shapes
 * of compose deployments (a service's status, health and one running container) plus what only Swarm has: replicas
 * running/desired, errors of recent tasks and the engine's rolling update. The answers are built without an engine
 * call (the list is the hot path): the stacks are read after every change, whenever the container state changes,
 * and every few seconds while a swarm deployment exists (an update converges on its own time).
 */
import type { DockerService, StackService } from '@agent/plugin-docker/api';
import type { Logger } from '@agent/sdk';
import type { DeploymentServiceState, DeploymentStatus } from './api.js';

const REFRESH_MS = 3000;

export class SwarmStates {
  private readonly stacks = new Map<string, StackService[]>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly docker: DockerService,
    private readonly log: Logger,
    /** The swarm deployments now. */
    private readonly names: () => string[],
    /** Called when a stack's state changed (the deployment list is memoized). */
    private readonly changed: () => void,
  ) {}

  /** Reads the stacks of every swarm deployment (one read at a time; a call while one runs waits for it). */
  refresh(): Promise<void> {
    this.running ??= this.read().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async read(): Promise<void> {
    const names = this.names();
    this.schedule(names.length > 0);
    if (!names.length || !this.docker.available()) return;
    let any = false;
    for (const name of names) {
      try {
        const next = await this.docker.swarm.stackServices(name);
        if (JSON.stringify(next) !== JSON.stringify(this.stacks.get(name))) any = true;
        this.stacks.set(name, next);
      } catch (err) {
        this.log.debug('swarm stack not read', { deployment: name, error: (err as Error).message });
      }
    }
    for (const name of [...this.stacks.keys()]) if (!names.includes(name)) this.stacks.delete(name);
    if (any) this.changed();
  }

  private schedule(on: boolean): void {
    if (on && !this.timer) {
      this.timer = setInterval(() => void this.refresh(), REFRESH_MS);
      this.timer.unref();
    } else if (!on && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  stop(): void {
    this.schedule(false);
  }

  /**
   * A swarm deployment's services and status: each service with its replicas and task errors (its container fields
   * are those of one running task, from the container state); `running` when every service has all its replicas,
   * `partial` when some run (a node down, a task failing), `failed` when none runs and tasks failed, else `stopped`.
   * Null until its stack was first read (the compose-shaped answer stands meanwhile).
   */
  view(name: string, services: DeploymentServiceState[]): { status: DeploymentStatus; services: DeploymentServiceState[] } | null {
    const stack = this.stacks.get(name);
    if (!stack) return null;
    const out = services.map((s) => {
      const found = stack.find((x) => x.name === s.name);
      if (!found) return { ...s, status: 'missing', replicas: { running: 0, desired: 0 }, errors: [], update: null };
      const errors = found.tasks.map((t) => t.error).filter((e): e is string => !!e);
      const update = found.update ? { state: found.update.state, message: found.update.message } : null;
      return { ...s, replicas: found.replicas, errors: [...new Set(errors)].slice(0, 5), update };
    });
    const complete = out.filter((s) => s.replicas.desired > 0 && s.replicas.running >= s.replicas.desired).length;
    const some = out.some((s) => s.replicas.running > 0);
    const status: DeploymentStatus =
      out.length && complete === out.length ? 'running' : some ? 'partial' : out.some((s) => s.errors.length && s.replicas.desired > 0) ? 'failed' : 'stopped';
    return { status, services: out };
  }
}
