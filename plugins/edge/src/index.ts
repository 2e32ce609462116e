/**
 * edge: everything between the internet and the deployments. Domains and the nginx reverse proxy, ACME
 * certificates, security rules enforced in nginx and security events detected from its traffic, the traffic
 * journal, and the host's system logs.
 */
import { join } from 'node:path';
import { definePlugin, deploymentsService, dockerService, type PluginContext } from '@agent/sdk';
import { EdgeConfig } from './config.js';
import { Edge } from './edge.js';
import { emptyState } from './state.js';
import { CertStore } from './certs/store.js';
import { domainRoutes } from './proxy/domains.js';
import { proxyRoutes } from './proxy/routes.js';
import type { Runtime } from './runtime.js';

let runtime: Runtime | null = null;
const starters: (() => void | Promise<void>)[] = [];
const stoppers: (() => void | Promise<void>)[] = [];

export default definePlugin({
  name: 'edge',
  version: '0.1.0',
  description: 'Domains and nginx reverse proxy, ACME certificates, security enforcement and events, traffic journal, system logs',
  config: EdgeConfig,
  resources: {
    proxy: { description: 'domains, reverse-proxy configuration and virtual hosts', operator: 'write', viewer: 'read' },
    certificates: { description: 'TLS certificates (ACME)', operator: 'write', viewer: 'read' },
    security: { description: 'blocked IPs, whitelist, protected routes, security events and settings', operator: 'write', viewer: 'read' },
    traffic: { description: 'the traffic journal of the proxy', operator: 'write', viewer: 'read' },
    'system-logs': { description: 'host log sources: proxy logs and infrastructure containers', operator: 'read', viewer: 'none' },
  },
  requires: [deploymentsService],
  optional: [dockerService],

  async setup(ctx: PluginContext<EdgeConfig>) {
    const doc = await ctx.store.document(emptyState());
    const certs = new CertStore(join(ctx.dataDir, 'certs'), ctx.config.certificates.renew_before_days);
    const edge = new Edge(doc, ctx.config, certs, () => ctx.services.optional(deploymentsService), ctx.log);
    const rt: Runtime = {
      ctx, edge,
      deployments: () => ctx.services.get(deploymentsService),
      docker: () => ctx.services.optional(dockerService),
      ensureCertificates: () => undefined,
    };
    runtime = rt;
    const domains = domainRoutes(rt);
    proxyRoutes(rt, domains);

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
    ctx.events.on('deployment.deleted', async ({ name }) => {
      if (!edge.state.domains.some((d) => d.deployment === name) && !edge.state.protected.some((p) => p.deployment === name) && !edge.state.deployment_security[name]) return;
      await edge.mutate((draft) => {
        draft.domains = draft.domains.filter((d) => d.deployment !== name);
        draft.protected = draft.protected.filter((p) => p.deployment !== name);
        delete draft.deployment_security[name];
        draft.blocked = draft.blocked.filter((b) => b.deployment !== name);
      });
      ctx.log.info('removed the vhosts of a deleted deployment', { deployment: name });
    });
    ctx.onClose(() => {
      if (timer) clearTimeout(timer);
    });

    starters.push(async () => {
      // Bring the files in line with the state (the agent may have been upgraded or the files edited).
      try {
        await edge.mutate(() => undefined, { force: true });
      } catch (err) {
        ctx.log.error('initial proxy configuration failed', { error: (err as Error).message });
      }
    });
  },

  async start() {
    for (const s of starters) await s();
  },

  async stop() {
    for (const s of stoppers.reverse()) await s();
    runtime = null;
  },
});
