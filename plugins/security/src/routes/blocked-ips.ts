/** Routes of blocked addresses: list, block, unblock. */
import { operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { PROXY_APPLY_ERRORS } from '@agent/plugin-edge/api';
import { Blocked, BlockBody, IpParams, UnblockQuery } from '../schemas.js';
import { blockedView, type SecurityQueries } from '../queries.js';
import type { blockedIpOperations } from '../operations/blocked-ips.js';

export function blockedIpRoutes(ctx: PluginContext, queries: SecurityQueries, ops: ReturnType<typeof blockedIpOperations>): void {
  ctx.route({
    method: 'GET',
    path: '/security/blocked-ips',
    permission: 'security:read',
    operationId: 'security.listBlockedIps',
    tag: 'security',
    summary: 'Blocked addresses (expired blocks are lifted automatically)',
    response: Type.Array(Blocked),
    tenancy: 'filtered',
    description: 'A principal limited to deployments sees the blocks tied to its deployments; blocks for every site are global.',
    handler: (req) => queries.blocked(req.principal),
  });

  ctx.route(
    operationRoute(ops.block, {
      method: 'POST',
      path: '/security/blocked-ips',
      permission: 'security:write',
      operationId: 'security.blockIp',
      creates: 'ip',
      tag: 'security',
      status: 201,
      summary: 'Block an address or range in the proxy (403), optionally for a duration or one deployment',
      description: 'With `deployment`, bound to that deployment; without, the block applies to every site: global.',
      body: BlockBody,
      deployment: (req) => req.body.deployment,
      response: Blocked,
      // Every change of the rules is rendered, tested and reloaded in nginx (rules.ts).
      errors: PROXY_APPLY_ERRORS,
      input: (req) => req.body,
      respond: (b) => reply.created(blockedView(b)),
    }),
  );

  ctx.route(
    operationRoute(ops.unblock, {
      method: 'DELETE',
      path: '/security/blocked-ips/:ip',
      permission: 'security:write',
      operationId: 'security.unblockIp',
      tag: 'security',
      summary: 'Unblock an address: its block for one deployment (`deployment`), or every block of it',
      description: 'With `deployment`, bound to that deployment and removes only its block; without, removes every block of the address: global.',
      params: IpParams,
      query: UnblockQuery,
      deployment: (req) => req.query.deployment,
      response: Type.Null(),
      errors: PROXY_APPLY_ERRORS,
      input: (req) => ({ ip: req.params.ip, deployment: req.query.deployment }),
      respond: ({ ip, deployment }) => reply.ok(null, deployment ? `${ip} unblocked for '${deployment}'` : `${ip} unblocked`),
    }),
  );
}
