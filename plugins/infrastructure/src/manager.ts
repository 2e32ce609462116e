/**
 * Infrastructure services as compose projects `agent-infra-<name>` under the plugin's data folder: each folder
 * holds the rendered `compose.yml` and a 0600 `.env` with its secrets. Settings live in an encrypted document.
 */
import { chmod, mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { HttpError, errors, type Document, type Logger, compareText } from '@agent/sdk';
import { type ComposeCommand, type ContainerHealth, type ContainerSummary, type DockerService, type LogLine } from '@agent/plugin-docker/api';
import { type InfrastructureService, type InfrastructureState, type InfrastructureStatus } from './api.js';
import {
  SHARED_NETWORKS,
  TEMPLATES,
  initialSettings,
  maskSettings,
  mergeSettings,
  templateOf,
  type NetworkKey,
  type SettingValue,
  type Template,
} from './templates.js';

export interface ServiceState {
  enabled: boolean;
  settings: Record<string, SettingValue>;
  updated_at: string;
}

export interface InfraDoc {
  services: Record<string, ServiceState>;
}

const HEALTH_RANK: Record<ContainerHealth, number> = { unhealthy: 3, starting: 2, healthy: 1, none: 0 };

export interface ManagerOptions {
  /** Compose projects are `<prefix>-<name>`. */
  projectPrefix: string;
  /** Shared networks are `<prefix>-proxy` and `<prefix>-shared`. */
  networkPrefix: string;
  /** Labels added to every infrastructure container. */
  labels: Record<string, string>;
}

/** `.env` values are single-quoted-free tokens (validated by the templates); newlines are refused anyway. */
const envFile = (env: Record<string, string>) =>
  Object.entries(env)
    .map(([k, v]) => {
      if (/[\r\n]/.test(v)) throw errors.badRequest(`a value of ${k} contains a line break`);
      return `${k}=${v}`;
    })
    .join('\n') + '\n';

async function writeAtomic(path: string, content: string, mode: number): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, content, { mode });
  await chmod(tmp, mode);
  await rename(tmp, path);
}

export class InfrastructureManager implements InfrastructureService {
  /** One operation per service at a time (start/stop/configure must not interleave). */
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(
    private readonly doc: Document<InfraDoc>,
    private readonly docker: DockerService,
    private readonly dataDir: string,
    private readonly log: Logger,
    private readonly options: ManagerOptions,
  ) {}

  projectOf(name: string): string {
    return `${this.options.projectPrefix}-${name}`;
  }

  networkName(key: NetworkKey): string {
    return `${this.options.networkPrefix}-${key}`;
  }

  /** The template of a service: 404 for a name that is none. */
  template(name: string): Template {
    const t = templateOf(name);
    if (!t) throw errors.notFound(`infrastructure service '${name}' not found (known: ${TEMPLATES.map((x) => x.name).join(', ')})`);
    return t;
  }

  /**
   * The settings a patch would give a service, each checked against its template (400 naming the field), with the
   * ones stored now; changes nothing. `configure` checks the patch again against what is stored by then.
   */
  plannedSettings(name: string, patch: Record<string, SettingValue>): { before: Record<string, SettingValue>; after: Record<string, SettingValue> } {
    const t = this.template(name);
    const before = this.settingsOf(t);
    return { before: maskSettings(t, before), after: maskSettings(t, mergeSettings(t, before, patch)) };
  }

  /** A stop refused before anything runs: a shared network is not stopped, and the engine must answer. */
  checkStop(name: string): Template {
    const t = this.template(name);
    if (t.kind === 'network') {
      throw errors.badRequest(`'${name}' is a shared network: it is not stopped (detach deployments from it instead)`, 'NOT_STOPPABLE');
    }
    this.docker.assertAvailable();
    return t;
  }

  /**
   * Creates the stored state of a known service (its secrets generated) if it has none yet, as a configuration does
   * first: a configuration refused for its settings leaves the secrets generated, as it always did.
   */
  async ensureService(name: string): Promise<void> {
    const t = templateOf(name);
    if (t) await this.serialised(name, () => this.ensureState(t));
  }

  /** Whether the engine answers (503 `DOCKER_UNAVAILABLE` otherwise): starts and restarts need it. */
  assertEngine(): void {
    this.docker.assertAvailable();
  }

  private serialised<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(name) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(fn);
    this.locks.set(name, next);
    return next.finally(() => {
      if (this.locks.get(name) === next) this.locks.delete(name);
    });
  }

  private state(name: string): ServiceState | undefined {
    return this.doc.data.services[name];
  }

  /** The service's stored state, created (secrets generated) on first use; settings added to a template later are filled in. */
  private async ensureState(t: Template): Promise<ServiceState> {
    const existing = this.state(t.name);
    if (existing && Object.keys(t.settings).every((k) => k in existing.settings)) return existing;
    return this.doc.update((d) => {
      const current = d.services[t.name];
      d.services[t.name] = {
        enabled: current?.enabled ?? false,
        settings: { ...initialSettings(t), ...(current?.settings ?? {}) },
        updated_at: new Date().toISOString(),
      };
      return d.services[t.name]!;
    });
  }

  /** Stored settings over the template defaults (secrets not generated yet read as empty). */
  private settingsOf(t: Template): Record<string, SettingValue> {
    const defaults = Object.fromEntries(Object.entries(t.settings).map(([k, spec]) => [k, spec.default]));
    return { ...defaults, ...(this.state(t.name)?.settings ?? {}) };
  }

  networks(): { name: string; description: string }[] {
    return SHARED_NETWORKS.map((n) => ({ name: this.networkName(n.key), description: n.description }));
  }

  private async ensureNetworks(t: Template): Promise<void> {
    for (const key of t.networks)
      await this.docker.networks.ensure(this.networkName(key), { labels: { ...this.options.labels, 'agent.infrastructure.network': key } });
  }

  /** The project's compose document and variables, rendered from the current settings. */
  private render(t: Template): { compose: Record<string, unknown>; env: Record<string, string> } {
    const networks = { proxy: this.networkName('proxy'), shared: this.networkName('shared') };
    return t.render!(this.settingsOf(t), { networks, labels: this.options.labels });
  }

  /** Writes the rendered files into the project folder (for operators to read; compose runs the checked model). */
  private async writeProject(t: Template): Promise<string> {
    const dir = join(this.dataDir, t.name);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const { compose, env } = this.render(t);
    await writeAtomic(join(dir, '.env'), envFile(env), 0o600);
    await writeAtomic(
      join(dir, 'compose.yml'),
      `# Generated by the agent from the '${t.name}' template; edit its settings instead.\n${stringify(compose)}`,
      0o600,
    );
    return dir;
  }

  /**
   * Runs compose for a service through the guard, like any deployment. Its only exceptions: joining the agent's
   * shared networks, and the label that marks infrastructure containers.
   */
  private async compose(t: Template, command: ComposeCommand): Promise<void> {
    const dir = join(this.dataDir, t.name);
    const { compose, env } = this.render(t);
    const exceptions = [...t.networks.map((k) => `networks.external:${this.networkName(k)}`), 'labels:agent.infrastructure'];
    const checked = await this.docker.compose.check({ project: this.projectOf(t.name), dir, content: stringify(compose), env, exceptions });
    const result = await this.docker.compose.run(checked, command);
    if (result.exit_code !== 0) {
      const tail = result.output.split('\n').filter(Boolean).slice(-8).join('\n');
      this.log.warn('infrastructure compose failed', { service: t.name, command: command.command, output: tail });
      throw new HttpError(502, 'COMPOSE_FAILED', `compose ${command.command} of '${t.name}' failed: ${tail}`);
    }
  }

  private async containers(t: Template): Promise<ContainerSummary[]> {
    if (t.kind !== 'compose') return [];
    return this.docker.listContainers({ all: true, deployment: this.projectOf(t.name) });
  }

  async get(name: string): Promise<InfrastructureStatus> {
    const t = this.template(name);
    const settings = this.settingsOf(t);
    const base = {
      name: t.name,
      description: t.description,
      template: t.name,
      enabled: this.state(name)?.enabled ?? false,
      networks: t.networks.map((k) => this.networkName(k)),
      settings: maskSettings(t, settings),
    };
    if (t.kind === 'network') {
      // A network-only service is "running" once created (it is re-ensured at every start of the agent).
      return { ...base, status: base.enabled ? 'running' : 'not_created', health: 'none', services: [], ports: [] };
    }
    const containers = await this.containers(t);
    const services = t.services.map((svc) => {
      const c = containers.find((x) => x.service === svc);
      return {
        name: svc,
        status: c?.state ?? 'missing',
        health: c?.health ?? ('none' as ContainerHealth),
        container_id: c?.id ?? null,
        image: c?.image ?? null,
      };
    });
    const running = services.filter((s) => s.status === 'running').length;
    let status: InfrastructureState;
    if (containers.length === 0) status = 'not_created';
    else if (running === services.length) status = services.some((s) => s.health === 'starting') ? 'starting' : 'running';
    else if (running > 0) status = 'partial';
    else status = services.some((s) => s.status === 'restarting' || s.status === 'dead') ? 'failed' : 'stopped';
    const health = services
      .filter((s) => s.status === 'running')
      .reduce<ContainerHealth>((worst, s) => (HEALTH_RANK[s.health] > HEALTH_RANK[worst] ? s.health : worst), 'none');
    const ports = containers.flatMap((c) =>
      c.ports.map((p) => ({
        service: c.service ?? c.name,
        host_ip: p.ip,
        host_port: p.public,
        container_port: p.private,
        protocol: p.protocol,
      })),
    );
    return { ...base, status, health, services, ports };
  }

  /** At agent start: shared networks of enabled services exist again (compose projects restart by policy). */
  async recover(): Promise<void> {
    for (const t of TEMPLATES) {
      if (!this.state(t.name)?.enabled) continue;
      await this.ensureNetworks(t).catch((err) => this.log.warn('could not re-create shared networks', { service: t.name, error: String(err) }));
    }
  }

  async list(): Promise<InfrastructureStatus[]> {
    return Promise.all(TEMPLATES.map((t) => this.get(t.name)));
  }

  async configure(name: string, patch: Record<string, SettingValue>): Promise<InfrastructureStatus> {
    const t = this.template(name);
    return this.serialised(name, async () => {
      await this.ensureState(t);
      const merged = mergeSettings(t, this.settingsOf(t), patch);
      await this.doc.update((d) => {
        d.services[name] = { ...d.services[name]!, settings: merged, updated_at: new Date().toISOString() };
      });
      if (t.kind === 'compose') {
        await this.writeProject(t);
        // A running project picks up the new settings (compose recreates only what changed).
        if ((await this.containers(t)).some((c) => c.state === 'running')) await this.compose(t, { command: 'up', removeOrphans: true });
      }
      return this.get(name);
    });
  }

  async start(name: string, options: { settings?: Record<string, SettingValue> } = {}): Promise<InfrastructureStatus> {
    const t = this.template(name);
    if (options.settings && Object.keys(options.settings).length) await this.configure(name, options.settings);
    return this.serialised(name, async () => {
      this.docker.assertAvailable();
      await this.ensureState(t);
      await this.ensureNetworks(t);
      if (t.kind === 'compose') {
        await this.writeProject(t);
        await this.compose(t, { command: 'up', removeOrphans: true });
      }
      await this.doc.update((d) => {
        d.services[name]!.enabled = true;
      });
      return this.get(name);
    });
  }

  async stop(name: string): Promise<InfrastructureStatus> {
    const t = this.checkStop(name);
    return this.serialised(name, async () => {
      this.docker.assertAvailable();
      if ((await this.containers(t)).length > 0) await this.compose(t, { command: 'stop' });
      await this.doc.update((d) => {
        if (d.services[name]) d.services[name]!.enabled = false;
      });
      return this.get(name);
    });
  }

  async restart(name: string): Promise<InfrastructureStatus> {
    const t = this.template(name);
    if (t.kind === 'network') return this.start(name);
    return this.serialised(name, async () => {
      this.docker.assertAvailable();
      await this.ensureState(t);
      await this.ensureNetworks(t);
      await this.writeProject(t);
      await this.compose(t, { command: 'up', forceRecreate: true, removeOrphans: true });
      await this.doc.update((d) => {
        d.services[name]!.enabled = true;
      });
      return this.get(name);
    });
  }

  async logs(name: string, options: { tail?: number; filter?: string; service?: string } = {}): Promise<(LogLine & { service: string })[]> {
    const t = this.template(name);
    if (options.service && !t.services.includes(options.service)) throw errors.notFound(`'${name}' has no service '${options.service}'`);
    const tail = options.tail ?? 100;
    const needle = options.filter?.toLowerCase();
    const lines: (LogLine & { service: string })[] = [];
    for (const c of await this.containers(t)) {
      const service = c.service ?? c.name;
      if (options.service && service !== options.service) continue;
      // With a filter, read more than `tail` so the last `tail` matching lines are found.
      const read = tail === 0 ? undefined : needle ? Math.max(tail * 20, 2000) : tail;
      for await (const line of this.docker.containerLogs(c.id, { tail: read, timestamps: true })) {
        if (needle && !line.text.toLowerCase().includes(needle)) continue;
        lines.push({ ...line, service });
      }
    }
    lines.sort((a, b) => compareText(a.time ?? '', b.time ?? ''));
    return tail === 0 ? lines : lines.slice(-tail);
  }
}
