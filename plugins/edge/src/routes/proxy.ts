/** Proxy routes: quick setup of a deployment's domain, its status, removal of all its domains, the vhost list. */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { COMPOSE_ERRORS } from '@agent/plugin-docker/api';
import { PROXY_APPLY_ERRORS } from '../api.js';
import { Domain, NameParams } from '../schemas.js';
import type { EdgeConfig } from '../config.js';
import type { Runtime } from '../runtime.js';
import type { proxyOperations } from '../operations/proxy.js';
import { proxyStatus, ProxyStatus, Vhost, vhosts } from '../proxy/status.js';

export function proxyRoutes(ctx: PluginContext<EdgeConfig>, rt: Runtime, ops: ReturnType<typeof proxyOperations>): void {
  ctx.route(
    operationRoute(ops.setup, {
      method: 'POST',
      path: '/proxy/setup/:name',
      permission: 'proxy:write',
      operationId: 'proxy.setup',
      tag: 'proxy',
      summary: "Route a domain to a deployment's first service (creates or updates its root domain entry)",
      description:
        'Shorthand for the domains API: the domain is routed with path prefix `/` to the first service of the compose file on `port` (inside the container).',
      deployment: 'name',
      params: NameParams,
      body: Type.Omit(ops.setup.input, ['deployment']),
      response: Domain,
      // 201 when it created the root domain entry, 200 when it updated it.
      successes: [201],
      // The first service is read from the deployment's compose model (through the compose guard).
      errors: mergeErrors(COMPOSE_ERRORS, PROXY_APPLY_ERRORS, { 409: ['DOMAIN_CLAIMED', 'DOMAIN_EXISTS'] }),
      input: (req) => ({ deployment: req.params.name, ...req.body }),
      respond: ({ entry, created }) => (created ? reply.created(entry) : entry),
    }),
  );

  ctx.route({
    method: 'GET',
    path: '/proxy/status/:name',
    permission: 'proxy:read',
    operationId: 'proxy.status',
    tag: 'proxy',
    summary: 'Proxy configuration status of a deployment',
    deployment: 'name',
    params: NameParams,
    response: ProxyStatus,
    handler: (req) => proxyStatus(rt, req.params.name, req.principal),
  });

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/proxy/:name',
      permission: 'proxy:write',
      operationId: 'proxy.remove',
      tag: 'proxy',
      summary: 'Remove every domain (and vhost) of a deployment',
      deployment: 'name',
      params: NameParams,
      description: '404 when the deployment has no domain: there is nothing to remove, and nginx is not touched.',
      response: Type.Object({ removed: Type.Integer() }),
      errors: PROXY_APPLY_ERRORS,
      input: (req) => ({ deployment: req.params.name }),
      respond: (removed, req) => reply.ok({ removed }, `${removed} domain(s) of ${req.params.name} removed`),
    }),
  );

  ctx.route({
    method: 'GET',
    path: '/proxy/vhosts',
    permission: 'proxy:read',
    operationId: 'proxy.vhosts',
    tag: 'proxy',
    summary: 'Virtual hosts the agent generated (one per domain)',
    tenancy: 'filtered',
    description: 'Only the vhosts of deployments the caller reaches.',
    response: Type.Array(Vhost),
    handler: (req) => vhosts(rt, req.principal),
  });
}
