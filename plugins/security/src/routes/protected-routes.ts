/** Routes of protected routes (basic authentication in the proxy): list, add, update, remove. */
import { mergeErrors, operationRoute, reply, Type, type PluginContext, type Principal } from '@agent/sdk';
import { PROXY_APPLY_ERRORS } from '@agent/plugin-edge/api';
import { IdParams, Protected, ProtectedCreate, ProtectedUpdate } from '../schemas.js';
import { protectedView, type SecurityQueries } from '../queries.js';
import type { protectedRouteOperations } from '../operations/protected-routes.js';
import type { Rules } from '../rules.js';

export function protectedRouteRoutes(ctx: PluginContext, rules: Rules, queries: SecurityQueries, ops: ReturnType<typeof protectedRouteOperations>): void {
  /**
   * The deployment of a protected route, for the core's check, only when the caller reaches it: another tenant's
   * route then looks like an unknown id (the operation's 404), and its deployment's name does not show.
   */
  const routeDeployment = (principal: Principal, id: number) => {
    const d = rules.state.protected.find((p) => p.id === id)?.deployment;
    return d && principal.deploymentLevel(d) ? d : undefined;
  };
  const byId = {
    params: IdParams,
    tenancy: 'filtered',
    deployment: (req: { principal: Principal; params: { id: number } }) => routeDeployment(req.principal, req.params.id),
  } as const;

  ctx.route({
    method: 'GET',
    path: '/security/protected-routes',
    permission: 'security:read',
    operationId: 'security.listProtectedRoutes',
    tag: 'security',
    summary: 'Routes behind basic authentication in the proxy',
    response: Type.Array(Protected),
    tenancy: 'filtered',
    description: 'Only the routes of deployments the caller reaches.',
    handler: (req) => queries.protectedRoutes(req.principal),
  });

  ctx.route(
    operationRoute(ops.add, {
      method: 'POST',
      path: '/security/protected-routes',
      permission: 'security:write',
      operationId: 'security.addProtectedRoute',
      tag: 'security',
      status: 201,
      creates: 'id',
      summary: "Protect a path of a deployment's domains with basic authentication",
      body: ProtectedCreate,
      deployment: (req) => req.body.deployment,
      response: Protected,
      errors: mergeErrors(PROXY_APPLY_ERRORS, { 409: ['PROTECTED_ROUTE_EXISTS'] }),
      input: (req) => req.body,
      respond: (route) => reply.created(protectedView(route)),
    }),
  );

  ctx.route(
    operationRoute(ops.update, {
      ...byId,
      method: 'PUT',
      path: '/security/protected-routes/:id',
      permission: 'security:write',
      operationId: 'security.updateProtectedRoute',
      tag: 'security',
      summary: 'Update a protected route',
      description: "Bound to the route's deployment (and to the new one when `deployment` moves it); an unknown id, or another tenant's, is 404.",
      body: ProtectedUpdate,
      response: Protected,
      errors: mergeErrors(PROXY_APPLY_ERRORS, { 409: ['PROTECTED_ROUTE_EXISTS'] }),
      input: (req) => ({ id: req.params.id, changes: req.body }),
      respond: (route) => protectedView(route),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      ...byId,
      method: 'DELETE',
      path: '/security/protected-routes/:id',
      permission: 'security:write',
      operationId: 'security.removeProtectedRoute',
      tag: 'security',
      summary: 'Remove a protected route',
      description: "Bound to the route's deployment; an unknown id, or another tenant's, is 404.",
      response: Type.Null(),
      errors: PROXY_APPLY_ERRORS,
      input: (req) => req.params,
      respond: (id) => reply.ok(null, `protected route ${id} removed`),
    }),
  );
}
