/** Routes of security events: list, one, one address's, statistics, cleanup. */
import { operationRoute, RecordId, Type, type PluginContext } from '@agent/sdk';
import { CleanupBody, EventQuery, EventSchema, IpParams, PageQuery, Stats } from '../schemas.js';
import type { SecurityQueries } from '../queries.js';
import type { settingsOperations } from '../operations/settings.js';

export function eventRoutes(ctx: PluginContext, queries: SecurityQueries, ops: ReturnType<typeof settingsOperations>): void {
  const read = { permission: 'security:read', tag: 'security', tenancy: 'filtered' } as const;

  ctx.route({
    ...read,
    method: 'GET',
    path: '/security/events',
    operationId: 'security.listEvents',
    summary: 'Security events detected from the proxy traffic',
    query: EventQuery,
    response: Type.Array(EventSchema),
    description:
      "Events of the caller's deployments; events of no deployment (unknown hosts) and of deleted ones (retired names) only for global principals. `deployment` naming one the caller does not reach is 404.",
    handler: (req) => queries.events(req.query, req.principal),
  });

  ctx.route({
    ...read,
    method: 'GET',
    path: '/security/events/:id',
    operationId: 'security.getEvent',
    summary: 'One security event',
    params: Type.Object({ id: RecordId() }),
    response: EventSchema,
    description: 'An event the caller may not see is 404, like an unknown id.',
    handler: (req) => queries.event(req.params.id, req.principal),
  });

  ctx.route({
    ...read,
    method: 'GET',
    path: '/security/ips/:ip/events',
    operationId: 'security.ipEvents',
    summary: 'Every event of one source address, with its block status',
    description:
      "Events of the caller's deployments. For a principal limited to deployments, `blocked` is about the blocks tied to them, and the whitelist (global) is not shown (`whitelisted: null`).",
    params: IpParams,
    query: PageQuery,
    response: Type.Array(EventSchema),
    handler: (req) => queries.ipEvents(req.params.ip, req.query, req.principal),
  });

  ctx.route({
    ...read,
    method: 'GET',
    path: '/security/stats',
    operationId: 'security.stats',
    summary: 'Overview: events by type and severity, top sources, blocks, whitelist, protected routes, capture mode',
    response: Stats,
    description:
      'Counts only what the caller sees: events, blocks and protected routes of its deployments; global state (whitelist, settings, blocks for every site) only for global principals.',
    handler: (req) => queries.stats(req.principal),
  });

  ctx.route(
    operationRoute(ops.cleanup, {
      method: 'POST',
      path: '/security/cleanup',
      permission: 'security:write',
      operationId: 'security.cleanup',
      tag: 'security',
      summary: 'Remove events older than `older_than` seconds',
      body: CleanupBody,
      response: Type.Object({ events_deleted: Type.Integer() }),
      input: (req) => req.body,
    }),
  );
}
