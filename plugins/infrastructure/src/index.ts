/**
 * infrastructure: shared services the agent keeps outside user deployments: the proxy network, a
 * shared database, a cache and the DNS server, each a compose project made from a built-in template with
 * settings. Provides the `infrastructure` service (the dns plugin starts and stops its server through it) and
 * lets deployments join the shared networks.
 */
import { definePlugin, errors, levelRank, Nullable, optional, reply, Type, deploymentName } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { dockerService } from '@agent/plugin-docker/api';
import { infrastructureService } from './api.js';
import { InfrastructureManager, type InfraDoc } from './manager.js';
import { TEMPLATES } from './templates.js';

const NAME = '^[a-z][a-z0-9-]{0,31}$';
const SettingValue = Type.Union([Type.String({ maxLength: 256 }), Type.Number(), Type.Boolean()]);
const SettingsPatch = Type.Record(Type.String({ pattern: '^[a-z][a-z0-9_]{0,31}$' }), SettingValue, { maxProperties: 32 });

const Health = Type.Unsafe<string>({ type: 'string', enum: ['healthy', 'unhealthy', 'starting', 'none'] });
const Status = Type.Object({
  name: Type.String(),
  description: Type.String(),
  template: Type.String(),
  status: Type.Unsafe<string>({ type: 'string', enum: ['running', 'stopped', 'partial', 'starting', 'failed', 'not_created'] }),
  health: Health,
  enabled: Type.Boolean(),
  services: Type.Array(
    Type.Object({
      name: Type.String(),
      status: Type.String(),
      health: Health,
      container_id: Nullable(Type.String()),
      image: Nullable(Type.String()),
    }),
  ),
  ports: Type.Array(
    Type.Object({
      service: Type.String(),
      host_ip: Nullable(Type.String()),
      host_port: Nullable(Type.Integer()),
      container_port: Type.Integer(),
      protocol: Type.String(),
    }),
  ),
  networks: Type.Array(Type.String()),
  settings: Type.Record(Type.String(), SettingValue),
});

const NameParams = Type.Object({ name: Type.String({ pattern: NAME, description: `one of ${TEMPLATES.map((t) => t.name).join(', ')}` }) });
const AttachBody = Type.Object({
  deployment: deploymentName(),
  service: Type.Optional(Type.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$', description: 'only this compose service (default: all)' })),
});

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
    const networkNames = manager.networks().map((n) => n.name);

    // The network routes come first: `/infrastructure/networks` is not a service name.
    ctx.route({
      method: 'GET',
      path: '/infrastructure/networks',
      permission: 'infrastructure:read',
      operationId: 'infrastructure.networks',
      summary: 'Shared networks deployments may join',
      response: Type.Array(Type.Object({ name: Type.String(), description: Type.String() })),
      handler: () => manager.networks(),
    });

    for (const action of ['attach', 'detach'] as const) {
      ctx.route({
        method: 'POST',
        path: `/infrastructure/networks/:network/${action}`,
        permission: 'infrastructure:write',
        operationId: `infrastructure.${action}`,
        summary:
          action === 'attach'
            ? 'Connect the containers of a deployment to a shared network'
            : 'Disconnect the containers of a deployment from a shared network',
        description:
          'The connection lasts until the containers are recreated; for a permanent one, declare the network as external in the compose file. ' +
          'Global: a shared network reaches the shared database, cache and DNS server of every deployment, so a principal limited to its ' +
          'deployments may not attach even its own (403 GLOBAL_SCOPE_REQUIRED); a global one needs write access to the deployment.',
        // Not bound to the deployment on purpose: what changes is who reaches the shared services (global state).
        params: Type.Object({ network: Type.Unsafe<string>({ type: 'string', enum: networkNames }) }),
        body: AttachBody,
        response: Type.Object({ network: Type.String(), deployment: Type.String(), containers: Type.Array(Type.String()) }),
        handler: async (req) => {
          const deployments = deps.deployments;
          const { deployment, service } = req.body;
          const level = req.principal.deploymentLevel(deployment);
          if (!level || (deployments && !deployments.get(deployment))) throw errors.notFound(`deployment '${deployment}' not found`);
          if (levelRank(level) < levelRank('write')) throw errors.forbidden(`'write' access to deployment '${deployment}' required`);
          const containers = (await docker.listContainers({ all: false, deployment })).filter((c) => !service || c.service === service);
          if (containers.length === 0) {
            throw errors.conflict(`deployment '${deployment}'${service ? ` service '${service}'` : ''} has no running container`, 'NO_RUNNING_CONTAINER');
          }
          if (action === 'attach')
            await docker.networks.ensure(req.params.network, { labels: { ...cfg.labels, 'agent.infrastructure.network': req.params.network } });
          for (const c of containers) {
            if (action === 'attach') await docker.networks.connect(req.params.network, c.id, c.service ? { aliases: [`${deployment}-${c.service}`] } : {});
            else await docker.networks.disconnect(req.params.network, c.id);
          }
          return { network: req.params.network, deployment, containers: containers.map((c) => c.name) };
        },
      });
    }

    ctx.route({
      method: 'GET',
      path: '/infrastructure',
      permission: 'infrastructure:read',
      operationId: 'infrastructure.list',
      summary: 'Infrastructure services with status, health and ports',
      response: Type.Array(Status),
      handler: () => manager.list(),
    });

    ctx.route({
      method: 'GET',
      path: '/infrastructure/:name',
      permission: 'infrastructure:read',
      operationId: 'infrastructure.get',
      summary: 'One infrastructure service',
      params: NameParams,
      response: Status,
      handler: (req) => manager.get(req.params.name),
    });

    ctx.route({
      method: 'PUT',
      path: '/infrastructure/:name/settings',
      permission: 'infrastructure:write',
      operationId: 'infrastructure.configure',
      summary: 'Change template settings of a service (a running service is updated)',
      params: NameParams,
      body: Type.Object({ settings: SettingsPatch }),
      response: Status,
      handler: (req) => manager.configure(req.params.name, req.body.settings),
    });

    ctx.route({
      method: 'POST',
      path: '/infrastructure/:name/start',
      permission: 'infrastructure:write',
      operationId: 'infrastructure.start',
      summary: 'Start a service (its project is created from the template first)',
      params: NameParams,
      body: Type.Object({ settings: Type.Optional(SettingsPatch) }),
      response: Status,
      handler: async (req) => reply.ok(await manager.start(req.params.name, { settings: req.body.settings }), `'${req.params.name}' started`),
    });

    ctx.route({
      method: 'POST',
      path: '/infrastructure/:name/stop',
      permission: 'infrastructure:write',
      operationId: 'infrastructure.stop',
      summary: 'Stop a service (containers and data are kept)',
      params: NameParams,
      response: Status,
      handler: async (req) => reply.ok(await manager.stop(req.params.name), `'${req.params.name}' stopped`),
    });

    ctx.route({
      method: 'POST',
      path: '/infrastructure/:name/restart',
      permission: 'infrastructure:write',
      operationId: 'infrastructure.restart',
      summary: 'Recreate and restart a service',
      params: NameParams,
      response: Status,
      handler: async (req) => reply.ok(await manager.restart(req.params.name), `'${req.params.name}' restarted`),
    });

    ctx.route({
      method: 'GET',
      path: '/infrastructure/:name/logs',
      permission: 'infrastructure:read',
      operationId: 'infrastructure.logs',
      summary: 'Logs of a service: the last `tail` lines (0: all), optionally only lines containing `filter`',
      params: NameParams,
      query: Type.Object({
        tail: Type.Optional(Type.Integer({ minimum: 0, maximum: 10000, default: 100 })),
        filter: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'case-insensitive substring' })),
        service: Type.Optional(Type.String({ pattern: '^[a-z][a-z0-9_-]{0,31}$' })),
      }),
      response: Type.Array(Type.Object({ service: Type.String(), stream: Type.String(), time: Nullable(Type.String()), text: Type.String() })),
      handler: (req) => manager.logs(req.params.name, { tail: req.query.tail ?? 100, filter: req.query.filter, service: req.query.service }),
    });
    return {
      provides: { infrastructure: manager },
      // Networks of enabled services come back after a restart of the engine or the agent (no waiting for it here).
      start: () => void manager.recover(),
    };
  },
});
