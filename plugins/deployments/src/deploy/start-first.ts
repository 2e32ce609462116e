/**
 * The `start-first` strategy (zero downtime through the proxy). For each service it can switch, one at a time:
 *   1. the proxy is held on the service's running container (`holdContainer`: the edge's upstream follows
 *      `serviceContainer`, and a re-render caused by the new container's start must not route to it early);
 *   2. compose starts one more container of the service beside it, from the checked model, through the guard
 *      (`start-beside`: `up --no-deps --no-recreate --scale <service>=2`);
 *   3. it waits until the new container's healthcheck passes (`health_timeout`); a failure removes the new
 *      container, leaves the old one serving and rejects (the revision is then `failed`, `deployment.failed` sent);
 *   4. the proxy is held on the new container and nginx reloads (old workers finish what they serve);
 *   5. the old container drains: the strategy waits until no connection from outside is established to a port it
 *      listens on, at most `drain_timeout`, then stops it (SIGTERM: websockets get the application's own close)
 *      and removes it. The service is back to one container, which compose counts as its scale of one.
 * A service it cannot switch this way (no healthcheck in the model, fixed host ports or `container_name` that two
 * containers cannot share, more than one replica, no domain of the proxy routing to it, no proxy, no running
 * container to keep serving) is recreated instead and listed in `fallbacks` with why.
 */
import { readdir, readFile } from 'node:fs/promises';
import { HttpError } from '@agent/sdk';
import type { ContainerSummary, DockerService } from '@agent/plugin-docker/api';
import type { DeploymentUpstreams } from '../api.js';
import { recreate, type DeployStrategy, type StrategyRun } from './strategy.js';

export interface StartFirstDeps {
  docker: DockerService;
  /** The proxy's routes (the edge plugin); undefined without it: every service falls back. */
  upstreams(): DeploymentUpstreams | undefined;
  /** Holds the container `serviceContainer` answers for a service (null releases it). */
  hold(deployment: string, service: string, containerId: string | null): void;
  /** Seconds: how long a new container may take to become healthy; how long the old one may take to drain. */
  timeouts(): { health: number; drain: number };
}

export interface Fallback {
  service: string;
  why: string;
}

type ServiceDef = Record<string, unknown> & {
  healthcheck?: { disable?: boolean; test?: unknown };
  ports?: unknown[];
  container_name?: unknown;
  scale?: unknown;
  deploy?: { replicas?: unknown };
  network_mode?: unknown;
  stop_grace_period?: unknown;
};

/** Why a service of the model cannot run two containers side by side, or null when it can. */
function modelObstacle(def: ServiceDef): string | null {
  const hc = def.healthcheck;
  const test = Array.isArray(hc?.test) ? hc.test.map(String) : typeof hc?.test === 'string' ? [hc.test] : [];
  if (!hc || hc.disable || !test.length || test[0] === 'NONE') return 'no healthcheck in the compose file: nothing tells when the new container is ready';
  if (typeof def.container_name === 'string') return `fixed container_name '${def.container_name}': two containers cannot share it`;
  const fixed = (def.ports ?? []).map(publishedPort).filter((p): p is string => p !== null);
  if (fixed.length) return `fixed host port ${fixed[0]}: two containers cannot both publish it`;
  const replicas = Number(def.deploy?.replicas ?? def.scale ?? 1);
  if (replicas !== 1) return `${replicas} replicas: start-first replaces a service of one container`;
  if (typeof def.network_mode === 'string' && !def.network_mode.startsWith('bridge'))
    return `network_mode '${def.network_mode}': the proxy reaches containers by their address on a network`;
  return null;
}

/** The host port a port entry publishes (null: none or one the engine picks), in either form compose writes. */
function publishedPort(entry: unknown): string | null {
  if (entry && typeof entry === 'object') {
    const published = (entry as { published?: unknown }).published;
    return published === undefined || published === null || published === '' || published === 0 || published === '0' ? null : String(published);
  }
  if (typeof entry === 'string' || typeof entry === 'number') {
    const parts = String(entry).split('/')[0]!.split(':');
    // `target`, `host:target`, `ip:host:target` (an IPv6 address comes in brackets)
    const host = parts.length >= 2 ? parts[parts.length - 2]! : '';
    return host && !host.endsWith(']') ? host : null;
  }
  return null;
}

/**
 * Which services the strategy switches and which fall back (with why), from the model and the containers running
 * now. Used for the request's answer and again when the job runs.
 */
export function assessStartFirst(
  deps: Pick<StartFirstDeps, 'upstreams'>,
  deployment: string,
  model: Readonly<Record<string, unknown>>,
  services: string[],
  containers: Pick<ContainerSummary, 'service' | 'state'>[],
  runtime?: 'compose' | 'swarm',
): { switched: string[]; fallbacks: Fallback[] } {
  const defs = (model.services ?? {}) as Record<string, ServiceDef>;
  const upstreams = deps.upstreams();
  const routed = new Map((upstreams?.routed(deployment) ?? []).map((r) => [r.service, r.unswitchable]));
  const switched: string[] = [];
  const fallbacks: Fallback[] = [];
  const whyNot = (service: string, mine: Pick<ContainerSummary, 'state'>[]): string | null => {
    if (runtime === 'swarm') return 'a swarm deployment: Swarm replaces its tasks itself (its update_config, start-first by default)';
    if (!upstreams) return 'the proxy (edge plugin) is not enabled on this agent';
    const obstacle = modelObstacle(defs[service] ?? {});
    if (obstacle) return obstacle;
    if (!routed.has(service)) return 'no domain of the proxy routes to it';
    const unswitchable = routed.get(service);
    if (unswitchable) return unswitchable;
    if (mine.length !== 1 || mine[0]!.state !== 'running') return `${mine.length ? 'not one running container' : 'no container'} to keep serving meanwhile`;
    return null;
  };
  for (const service of services) {
    const why = whyNot(
      service,
      containers.filter((c) => c.service === service),
    );
    if (why) fallbacks.push({ service, why });
    else switched.push(service);
  }
  return { switched, fallbacks };
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });

export function startFirst(deps: StartFirstDeps): DeployStrategy {
  const containersOf = async (deployment: string, service: string) =>
    (await deps.docker.listContainers({ all: true, deployment })).filter((c) => c.service === service);

  /** Resolves when the container is healthy; rejects with why it is not (unhealthy, exited, timeout, cancel). */
  async function healthy(id: string, service: string, signal: AbortSignal, output: (line: string) => void): Promise<void> {
    const { health } = deps.timeouts();
    const until = Date.now() + health * 1000;
    let last = '';
    for (;;) {
      signal.throwIfAborted();
      const c = await deps.docker.inspectContainer(id);
      if (c.health !== last) output(`${service}: new container ${c.name}: ${c.state}, ${c.health}`);
      last = c.health;
      if (c.health === 'healthy') return;
      if (c.health === 'unhealthy') throw healthError(`${service}: the new container ${c.name} is unhealthy`);
      if (c.state !== 'running' && c.state !== 'created' && c.state !== 'restarting')
        throw healthError(`${service}: the new container ${c.name} ${c.state} (exit code ${c.exit_code ?? 'unknown'}) before it was healthy`);
      if (Date.now() > until)
        throw healthError(`${service}: the new container ${c.name} was not healthy within ${health} s (deployments.redeploy_health_timeout)`);
      await sleep(250, signal);
    }
  }

  /** Waits until nothing from outside is connected to the old container (at most `seconds`). */
  async function drain(id: string, seconds: number, signal: AbortSignal): Promise<'drained' | 'timeout' | 'unknown'> {
    const until = Date.now() + seconds * 1000;
    const pid = await containerPid(id);
    if (pid === null) {
      // Its connections cannot be read (not root, another engine's host): requests nginx sent just before the
      // reload get a short grace before the stop.
      await sleep(Math.min(seconds, 2) * 1000, signal);
      return 'unknown';
    }
    for (;;) {
      const open = await inboundConnections(pid);
      if (open === 0) return 'drained';
      if (open === null) return 'unknown';
      if (Date.now() > until || signal.aborted) return 'timeout';
      await sleep(100, signal);
    }
  }

  async function switchService(run: StrategyRun, service: string): Promise<void> {
    const { deployment, output, signal } = run;
    const before = await containersOf(deployment, service);
    const old = before.find((c) => c.state === 'running');
    if (!old) throw new HttpError(409, 'CONFLICT', `${service}: its running container stopped before the redeploy could start beside it`);
    deps.hold(deployment, service, old.id);
    let created: ContainerSummary | undefined;
    try {
      await run.compose({ command: 'start-beside', service }, `starting a new container of ${service} beside ${old.name}`);
      created = (await containersOf(deployment, service)).find((c) => !before.some((b) => b.id === c.id));
      if (!created) throw new HttpError(502, 'COMPOSE_FAILED', `${service}: compose started no new container beside ${old.name}`);
      output(`${service}: ${created.name} started beside ${old.name}; waiting until it is healthy`);
      await healthy(created.id, service, signal, output);
      deps.hold(deployment, service, created.id);
      await deps.upstreams()!.refresh(deployment);
    } catch (err) {
      // The old container keeps serving: the proxy goes back to it (it never left unless the reload failed, which
      // kept the previous configuration), and the new one goes.
      deps.hold(deployment, service, old.id);
      // Every container of the service the attempt added, also one compose created before it was stopped (cancel).
      const added = await containersOf(deployment, service)
        .then((now) => now.filter((c) => !before.some((b) => b.id === c.id)))
        .catch(() => (created ? [created] : []));
      for (const c of added) {
        await deps.docker.removeContainer(c.id, { force: true }).catch(() => undefined);
        output(`${service}: ${c.name} removed; ${old.name} keeps serving`);
      }
      await deps
        .upstreams()
        ?.refresh(deployment)
        .catch(() => undefined);
      deps.hold(deployment, service, null);
      throw err;
    }
    output(`${service}: the proxy routes to ${created.name}; draining ${old.name}`);
    try {
      const { drain: seconds } = deps.timeouts();
      const drained = await drain(old.id, seconds, signal);
      output(
        `${service}: ${old.name} ${drained === 'drained' ? 'drained' : drained === 'timeout' ? `still had connections after ${seconds} s` : 'given its grace'}`,
      );
      // SIGTERM first: the application closes what it still serves (websockets) its own way, within the service's
      // `stop_grace_period` (10 s by default, as compose stops it); at once when cancelled.
      const def = (run.checked.model.services as Record<string, ServiceDef> | undefined)?.[service];
      await deps.docker.stopContainer(old.id, { timeout: signal.aborted ? 0 : graceSeconds(def?.stop_grace_period) }).catch(() => undefined);
      await deps.docker.removeContainer(old.id, { force: true });
      output(`${service}: ${old.name} removed`);
    } finally {
      // The service has one container again: `serviceContainer` answers it without being held.
      deps.hold(deployment, service, null);
    }
  }

  return {
    name: 'start-first',
    fallbacks: ({ deployment, checked, services, containers }) =>
      assessStartFirst(deps, deployment, checked.model, services, containers, checked.runtime).fallbacks,
    async run(run) {
      const services = run.services ?? [...run.checked.services];
      const containers = await deps.docker.listContainers({ all: true, deployment: run.deployment });
      const { switched, fallbacks } = assessStartFirst(deps, run.deployment, run.checked.model, services, containers, run.checked.runtime);
      for (const f of fallbacks) run.output(`${f.service}: recreated (${f.why})`);
      if (!switched.length) {
        await recreate.run(run);
        return { fallbacks };
      }
      if (fallbacks.length)
        await run.compose(
          // Without their dependencies: those switched start first are not recreated under them.
          { command: 'up', forceRecreate: true, noDeps: true, removeOrphans: !run.services, services: fallbacks.map((f) => f.service) },
          'recreating the services start-first cannot switch',
        );
      for (const service of switched) {
        run.signal.throwIfAborted();
        run.output(`${service}: start-first`);
        await switchService(run, service);
      }
      return { fallbacks };
    },
  };
}

/** A compose duration (`1m30s`, `500ms`, `10s`) in whole seconds; 10 (Docker's default) when absent or unreadable. */
export function graceSeconds(value: unknown): number {
  if (typeof value === 'number') return Math.ceil(value);
  if (typeof value !== 'string' || !/^(\d+(\.\d+)?(h|ms|m|s|us|ns))+$/.test(value)) return 10;
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, ns: 1e-9 };
  let total = 0;
  for (const [, n, , u] of value.matchAll(/(\d+(\.\d+)?)(h|ms|m|s|us|ns)/g)) total += Number(n) * unit[u!]!;
  return Math.ceil(total);
}

function healthError(message: string): HttpError {
  return new HttpError(502, 'HEALTH_CHECK_FAILED', `${message}; the old container keeps serving`);
}

/** The host pid of a container's first process, from the cgroups the kernel lists (null: not found or unreadable). */
async function containerPid(id: string): Promise<number | null> {
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return null;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const cgroup = await readFile(`/proc/${e}/cgroup`, 'utf8').catch(() => '');
    if (cgroup.includes(id)) return Number(e);
  }
  return null;
}

/**
 * Established TCP connections to a port the container listens on, from a peer other than itself (its own
 * healthcheck), read from its network namespace; null when unreadable.
 */
async function inboundConnections(pid: number): Promise<number | null> {
  const rows: string[][] = [];
  let read = false;
  for (const file of ['tcp', 'tcp6']) {
    const text = await readFile(`/proc/${pid}/net/${file}`, 'utf8').catch(() => null);
    if (text === null) continue;
    read = true;
    for (const line of text.split('\n').slice(1)) if (line.trim()) rows.push(line.trim().split(/\s+/));
  }
  if (!read) return null;
  const port = (addr: string) => addr.slice(addr.lastIndexOf(':') + 1);
  const listening = new Set(rows.filter((r) => r[3] === '0A').map((r) => port(r[1]!)));
  const loopback = (addr: string) => /^0100007F:|^0000000000000000FFFF00000100007F:|^00000000000000000000000001000000:/.test(addr);
  return rows.filter((r) => r[3] === '01' && listening.has(port(r[1]!)) && !loopback(r[2]!)).length;
}
