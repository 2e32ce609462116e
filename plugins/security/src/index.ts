/**
 * security: rules enforced in the proxy (blocked addresses, whitelist, basic-auth protected routes, per-deployment
 * blocks, closed paths and rate limits) and events detected from its traffic (scans, auth failures, attack paths,
 * blocked-address hits, request rates), with automatic blocks. It reaches nginx only through the edge's contracts:
 * its rules are snippets it contributes (`proxyExtensions`), its events come from the records of `trafficStream`.
 * Without this plugin the proxy serves the same sites with none of these rules.
 */
import { definePlugin, retiredName } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { proxyExtensions, trafficStream } from '@agent/plugin-edge/api';
import { SecuritySettings } from './config.js';
import { Detection } from './detection.js';
import { SecurityEvents } from './events.js';
import { takeOver } from './migrate.js';
import { SecurityQueries } from './queries.js';
import { snippets } from './render.js';
import { Rules } from './rules.js';
import type { SecurityRuntime } from './runtime.js';
import { emptyState, forget, holds, type SecurityState } from './state.js';
import { blockedIpOperations } from './operations/blocked-ips.js';
import { whitelistOperations } from './operations/whitelist.js';
import { protectedRouteOperations } from './operations/protected-routes.js';
import { deploymentSecurityOperations } from './operations/deployment-security.js';
import { settingsOperations } from './operations/settings.js';
import { blockedIpRoutes } from './routes/blocked-ips.js';
import { whitelistRoutes } from './routes/whitelist.js';
import { protectedRouteRoutes } from './routes/protected-routes.js';
import { deploymentSecurityRoutes } from './routes/deployment-security.js';
import { settingsRoutes } from './routes/settings.js';
import { eventRoutes } from './routes/events.js';

export default definePlugin({
  name: 'security',
  version: '0.1.0',
  description: 'Blocked addresses, whitelist, protected routes and per-deployment rules enforced in the proxy; security events and auto-block',
  resources: {
    security: {
      description:
        'protected routes, blocks tied to a deployment and its security events (deployment-owned); whitelist, other blocks, capture and settings (global)',
      operator: 'write',
      viewer: 'read',
      owner: 'both',
    },
  },
  deps: { proxy: proxyExtensions, traffic: trafficStream, deployments: deploymentsService },

  async setup(ctx, deps) {
    const doc = await ctx.store.document(emptyState());
    const settings = ctx.settings(SecuritySettings);
    // Events are derived from nginx's log, with the position they reach: after a host crash the edge reads its
    // lines again, so no request waits for this journal to reach the disk.
    const events = new SecurityEvents(ctx.store.journal('journal', { syncBeforeAck: false }));
    // Before the edge's start (its first render, its first read of the log): see migrate.ts.
    await takeOver(deps.proxy.legacySecurity(), doc, settings, events, ctx.log);
    const proxy = deps.proxy.contribute<SecurityState>({
      name: 'security',
      state: () => doc.data,
      snippets,
      save: (draft) => doc.update((d) => void Object.assign(d, draft)),
      forget,
    });
    const rules = new Rules(() => doc.data, proxy, ctx.events, ctx.log);
    const rt: SecurityRuntime = { rules, events, settings, traffic: deps.traffic, deployments: deps.deployments };
    const queries = new SecurityQueries(rt);
    const settingOps = settingsOperations(rt);
    blockedIpRoutes(ctx, queries, blockedIpOperations(rt));
    whitelistRoutes(ctx, queries, whitelistOperations(rt));
    protectedRouteRoutes(ctx, rules, queries, protectedRouteOperations(rt));
    deploymentSecurityRoutes(ctx, queries, deploymentSecurityOperations(rt));
    settingsRoutes(ctx, queries, settingOps);
    eventRoutes(ctx, queries, settingOps);

    const detection = new Detection(events, rules, settings, ctx.log);
    const unsubscribe = deps.traffic.subscribe(detection);
    settings.onChange((s) => deps.traffic.capture.setRealtime(s.realtime_capture));
    ctx.job({
      name: 'retention',
      cron: '43 4 * * *',
      description: 'removes security events past their retention',
      run: (run) => run.output(`${events.cleanup(Date.now() - settings.get().event_retention_days * 86_400_000)} security events removed`),
    });

    /**
     * What happened while this plugin was not loaded: rules of deployments deleted meanwhile go, and their events
     * (those from before the current deployment of the name was created) are kept under a retired name, as the
     * `deployment.deleted` handlers of both plugins do when it runs.
     */
    const reconcile = async () => {
      const gone = [...new Set([...doc.data.protected, ...doc.data.blocked].map((r) => r.deployment).concat(Object.keys(doc.data.deployment_security)))].filter(
        (name): name is string => !!name && !deps.deployments.get(name) && holds(doc.data, name),
      );
      if (gone.length) await proxy.mutate((draft) => gone.forEach((name) => forget(draft, name)));
      for (const name of events.deployments()) {
        const current = deps.deployments.get(name);
        const until = current ? Date.parse(current.created_at) - 1 : Date.now();
        if (Number.isFinite(until)) events.retire(name, retiredName(name, new Date()), until);
      }
    };

    return {
      async start() {
        deps.traffic.capture.setRealtime(settings.get().realtime_capture);
        // In the background, like the edge's own first render: nginx being slow or down must not hold the start.
        reconcile().catch((err) => ctx.log.warn('rules of deleted deployments not reconciled', { error: (err as Error).message }));
        rules.schedule();
      },
      stop() {
        // The edge stops after this plugin: its follower would read lines whose events no one records (their rows
        // committed, they are not read again). Left to the periodic job until then, and unobserved.
        deps.traffic.capture.setRealtime(false);
        unsubscribe();
        rules.stop();
      },
    };
  },
});
