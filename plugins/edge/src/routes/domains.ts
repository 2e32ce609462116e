/** Routes of a deployment's domains: list, and the add/update/remove operations (each plannable: nginx diff). */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { COMPOSE_ERRORS } from '@agent/plugin-docker/api';
import { PROXY_APPLY_ERRORS } from '../api.js';
import { Domain, DomainAdd, DomainIdParams, DomainUpdate, NameParams } from '../schemas.js';
import type { EdgeConfig } from '../config.js';
import type { Domains } from '../proxy/domains.js';
import type { domainOperations } from '../operations/domains.js';

export function domainRoutes(ctx: PluginContext<EdgeConfig>, domains: Domains, ops: ReturnType<typeof domainOperations>): void {
  const common = { permission: 'proxy:write', tag: 'domains', deployment: 'name', plannable: true } as const;
  // A domain another entry or deployment holds (proxy/domains.ts), the deployment's compose model read to check the
  // service (through the compose guard), and nginx refusing the rendered configuration.
  const changeErrors = mergeErrors(COMPOSE_ERRORS, PROXY_APPLY_ERRORS, { 409: ['DOMAIN_CLAIMED', 'DOMAIN_EXISTS'] });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/domains',
    permission: 'proxy:read',
    operationId: 'domains.list',
    tag: 'domains',
    summary: 'List the domains of a deployment',
    deployment: 'name',
    params: NameParams,
    response: Type.Array(Domain),
    handler: (req) => {
      domains.assertDeployment(req.params.name);
      return domains.list(req.params.name);
    },
  });

  ctx.route(
    operationRoute(ops.add, {
      ...common,
      method: 'POST',
      path: '/deployments/:name/domains',
      operationId: 'domains.add',
      status: 201,
      summary: 'Add a domain to a deployment (renders its nginx vhost, tests, reloads)',
      params: NameParams,
      body: DomainAdd,
      response: Domain,
      errors: changeErrors,
      input: (req) => ({ deployment: req.params.name, entry: req.body }),
      respond: (view) => reply.created(view),
    }),
  );

  ctx.route(
    operationRoute(ops.update, {
      ...common,
      method: 'PUT',
      path: '/deployments/:name/domains/:domainId',
      operationId: 'domains.update',
      summary: 'Update a domain of a deployment',
      params: DomainIdParams,
      body: DomainUpdate,
      response: Domain,
      errors: changeErrors,
      input: (req) => ({ deployment: req.params.name, id: req.params.domainId, changes: req.body }),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      ...common,
      method: 'DELETE',
      path: '/deployments/:name/domains/:domainId',
      operationId: 'domains.remove',
      summary: 'Remove a domain from a deployment (its vhost is removed and nginx reloaded)',
      params: DomainIdParams,
      response: Type.Null(),
      errors: PROXY_APPLY_ERRORS,
      input: (req) => ({ deployment: req.params.name, id: req.params.domainId }),
      respond: (entry) => reply.ok(null, `domain ${entry.domain} removed`),
    }),
  );
}
