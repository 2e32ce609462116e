/**
 * The observability app process: collector loop, rollups and retention, alert evaluation, health watcher, and the
 * HTTP server behind `/api/plugin/observability/`. State lives in the app data folder and survives restarts.
 */
import { join } from 'node:path';
import { appEnvironment, onAgentGone } from '@agent/sdk/app';
import { routes } from '../app-routes.js';
import { AgentClient } from './agent-client.js';
import { AlertEngine } from './alerts.js';
import { Collector, type ContainerInfo } from './collector.js';
import { DockerClient, type EngineState } from './docker.js';
import { createHandlers } from './handlers.js';
import { HealthWatcher } from './health-watcher.js';
import { HostSampler } from './host-metrics.js';
import { KnownDeployments } from './known-deployments.js';
import { Journal } from './journal.js';
import { log } from './log.js';
import { SeriesStore } from './series-store.js';
import { createAppServer } from './server.js';
import { Settings, type StaticConfig } from './settings.js';

const env = appEnvironment();
const section = (env.config.observability ?? {}) as StaticConfig;
const settings = new Settings(env.dataDir, section);
const config = () => settings.get();

const store = new SeriesStore(join(env.dataDir, 'series.sqlite'));
const journal = new Journal(join(env.dataDir, 'events.sqlite'), () => config().alerts.events_max);
const docker = new DockerClient(config().docker_socket);
const agent = new AgentClient(env.agentUrl, env.agentToken, log);
const collector = new Collector(
  docker,
  new HostSampler(config().disk_path || env.dataDir),
  store,
  () => ({ labels: config().container_labels, concurrency: config().stats_concurrency }),
  log,
);

// What hangs on a deleted deployment's name does not pass to a new deployment of that name (the agent tells which
// deployments were deleted; see known-deployments.ts): its alert rules and alert states go, as does its containers'
// metric history and the watcher's counts; its alert and health events stay under the retired name (global only).
const known = new KnownDeployments(agent, log, env.dataDir, (deletion) => {
  const rules = alerts.removeDeployment(deletion.name, deletion.deleted_at);
  const events = journal.retireDeployment(deletion.name, deletion.retired_as, new Date(deletion.deleted_at).toISOString());
  const series = store.forgetDeployment(deletion.name, deletion.deleted_at / 1000);
  watcher.forgetDeployment(deletion.name);
  log.info('a deleted deployment was retired', { deployment: deletion.name, retired_as: deletion.retired_as, rules, events, series });
});
const managed = (deployment: string | null) => config().health.scope === 'all' || known.has(deployment);

const restart = async (containerId: string, name: string, deployment: string | null, reason: string) => {
  try {
    await known.ensure([deployment]);
    if (!managed(deployment)) throw new Error('not a container of a deployment of this agent (health.scope is deployments)');
    await agent.restartContainer(containerId);
    journal.addHealthEvent({ container: name, deployment, action: 'restarted', attempt: 0, message: `${name} restarted: ${reason}` });
  } catch (err) {
    journal.addHealthEvent({
      container: name,
      deployment,
      action: 'restart_failed',
      attempt: 0,
      message: `restarting ${name} failed (${reason}): ${(err as Error).message}`,
    });
  }
};
/** Alert actions run with their rule creator's rights of the moment, as the agent tells them. */
const authorize = async (creator: string | null, deployment: string | null): Promise<string | null> => {
  if (!creator)
    return 'the rule has no recorded creator (written before alert actions were checked against their creator): write it again to run its action with your rights';
  try {
    return await agent.actionRefusal(creator, deployment);
  } catch (err) {
    return `the rights of its creator could not be checked (${(err as Error).message})`;
  }
};
const alerts = new AlertEngine(env.dataDir, journal, { notify: (m) => agent.notify(m), restart, authorize }, log, () => config().health.cooldown * 1000);
const watcher = new HealthWatcher(
  journal,
  { restart: (id) => agent.restartContainer(id), notify: (m) => agent.notify(m) },
  () => config().health,
  log,
  managed,
);

/** The watcher needs to know which projects are this agent's deployments before it looks at them. */
async function checkHealth(list: ContainerInfo[]): Promise<void> {
  if (config().health.scope === 'deployments') await known.ensure(list.filter((c) => c.health === 'unhealthy').map((c) => c.deployment));
  watcher.check(list);
}

const stopping = new AbortController();
let timer: NodeJS.Timeout | null = null;

async function round(): Promise<void> {
  try {
    if (await collector.tick()) {
      await known.ensure();
      // Deletions are applied within seconds: a new deployment of the same name must not meet the old rules.
      await known.sync(5_000);
      alerts.evaluate(collector);
      // Only on a list the engine gave this round: a container list of the past must not get anything restarted.
      if (collector.listFresh) await checkHealth(collector.containers);
    }
  } catch (err) {
    // Not the engine's doing (the collector takes its failures in its stride): a fault of the app, with its stack.
    log.error('collection round failed', { error: String((err as Error)?.stack ?? err) });
  }
}

function schedule(): void {
  if (timer) clearInterval(timer);
  timer = setInterval(() => void round(), config().sample_interval * 1000);
}
settings.onChange(() => schedule());

// Engine health events: react now rather than at the next round.
let pending: NodeJS.Timeout | null = null;
docker.followEvents((e) => {
  if (!e.Action.startsWith('health_status') || pending) return;
  pending = setTimeout(() => {
    pending = null;
    collector
      .refreshContainers()
      .then(
        (list) => checkHealth(list),
        () => undefined, // no list from the engine: the client reported it, the next round tries again
      )
      .catch((err: unknown) => log.error('health check failed', { error: String(err) }));
  }, 200);
}, stopping.signal);
// The docker plugin warns about a missing engine (once, naming the routes that answer 503); the app only says
// what it means for metrics, once per outage. An engine that answers without a container list is the app's to
// tell (the docker plugin's ping still works): a warning, once until it lists again.
let engineState: EngineState | null = null;
docker.onState((state, error) => {
  const socket = docker.socketPath;
  if (state === 'away')
    log.info('container metrics and the health watcher wait for the Docker engine (it does not answer); they resume when it does', { socket, error });
  else if (state === 'failing')
    log.warn('the Docker engine answers without a container list: container metrics and the health watcher wait until it lists again', { socket, error });
  else if (engineState !== null) log.info('the Docker engine answers again: container metrics and the health watcher resume', { socket });
  engineState = state;
});

function housekeep(): void {
  try {
    store.rollup();
    store.prune(config().raw_retention, config().rollup_retention);
  } catch (err) {
    log.error('rollup failed', { error: String(err) });
  }
}
const housekeeping = setInterval(housekeep, 60_000);
// Catch up soon after a start (the app may have been down across minute boundaries).
setTimeout(housekeep, 5000).unref();

const server = createAppServer(env, routes, createHandlers({ collector, store, alerts, journal, watcher, settings, deletions: known }), log);
server.keepAliveTimeout = 65_000;
server.listen(env.port, env.host, () => {
  log.info('observability app listening', { port: env.port });
  schedule();
  void round();
});

const shutdown = () => {
  stopping.abort();
  if (timer) clearInterval(timer);
  clearInterval(housekeeping);
  server.close();
  server.closeAllConnections();
  try {
    store.rollup();
  } finally {
    store.close();
    journal.close();
  }
  process.exit(0);
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
onAgentGone(() => {
  log.warn('the agent is gone: stopping');
  shutdown();
});
