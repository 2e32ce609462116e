/**
 * infrastructure: shared services the agent keeps outside user deployments: the proxy network, a
 * shared database, a cache and the DNS server, each a compose project made from a built-in template with
 * settings. Provides the `infrastructure` service (the dns plugin starts and stops its server through it) and
 * lets deployments join the shared networks.
 */
import { definePlugin, optional, Type } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { dockerService, ENGINE_ERRORS } from '@agent/plugin-docker/api';
import { infrastructureService } from './api.js';
import { InfrastructureManager, type InfraDoc } from './manager.js';
import { networkOperations } from './operations/networks.js';
import { serviceOperations } from './operations/services.js';
import { networkRoutes } from './routes/networks.js';
import { serviceRoutes } from './routes/services.js';

export default definePlugin({
  name: 'infrastructure',
  version: '0.1.0',
  description: 'Shared infrastructure services (proxy network, shared database, cache, DNS server) as compose projects',
  // Global: the shared database, cache and DNS server serve every deployment; only principals with global scope reach them.
  resources: { infrastructure: { description: 'shared infrastructure services and networks (global)', operator: 'write', viewer: 'read', owner: 'global' } },
  config: Type.Object({
    infrastructure: Type.Object(
      {
        project_prefix: Type.String({ default: 'agent-infra', pattern: '^[a-z0-9][a-z0-9_-]{0,30}$', description: 'compose projects are <prefix>-<service>' }),
        network_prefix: Type.String({
          default: 'agent',
          pattern: '^[a-z0-9][a-z0-9_-]{0,30}$',
          description: 'shared networks are <prefix>-proxy and <prefix>-shared',
        }),
        labels: Type.Record(Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,62}$' }), Type.String({ maxLength: 200 }), {
          default: {},
          description: 'labels added to every infrastructure container and network',
        }),
      },
      { default: {} },
    ),
  }),
  deps: { docker: dockerService, deployments: optional(deploymentsService) },
  // Every route reads the engine (the containers of a service, of a deployment); each route adds its own answers.
  errors: ENGINE_ERRORS,
  provides: { infrastructure: infrastructureService },

  async setup(ctx, deps) {
    const doc = await ctx.store.secureDocument<InfraDoc>({ services: {} });
    const docker = deps.docker;
    const cfg = ctx.config.infrastructure;
    const manager = new InfrastructureManager(doc, docker, ctx.dataDir, ctx.log, {
      projectPrefix: cfg.project_prefix,
      networkPrefix: cfg.network_prefix,
      labels: cfg.labels,
    });
    // Each change is an operation (src/operations), run by its route (src/routes): checks in `prepare`, the change in `apply`.
    // The network routes come first: `/infrastructure/networks` is not a service name.
    const networks = manager.networks().map((n) => n.name);
    networkRoutes(
      ctx,
      manager,
      networkOperations(docker, () => deps.deployments, networks, cfg.labels),
    );
    serviceRoutes(ctx, manager, serviceOperations(manager));
    return {
      provides: { infrastructure: manager },
      // Networks of enabled services come back after a restart of the engine or the agent (no waiting for it here).
      start: () => void manager.recover(),
    };
  },
});
