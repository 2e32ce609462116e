/**
 * edge: everything between the internet and the deployments. Domains and the nginx reverse proxy, ACME
 * certificates, the traffic journal, and the host's system logs. Other plugins add to the proxy configuration
 * through `proxyExtensions` and observe the traffic through `trafficStream` (see api.ts): the security plugin does.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { definePlugin, isHttpError, optional, type PluginContext } from '@agent/sdk';
import { deploymentsService, deploymentUpstreams, type DeploymentUpstreams } from '@agent/plugin-deployments/api';
import { dockerService } from '@agent/plugin-docker/api';
import { proxyExtensions, trafficStream, type ProxyExtensions } from './api.js';
import { NGINX_FIX } from './nginx/apply.js';
import { edgeChecks } from './doctor.js';
import { EdgeConfig } from './config.js';
import { resolveProxy } from './settings.js';
import { Edge } from './edge.js';
import { emptyState } from './state.js';
import { CertStore } from './certs/store.js';
import { AcmeIssuer } from './certs/acme.js';
import { Certificates, renewalJob } from './certs/certificates.js';
import { Domains } from './proxy/domains.js';
import type { Runtime } from './runtime.js';
import { TrafficJournal } from './traffic/journal.js';
import { TrafficQueries } from './traffic/queries.js';
import { Traffic } from './traffic/stream.js';
import { SystemLogs } from './syslogs/sources.js';
import { domainOperations } from './operations/domains.js';
import { proxyOperations } from './operations/proxy.js';
import { certificateOperations } from './operations/certificates.js';
import { trafficOperations } from './operations/traffic.js';
import { domainRoutes } from './routes/domains.js';
import { proxyRoutes } from './routes/proxy.js';
import { certificateRoutes } from './routes/certificates.js';
import { trafficRoutes } from './routes/traffic.js';
import { systemLogRoutes } from './routes/system-logs.js';
import { legacySecurity } from './legacy.js';
import { retirement } from './retire.js';

export default definePlugin({
  name: 'edge',
  version: '0.1.0',
  description: 'Domains and nginx reverse proxy, ACME certificates, traffic journal, system logs; proxy extensions and the traffic stream',
  config: EdgeConfig,
  resources: {
    proxy: { description: 'domains, reverse-proxy configuration and virtual hosts', operator: 'write', viewer: 'read', owner: 'deployment' },
    certificates: {
      description: "TLS certificates (ACME): those of a deployment's domains are its own; renewal of all and names no deployment uses are global",
      operator: 'write',
      viewer: 'read',
      owner: 'both',
    },
    traffic: {
      description: "the traffic journal of the proxy (a deployment's rows are its own; unknown hosts and cleanup are global)",
      operator: 'write',
      viewer: 'read',
      owner: 'deployment',
    },
    'system-logs': { description: 'host log sources: proxy logs and infrastructure containers', operator: 'read', viewer: 'none', owner: 'global' },
  },
  deps: { deployments: deploymentsService, docker: optional(dockerService) },
  provides: { proxy: proxyExtensions, traffic: trafficStream, upstreams: deploymentUpstreams },

  async setup(ctx: PluginContext<EdgeConfig>, deps) {
    const doc = await ctx.store.document(emptyState());
    const certs = new CertStore(join(ctx.dataDir, 'certs'), ctx.config.certificates.renew_before_days);
    // Which nginx: the agent's own instance (the default) or the host's; a conflicting configuration stops the plugin here.
    const proxySettings = resolveProxy(ctx.config.proxy, ctx.dataDir);
    const edge = new Edge(doc, ctx.config, proxySettings, certs, () => deps.deployments, ctx.log);
    const rt: Runtime = { ctx, edge, deployments: () => deps.deployments, docker: () => deps.docker, ensureCertificates: () => undefined };
    for (const check of edgeChecks(edge, ctx.config.certificates)) ctx.doctor(check);
    const certificates = new Certificates(rt, new AcmeIssuer(ctx.config.certificates, ctx.dataDir, edge.layout.webroot, ctx.log));
    rt.ensureCertificates = (reason) => certificates.ensure(reason);
    const domains = new Domains(rt);
    domainRoutes(ctx, domains, domainOperations(rt, domains));
    proxyRoutes(ctx, rt, proxyOperations(rt, domains));
    certificateRoutes(ctx, certificates, certificateOperations(rt, certificates));
    renewalJob(ctx, certificates);

    // Traffic is read from nginx's log, from a position kept in the same journal: after a host crash it is read
    // again, so no request waits for this journal to reach the disk.
    const db = ctx.store.journal('journal', { syncBeforeAck: false });
    const journal = new TrafficJournal(db);
    const traffic = new Traffic(edge.layout.accessLog, journal, ctx.config.traffic.follow_interval_ms, ctx.log);
    const legacy = legacySecurity(ctx, doc, db, (fn) => edge.applier.exclusive(fn));
    // Until a security plugin takes it over, the capture mode an older edge was set to stays in force.
    const legacyCapture = legacy?.()?.settings.realtime_capture;
    if (typeof legacyCapture === 'boolean') traffic.capture.setRealtime(legacyCapture);
    trafficRoutes(ctx, new TrafficQueries(rt, journal), trafficOperations(journal));
    systemLogRoutes(ctx, new SystemLogs(rt));
    ctx.job({
      name: 'traffic-scan',
      cron: ctx.config.traffic.scan_cron,
      description: 'reads new access-log lines when real-time capture is off',
      run: async (run) => {
        if (traffic.reader.following) return run.output('real-time capture is on: nothing to do');
        run.output(`${await traffic.readNew()} requests ingested`);
      },
    });
    ctx.job({
      name: 'retention',
      cron: '41 4 * * *',
      description: 'removes traffic records past their retention',
      run: (run) => run.output(`${journal.cleanup(Date.now() - ctx.config.traffic.retention_days * 86_400_000)} traffic records removed`),
    });

    // Upstream addresses follow the containers: re-render (a no-op when nothing moved) after lifecycle events.
    let timer: NodeJS.Timeout | null = null;
    const refreshSoon = () => {
      if (timer) return;
      timer = setTimeout(() => {
        timer = null;
        edge.mutate(() => undefined).catch((err) => ctx.log.warn('proxy refresh failed', { error: (err as Error).message }));
      }, 300);
    };
    for (const event of ['deployment.started', 'deployment.updated', 'deployment.stopped'] as const) ctx.events.on(event, refreshSoon);
    // A swarm task's state reaches the manager a moment after its container's event (a task is routed to once it
    // runs, see Edge.swarmUpstream): a second look catches a task the first render was too early for.
    let again: NodeJS.Timeout | null = null;
    const refreshAgain = () => {
      if (again) clearTimeout(again);
      again = setTimeout(() => {
        again = null;
        refreshSoon();
      }, 1500);
    };
    ctx.events.on('container.state', (e) => {
      if (!e.deployment || !edge.state.domains.some((d) => d.deployment === e.deployment)) return;
      refreshSoon();
      if (deps.deployments.get(e.deployment)?.runtime === 'swarm') refreshAgain();
    });
    // Called synchronously from the event: the removal takes its place in the apply queue before anything a new
    // deployment of the same name could change (see retire.ts).
    const retire = retirement(rt, journal, traffic);
    ctx.events.on('deployment.deleted', ({ name, retired_as }) => retire(name, retired_as));
    ctx.onClose(() => {
      if (timer) clearTimeout(timer);
      if (again) clearTimeout(again);
    });

    const proxy: ProxyExtensions = { contribute: (c) => edge.contribute(c), legacySecurity: () => legacy?.() ?? null };
    // Start-first redeploys switch a service's upstream by holding `serviceContainer` on the new container and
    // rendering again: the upstream follows it when nginx reaches containers on their networks, not through a
    // host port only one of them can publish.
    const upstreams: DeploymentUpstreams = {
      routed: (deployment) =>
        [...new Set(edge.state.domains.filter((d) => d.deployment === deployment).map((d) => d.service))].map((service) => ({
          service,
          unswitchable:
            ctx.config.proxy.upstream === 'published' ? 'the proxy reaches containers through published host ports (proxy.upstream: published)' : null,
        })),
      refresh: async () => {
        await edge.mutate(() => undefined);
      },
    };
    return {
      provides: { proxy, traffic, upstreams },
      async start() {
        const own = edge.own;
        if (own) {
          // Before the first render: its nginx.conf, a stale instance of a killed agent ended, its ports checked
          // (one in use stops the plugin here, with an error naming the port and its setting).
          const found = await own.prepare();
          edge.layout.holdHttps = found.rejectHandshake && edge.layout.defaultServer;
          // A master that ended on its own is started again through the queue (a no-op render, then the start).
          own.onUnexpectedExit = () =>
            void edge
              .mutate(() => undefined, { force: true })
              .catch((err) => ctx.log.error('the own nginx could not be started again', { error: (err as Error).message }));
        }
        ctx.log.info(`proxy: ${own ? 'own nginx instance' : "the host's nginx"}`, {
          mode: proxySettings.mode,
          why: proxySettings.reason,
          http_port: proxySettings.httpPort,
          https_port: proxySettings.httpsPort,
          ...(own ? { files: own.paths.prefix } : { config_dir: proxySettings.configDir }),
        });
        await mkdir(edge.layout.webroot, { recursive: true, mode: 0o755 });
        // Bring the files in line with the states (the agent may have been upgraded, a contributor enabled or
        // disabled, or the files edited). In the background: nginx being slow or down must not hold the agent's
        // start-up (the queue orders later changes).
        edge
          .mutate(() => undefined, { force: true })
          .catch((err) => {
            if (isHttpError(err) && err.code === 'NGINX_UNAVAILABLE') {
              ctx.log.warn('nginx is not installed: routes that change the proxy configuration answer 503 NGINX_UNAVAILABLE until it is', {
                routes: [
                  '/api/deployments/:name/domains (add, update, remove)',
                  '/api/proxy (setup, remove)',
                  '/api/certificates',
                  ...edge.contributorNames().map((name) => `the changes of the ${name} plugin`),
                ],
                fix: NGINX_FIX,
              });
            } else ctx.log.error('initial proxy configuration failed', { error: (err as Error).message });
          });
        certificates.ensure('start');
        traffic.start();
      },
      async stop() {
        traffic.stop();
        // Never left behind: the own instance stops with the agent.
        await edge.own?.stop();
      },
    };
  },
});
