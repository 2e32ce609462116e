/** Routes of the whitelist: list, add, remove (all global). */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { PROXY_APPLY_ERRORS } from '@agent/plugin-edge/api';
import { IdParams, Whitelist, WhitelistBody } from '../schemas.js';
import type { SecurityQueries } from '../queries.js';
import type { whitelistOperations } from '../operations/whitelist.js';

export function whitelistRoutes(ctx: PluginContext, queries: SecurityQueries, ops: ReturnType<typeof whitelistOperations>): void {
  ctx.route({
    method: 'GET',
    path: '/security/whitelist',
    permission: 'security:read',
    operationId: 'security.listWhitelist',
    tag: 'security',
    summary: 'Whitelist entries: addresses, ranges and paths never denied',
    response: Type.Array(Whitelist),
    handler: () => queries.whitelist(),
  });

  ctx.route(
    operationRoute(ops.add, {
      method: 'POST',
      path: '/security/whitelist',
      permission: 'security:write',
      operationId: 'security.addWhitelist',
      tag: 'security',
      status: 201,
      creates: 'id',
      summary: 'Whitelist an address, a range or a path prefix (overrides blocks)',
      body: WhitelistBody,
      response: Whitelist,
      errors: mergeErrors(PROXY_APPLY_ERRORS, { 409: ['WHITELIST_EXISTS'] }),
      input: (req) => req.body,
      respond: (entry) => reply.created(entry),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/security/whitelist/:id',
      permission: 'security:write',
      operationId: 'security.removeWhitelist',
      tag: 'security',
      summary: 'Remove a whitelist entry',
      params: IdParams,
      response: Type.Null(),
      errors: PROXY_APPLY_ERRORS,
      input: (req) => req.params,
      respond: (id) => reply.ok(null, `whitelist entry ${id} removed`),
    }),
  );
}
