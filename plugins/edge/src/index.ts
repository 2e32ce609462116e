/**
 * edge: everything between the internet and the deployments. Domains and the nginx reverse proxy, ACME
 * certificates, security rules enforced in nginx and security events detected from its traffic, the traffic
 * journal, and the host's system logs.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { definePlugin, isHttpError, optional, type PluginContext } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { dockerService } from '@agent/plugin-docker/api';
import { NGINX_FIX } from './nginx/apply.js';
import { edgeChecks } from './doctor.js';
import { EdgeConfig } from './config.js';
import { Edge } from './edge.js';
import { emptyState } from './state.js';
import { CertStore } from './certs/store.js';
import { domainRoutes } from './proxy/domains.js';
import { proxyRoutes } from './proxy/routes.js';
import type { Runtime } from './runtime.js';
import { systemLogRoutes } from './syslogs/routes.js';
import { AcmeIssuer } from './certs/acme.js';
import { Certificates, certificateRoutes } from './certs/routes.js';
import { SecuritySettings } from './config.js';
import { TrafficJournal } from './traffic/journal.js';
import { trafficRoutes } from './traffic/routes.js';
import { Capture } from './traffic/capture.js';
import { SecurityEvents } from './security/events.js';
import { Blocks } from './security/rules.js';
import { securityRoutes } from './security/routes.js';
import { retirement } from './retire.js';

export default definePlugin({
  name: 'edge',
  version: '0.1.0',
  description: 'Domains and nginx reverse proxy, ACME certificates, security enforcement and events, traffic journal, system logs',
  config: EdgeConfig,
  resources: {
    proxy: { description: 'domains, reverse-proxy configuration and virtual hosts', operator: 'write', viewer: 'read', owner: 'deployment' },
    certificates: {
      description: "TLS certificates (ACME): those of a deployment's domains are its own; renewal of all and names no deployment uses are global",
      operator: 'write',
      viewer: 'read',
      owner: 'both',
    },
    security: {
      description:
        'protected routes, blocks tied to a deployment and its security events (deployment-owned); whitelist, other blocks, capture and settings (global)',
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

  async setup(ctx: PluginContext<EdgeConfig>, deps) {
    const doc = await ctx.store.document(emptyState());
    const certs = new CertStore(join(ctx.dataDir, 'certs'), ctx.config.certificates.renew_before_days);
    const edge = new Edge(doc, ctx.config, certs, () => deps.deployments, ctx.log);
    const rt: Runtime = {
      ctx,
      edge,
      deployments: () => deps.deployments,
      docker: () => deps.docker,
      ensureCertificates: () => undefined,
    };
    for (const check of edgeChecks(ctx.config, edge.applier)) ctx.doctor(check);
    const issuer = new AcmeIssuer(ctx.config.certificates, ctx.dataDir, edge.layout.webroot, ctx.log);
    const certificates = new Certificates(rt, issuer);
    rt.ensureCertificates = (reason) => certificates.ensure(reason);
    certificateRoutes(rt, certificates);
    const domains = domainRoutes(rt);
    proxyRoutes(rt, domains);

    const settings = ctx.settings(SecuritySettings);
    // Traffic and security events are read from nginx's logs, from a position kept in the same journal: after a
    // host crash they are read again, so no request waits for this journal to reach the disk.
    const db = ctx.store.journal('journal', { syncBeforeAck: false });
    const journal = new TrafficJournal(db);
    const events = new SecurityEvents(db);
    const blocks = new Blocks(rt);
    const capture = new Capture(rt, journal, events, blocks, settings);
    securityRoutes(rt, blocks, events, settings, () => capture.reader.readNew());
    trafficRoutes(rt, journal);
    systemLogRoutes(rt);
    settings.onChange(() => capture.applyMode());
    ctx.job({
      name: 'traffic-scan',
      cron: ctx.config.traffic.scan_cron,
      description: 'reads new access-log lines when real-time capture is off',
      run: async (run) => {
        if (capture.reader.following) return run.output('real-time capture is on: nothing to do');
        run.output(`${await capture.reader.readNew()} requests ingested`);
      },
    });
    ctx.job({
      name: 'retention',
      cron: '41 4 * * *',
      description: 'removes traffic records and security events past their retention',
      run: (run) => {
        const traffic = journal.cleanup(Date.now() - ctx.config.traffic.retention_days * 86_400_000);
        const ev = events.cleanup(Date.now() - settings.get().event_retention_days * 86_400_000);
        run.output(`${traffic} traffic records and ${ev} security events removed`);
      },
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
    ctx.events.on('container.state', (e) => {
      if (e.deployment && edge.state.domains.some((d) => d.deployment === e.deployment)) refreshSoon();
    });
    // Called synchronously from the event: the removal takes its place in the apply queue before anything a new
    // deployment of the same name could change (see retire.ts).
    const retire = retirement(rt, journal, events, () => capture.reader.readNew());
    ctx.events.on('deployment.deleted', ({ name, retired_as }) => retire(name, retired_as));
    ctx.onClose(() => {
      if (timer) clearTimeout(timer);
    });

    return {
      async start() {
        await mkdir(edge.layout.webroot, { recursive: true, mode: 0o755 });
        // Bring the files in line with the state (the agent may have been upgraded or the files edited). In the
        // background: nginx being slow or down must not hold the agent's start-up (the queue orders later changes).
        edge
          .mutate(() => undefined, { force: true })
          .catch((err) => {
            if (isHttpError(err) && err.code === 'NGINX_UNAVAILABLE') {
              ctx.log.warn('nginx is not installed: routes that change the proxy configuration answer 503 NGINX_UNAVAILABLE until it is', {
                routes: [
                  '/api/deployments/:name/domains (add, update, remove)',
                  '/api/proxy (setup, remove)',
                  '/api/certificates',
                  '/api/security (blocked IPs, whitelist, protected routes, refresh)',
                ],
                fix: NGINX_FIX,
              });
            } else ctx.log.error('initial proxy configuration failed', { error: (err as Error).message });
          });
        certificates.ensure('start');
        blocks.schedule();
        capture.applyMode();
      },
      stop() {
        capture.stop();
        blocks.stop();
      },
    };
  },
});
