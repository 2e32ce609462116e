/** Routes of a deployment's security rules (enforced in its vhosts). */
import { operationRoute, type PluginContext } from '@agent/sdk';
import { PROXY_APPLY_ERRORS } from '@agent/plugin-edge/api';
import { DepSecurity, NameParams } from '../schemas.js';
import type { SecurityQueries } from '../queries.js';
import type { deploymentSecurityOperations } from '../operations/deployment-security.js';

export function deploymentSecurityRoutes(ctx: PluginContext, queries: SecurityQueries, ops: ReturnType<typeof deploymentSecurityOperations>): void {
  ctx.route({
    method: 'GET',
    path: '/deployments/:name/security',
    permission: 'security:read',
    operationId: 'security.getDeployment',
    tag: 'security',
    summary: "A deployment's security settings (enforced in its vhosts)",
    deployment: 'name',
    params: NameParams,
    response: DepSecurity,
    handler: (req) => queries.deployment(req.params.name),
  });

  ctx.route(
    operationRoute(ops.update, {
      method: 'PUT',
      path: '/deployments/:name/security',
      permission: 'security:write',
      operationId: 'security.updateDeployment',
      tag: 'security',
      summary: "Replace a deployment's security settings: blocked addresses, paths closed to non-whitelisted sources, rate limits",
      deployment: 'name',
      params: NameParams,
      body: ops.update.input.properties.changes,
      response: DepSecurity,
      errors: PROXY_APPLY_ERRORS,
      input: (req) => ({ deployment: req.params.name, changes: req.body }),
    }),
  );
}
