/**
 * deployments: compose deployments in `<deployments.path>/<name>/`: lifecycle through the `docker` service,
 * plannable mutations, logs (HTTP and websocket), log sources, stats, the host-safety policy and templates.
 * Provides the `deployments` service for the other plugins.
 */
import { isAbsolute, join, resolve, sep } from 'node:path';
import { coreServices, definePlugin, optional, principalDirectory, Type } from '@agent/sdk';
import { deploymentsService, deploymentUpstreams } from './api.js';
import { dockerService } from '@agent/plugin-docker/api';
import { jobsService } from '@agent/plugin-jobs/api';
import { backupsService } from './deploy/backups.js';
import { deployStrategies } from './deploy/strategies.js';
import { Revisions } from './revisions.js';
import { Hooks } from './hooks.js';
import { changeOperations } from './operations/changes.js';
import { hookOperations } from './operations/hooks.js';
import { revisionRoutes } from './routes/revisions.js';
import { hookRoutes } from './routes/hooks.js';
import { DeploymentManager } from './manager.js';
import { DeploymentRecords, emptyRecords } from './records.js';
import { StateCache } from './state.js';
import { TemplateCatalog } from './templates.js';
import { containersOf } from './logs.js';
import type { KindSources } from './log-sources.js';
import { deploymentOperations } from './operations/deployments.js';
import { hostSafetyOperations } from './operations/host-safety.js';
import { logSourceOperations } from './operations/log-sources.js';
import { deployableOperations } from './operations/deployables.js';
import { templateOperations } from './operations/templates.js';
import { deploymentRoutes } from './routes/deployments.js';
import { hostSafetyRoutes } from './routes/host-safety.js';
import { logRoutes } from './routes/logs.js';
import { logSourceRoutes } from './routes/log-sources.js';
import { statsRoutes } from './routes/stats.js';
import { templateRoutes } from './routes/templates.js';
import { deployableRoutes } from './routes/deployables.js';
import { scaleOperations } from './operations/scale.js';
import { scaleRoutes } from './routes/scale.js';

export default definePlugin({
  name: 'deployments',
  version: '0.1.0',
  description: 'Compose deployments: lifecycle, plans, logs, stats, host-safety policy, templates',
  config: Type.Object({
    deployments: Type.Object(
      {
        path: Type.String({ default: '', description: 'folder of the deployments; empty: <data_dir>/deployments' }),
        reconcile_interval: Type.Integer({
          minimum: 1,
          maximum: 3600,
          default: 30,
          description: 'seconds between full state reconciliations (events keep it current in between)',
        }),
        swarm_converge_timeout: Type.Integer({
          minimum: 5,
          maximum: 3600,
          default: 90,
          description:
            'seconds a change of a swarm deployment waits for its stack to converge; past it the change failed and the whole stack goes back to its last good revision',
        }),
      },
      { default: {} },
    ),
    templates: Type.Object(
      {
        path: Type.String({ default: '', description: 'templates folder; empty: the one shipped with the plugin' }),
      },
      { default: {} },
    ),
  }),
  resources: {
    deployments: { description: 'compose deployments, their logs and stats', operator: 'write', viewer: 'read', owner: 'deployment' },
    templates: { description: 'deployment templates (a catalogue every principal may read)', operator: 'write', viewer: 'read', owner: 'global' },
    'host-safety': { description: 'host-safety exceptions of deployments and the policy switch (admins)', operator: 'none', viewer: 'none', owner: 'both' },
  },
  deps: {
    docker: dockerService,
    plugins: coreServices.plugins,
    principals: principalDirectory,
    // Redeploys and rollbacks are jobs (503 JOBS_UNAVAILABLE without the plugin); `backup: true` needs backups.
    jobs: optional(jobsService),
    backups: optional(backupsService),
    // The proxy's routes, for start-first redeploys (the edge provides them; without it every service is recreated).
    upstreams: optional(deploymentUpstreams),
  },
  provides: { deployments: deploymentsService },

  async setup(ctx, deps) {
    const configured = ctx.config.deployments.path;
    const root = configured ? (isAbsolute(configured) ? configured : resolve(configured)) : join(ctx.agent.dataDir, 'deployments');
    // Every folder below the root may be a deployment's, mounted into its containers: the agent's own data must not
    // be one of them (a deployment named like the data folder would reach the agent's secrets).
    const data = resolve(ctx.agent.dataDir);
    if (data === resolve(root) || data.startsWith(resolve(root) + sep))
      throw new Error(`deployments.path '${root}' contains the agent's data folder '${data}': give the deployments a folder of their own`);
    const settings = ctx.settings(
      Type.Object({
        host_safety: Type.Boolean({
          default: true,
          description: 'check every deployment against the host-safety policy (see the plugin README); turning it off needs host-safety:write',
        }),
        revisions_keep: Type.Integer({ minimum: 1, maximum: 1000, default: 20, description: 'revisions kept per deployment (the newest)' }),
        hook_rate_limit: Type.Integer({
          minimum: 1,
          maximum: 10_000,
          default: 30,
          description: 'signed calls a minute a deployment hook accepts (and as many refused ones), beyond which it answers 429',
        }),
        redeploy_health_timeout: Type.Integer({
          minimum: 1,
          maximum: 3600,
          default: 120,
          description: 'seconds a start-first redeploy waits for a new container to become healthy before it removes it and keeps the old one',
        }),
        redeploy_drain_timeout: Type.Integer({
          minimum: 0,
          maximum: 3600,
          default: 30,
          description: 'seconds a start-first redeploy lets the old container finish what it serves (in-flight requests, websockets) before stopping it',
        }),
      }),
      { permissions: { host_safety: 'host-safety:write' } },
    );
    const records = new DeploymentRecords(await ctx.store.document(emptyRecords(), 'deployments'));
    // Revisions, deploy hooks and the delivery ids they saw: one row per write in the plugin's journal.
    const journal = ctx.store.journal();
    const revisions = new Revisions(journal, ctx.sealer, () => settings.get().revisions_keep);
    const hooks = new Hooks(journal, ctx.sealer, () => settings.get().hook_rate_limit);
    const cache = new StateCache(deps.docker, ctx.log, ctx.config.deployments.reconcile_interval * 1000);
    const manager = new DeploymentManager({
      root,
      docker: deps.docker,
      cache,
      records,
      events: ctx.events,
      log: ctx.log,
      hostSafety: () => settings.get().host_safety,
      revisions,
      backups: () => deps.backups,
      swarmConvergeMs: ctx.config.deployments.swarm_converge_timeout * 1000,
    });
    const templatesDir = ctx.config.templates.path ? resolve(ctx.config.templates.path) : join(ctx.packageDir, 'templates');
    const catalog = new TemplateCatalog(templatesDir);
    const kinds: KindSources = { builtin: (entry) => (entry.record.template ? (catalog.get(entry.record.template)?.log_sources ?? []) : []) };
    // Each change is an operation (src/operations): the routes, their plans and plan applies all run the same one.
    const ops = deploymentOperations(manager, catalog);
    deploymentRoutes(ctx, manager, ops);
    const changes = changeOperations(manager, {
      jobs: () => deps.jobs,
      strategies: deployStrategies({
        docker: deps.docker,
        upstreams: () => deps.upstreams,
        hold: (name, service, id) => manager.holdContainer(name, service, id),
        timeouts: () => ({ health: settings.get().redeploy_health_timeout, drain: settings.get().redeploy_drain_timeout }),
      }),
      audit: ({ principal, action, deployment, success, detail }) =>
        ctx.audit({
          ...(principal ? { actor_type: principal.type, actor_id: principal.id, actor_name: principal.name } : {}),
          action,
          resource_type: 'deployments',
          resource_id: deployment,
          deployment,
          success,
          detail,
        }),
    });
    revisionRoutes(ctx, manager, revisions, changes);
    hookRoutes(ctx, { manager, hooks, ops: hookOperations(manager, hooks), changes, principals: deps.principals });
    ctx.events.on('deployment.deleted', ({ name, retired_as }) => {
      // Revisions are the deleted deployment's history: kept under its retired name. Its hook hangs on the name: gone.
      const kept = revisions.retire(name, retired_as);
      const hook = hooks.remove(name);
      ctx.log.info('revisions of a deleted deployment retired', { deployment: name, retired_as, revisions: kept, hook_removed: hook });
    });
    ctx.job({
      name: 'hook-deliveries',
      cron: '*/10 * * * *',
      description: 'forgets the delivery ids of deploy hook calls whose timestamps can no longer pass',
      run: (run) => run.output(`${hooks.prune()} forgotten`),
    });
    hostSafetyRoutes(ctx, manager, hostSafetyOperations(manager));
    scaleRoutes(ctx, scaleOperations(manager));
    deployableRoutes(ctx, deployableOperations(deps.plugins, ops.create));
    const containers = containersOf(deps.docker);
    const followers = logRoutes(ctx, manager, kinds, containers);
    logSourceRoutes(ctx, manager, kinds, logSourceOperations(manager, kinds));
    statsRoutes(ctx, manager, containers);
    ctx.doctor({
      id: 'deployments.log-followers',
      title: 'Log followers (websocket)',
      run: () => {
        const s = followers.stats();
        return { status: 'ok', detail: `${s.followers} follower(s) on ${s.upstreams} shared upstream stream(s); ${s.dropped} dropped as too slow since start` };
      },
    });
    templateRoutes(ctx, catalog, templateOperations(catalog));
    return {
      provides: { deployments: manager },
      async start() {
        // Parsing every template's compose file is not needed to serve: it finishes in the background.
        void catalog.load().then(
          (loaded) => {
            if (loaded.invalid.length) ctx.log.warn('invalid templates skipped', { invalid: loaded.invalid });
            ctx.log.info('templates loaded', { count: loaded.count });
          },
          (err: Error) => ctx.log.error('templates could not be loaded', { error: err.message }),
        );
        await manager.discover();
        cache.start();
        await cache.reconcile();
        ctx.log.info('deployments discovered', { root, count: manager.entries.size });
      },
      stop: () => {
        followers.closeAll();
        return cache.stop();
      },
    };
  },
});
