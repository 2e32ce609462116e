/**
 * The composition root: builds the core services (in the agent's service directory, which also carries the
 * services plugins provide), loads the plugins, serves HTTP and websockets, and stops everything in order.
 */
import { createServer, type Server } from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { appDirectory, coreServices, errors, principalDirectory, type AppDirectory, type AuthKernel, type EventBus, type PrincipalDirectory } from '@agent/sdk';
import { REPO_ROOT, type LoadedConfig } from './config/config.js';
import { createRootLogger, flushLogs, resolveLogFormat, sdkLogger } from './log.js';
import { loadSecrets } from './store/secrets.js';
import { openDocument } from './store/documents.js';
import { JournalSync, openJournal } from './store/journal.js';
import { lockDataDir } from './store/data-dir-lock.js';
import { AgentEventBus } from './events/bus.js';
import { AuditWriter } from './audit.js';
import { ResourceCatalog } from './auth/resources.js';
import { TokenService } from './auth/tokens.js';
import { LiveConnections } from './auth/live.js';
import { RouteRegistry } from './openapi/registry.js';
import { PlanEngine, type PlansDoc } from './plans/engine.js';
import { CoreScheduler } from './scheduler/scheduler.js';
import { SettingsStore, type SettingsDoc } from './settings/registry.js';
import { PluginHost, type InlinePlugin } from './plugins/host.js';
import { ServiceDirectory } from './plugins/services.js';
import { createPluginProxy } from './plugins/proxy.js';
import { clientIp, createHttpApp } from './http/app.js';
import { createSocketServer } from './http/websocket.js';
import { refuseUpgrade } from './http/respond.js';
import { coreRoutes } from './http/core-routes.js';

export interface RunningAgent {
  url: string;
  /** What the kernel and the plugins provide, and the event bus: the in-process test harness (`@agent/testing`) reads them. */
  services: ServiceDirectory;
  events: EventBus;
  stop(): Promise<void>;
}

/** What only a caller in the same process can give: plugins as definitions, set up with the enabled ones (`@agent/testing`). */
export interface AgentExtras {
  plugins?: InlinePlugin[];
  /** Holds every answer to its route's declared schema (default: `AGENT_VALIDATE_RESPONSES=1`, as the tests set it). */
  validateResponses?: boolean;
}

export const VERSION: string = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

export async function startAgent(
  loaded: LoadedConfig,
  print: (line: string) => void = (l) => process.stdout.write(l + '\n'),
  extras: AgentExtras = {},
): Promise<RunningAgent> {
  const startedAt = Date.now();
  const { core } = loaded;
  mkdirSync(core.data_dir, { recursive: true, mode: 0o700 });
  const lock = lockDataDir(core.data_dir);
  const root = await createRootLogger(core.log.level, core.log.format);
  const log = sdkLogger(root, { component: 'core' });
  const { jwtKey, sealer } = loadSecrets(core.data_dir);
  const coreDir = join(core.data_dir, 'core');

  const journal = openJournal(join(coreDir, 'journal.sqlite'));
  const bus = new AgentEventBus(log);
  const catalog = new ResourceCatalog();
  for (const [name, description, owner] of [
    ['plans', 'plans: preview and apply changes', 'both'],
    ['plugins', 'the plugin list; write = create deployments from plugins', 'global'],
  ] as const) {
    catalog.declare({ name, description, operator: 'write', viewer: 'read', owner, plugin: 'core' });
  }
  const tokens = new TokenService(jwtKey, core.auth.token_ttl);
  // Users and keys live in a plugin (the principal directory); the kernel lends it signing and the catalogue.
  const auth: AuthKernel = {
    issueToken: (sub, version, options) => tokens.issue(sub, version, options?.notAfter, options?.ttlSeconds),
    verifyToken: (token) => tokens.verify(token),
    resources: catalog,
    settings: { admin_password: core.admin_password, ...core.auth },
    // A person at a terminal reads a banner; a pipe, a file or the journal gets one record (JSON lines), at info
    // whatever log.level says: the operator needs it once and gets it nowhere else.
    announce: ({ event, message, fields, banner }) => {
      if (resolveLogFormat(core.log.format) === 'pretty' && process.stdout.isTTY === true) for (const line of banner) print(line);
      else root.child({ plugin: 'access' }, { level: 'info' }).info({ event, ...fields }, message);
    },
  };
  const registry = new RouteRegistry();
  const plans = new PlanEngine(
    await openDocument<PlansDoc>(join(coreDir, 'plans.json.enc'), { plans: [] }, sealer),
    core.plans.ttl,
    (id) => registry.byOperationId(id),
    (id) => services.get<PrincipalDirectory>(principalDirectory.id)!.principalById(id),
  );
  await plans.recover();
  const scheduler = new CoreScheduler(journal, sdkLogger(root, { component: 'scheduler' }));
  const settings = new SettingsStore(await openDocument<SettingsDoc>(join(coreDir, 'settings.json'), { values: {} }), bus);

  const services = new ServiceDirectory();
  services.provide(coreServices.auth.id, auth, 'core');
  services.provide(coreServices.settings.id, settings, 'core');
  const journalSync = new JournalSync();
  const audit = new AuditWriter(services, journalSync, log);

  let url = '';
  const host = new PluginHost({
    root,
    bus,
    scheduler,
    registry,
    catalog,
    settings,
    services,
    audit,
    journalSync,
    sealer,
    agent: { version: VERSION, dataDir: core.data_dir, url: () => url },
  });
  services.provide(coreServices.plugins.id, host.directory(), 'core');
  await host.load(core.plugins.enabled, core.plugins.builtin_dir, loaded.baseDir, loaded.sections, extras.plugins);
  const principals = services.get<PrincipalDirectory>(principalDirectory.id);
  if (!principals) {
    const reasons = host.failed().map((p) => `${p.name}: ${p.error}`);
    throw new Error(
      `no plugin provides the principal directory ('${principalDirectory.id}'), so no request could be authenticated` +
        (reasons.length ? ` (failed plugins: ${reasons.join('; ')})` : ''),
    );
  }
  // App processes are a plugin's (apps, always loaded), looked up at each use: without it every app reads as not
  // running.
  const apps: AppDirectory = { state: (name) => services.get<AppDirectory>(appDirectory.id)?.state(name) };
  // The audit journal is a plugin's (access, always loaded): the kernel writes every record there from now on.
  audit.connect(
    () =>
      host
        .failed()
        .map((p) => `${p.name}: ${p.error}`)
        .join('; ') || 'none failed',
  );

  registry.commit(coreRoutes({ version: VERSION, startedAt, catalog, audit, plans, registry, host, apps }).map((spec) => registry.prepareRoute('core', spec)));

  await host.start();
  // Plans applied or expired a week ago are dropped, hourly (the kernel's only job: armed here, as the host arms
  // each plugin's once it started).
  const coreJobs = scheduler.forPlugin('core');
  coreJobs.job({ name: 'plans.purge', cron: '17 * * * *', run: () => plans.purge() });
  coreJobs.startAll();

  // Websockets, streamed answers and proxied requests outlive their checks: when the principal directory says whose
  // rights changed, theirs are checked again and those that no longer pass are ended.
  const live = new LiveConnections(principals);
  bus.on('principals.changed', ({ user_ids }) => live.recheck(user_ids));
  const proxy = createPluginProxy({ registry, principals, apps, audit, live, log: root });
  const app = createHttpApp({
    config: core,
    log: root,
    principals,
    registry,
    plans,
    audit,
    live,
    proxy: (req, res, ip, query) => proxy.http(req, res, ip, query),
    validateResponses: extras.validateResponses ?? process.env.AGENT_VALIDATE_RESPONSES === '1',
  });
  const sockets = createSocketServer(registry, principals, live, root);
  // Keep-alive longer than clients' own idle timeouts (undici: 4 s), so a client never reuses a connection the
  // agent is closing at that moment.
  const server: Server = createServer({ requestTimeout: 3600_000, keepAliveTimeout: 65_000 }, app.callback());
  server.headersTimeout = 66_000;
  server.on('upgrade', (req, socket, head) => {
    // The same client address as on HTTP: an API key's last use and the audit name the client, not the proxy.
    const ip = clientIp(req, core.api.trust_proxy);
    if (sockets.upgrade(req, socket, head, ip) || proxy.upgrade(req, socket, head, ip)) return;
    refuseUpgrade(socket, errors.notFound('no websocket endpoint here'));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(core.listen.port, core.listen.host, () => resolve());
  });
  const address = server.address() as { address: string; port: number; family: string };
  url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;

  const memory = process.memoryUsage();
  const mb = (bytes: number) => Math.round(bytes / 1048576);
  root.info(
    {
      url,
      version: VERSION,
      ms: Date.now() - startedAt,
      memory_mb: { rss: mb(memory.rss), heap_used: mb(memory.heapUsed), heap_total: mb(memory.heapTotal), external: mb(memory.external) },
      plugins: host.running().map((p) => p.name),
      failed: host.failed().map((p) => p.name),
    },
    'agent ready',
  );
  bus.emit('agent.ready', { url });

  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      root.info('shutting down');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      sockets.close();
      // Keep-alive connections are closed as soon as their in-flight request is answered; 10 s at most.
      const idle = setInterval(() => server.closeIdleConnections(), 50);
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), 10_000);
      await closed;
      clearInterval(idle);
      clearTimeout(force);
      proxy.close();
      live.close();
      await host.stop();
      scheduler.stop();
      journal.close();
      journalSync.close();
      lock.release();
      root.info('stopped');
      await flushLogs(root);
    })());
  return { url, services, events: bus, stop };
}
