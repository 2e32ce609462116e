/** Traffic routes: the journal with its filters, statistics, unknown domains, cleanup, one deployment's figures. */
import { operationRoute, Type, type PluginContext } from '@agent/sdk';
import type { trafficOperations } from '../operations/traffic.js';
import type { EdgeConfig } from '../config.js';
import {
  DeploymentParams,
  DeploymentQuery,
  DeploymentTraffic,
  LogsQuery,
  Stats,
  StatsQuery,
  TrafficItem,
  UnknownDomain,
  UnknownDomainsQuery,
  type TrafficQueries,
} from '../traffic/queries.js';

export function trafficRoutes(ctx: PluginContext<EdgeConfig>, queries: TrafficQueries, ops: ReturnType<typeof trafficOperations>): void {
  const common = { permission: 'traffic:read', tag: 'traffic' } as const;

  ctx.route({
    ...common,
    method: 'GET',
    path: '/traffic/logs',
    operationId: 'traffic.logs',
    summary: 'Requests the proxy served, newest first (in the order the proxy logged them)',
    tenancy: 'filtered',
    description:
      "Rows of the caller's deployments; rows of unknown hosts and of deleted deployments (retired names) only for global principals. `deployment` naming one the caller does not reach is 404.",
    query: LogsQuery,
    response: Type.Array(TrafficItem),
    // A path pattern it cannot use; a path search that did not fill its page in its time (traffic/journal.ts).
    errors: { 400: ['INVALID_PATTERN'], 503: ['SEARCH_TIMEOUT'] },
    handler: (req) => queries.logs(req.query, req.principal),
  });

  ctx.route({
    ...common,
    method: 'GET',
    path: '/traffic/stats',
    operationId: 'traffic.stats',
    summary: 'Requests per deployment and status group, bytes, p50/p95 latency (default: last 24 h)',
    tenancy: 'filtered',
    description: "Counts only the caller's deployments (totals included); unknown hosts and retired names only for global principals.",
    query: StatsQuery,
    response: Stats,
    handler: (req) => queries.stats(req.query, req.principal),
  });

  ctx.route({
    ...common,
    method: 'GET',
    path: '/traffic/unknown-domains',
    operationId: 'traffic.unknownDomains',
    summary: 'Requests for host names no deployment owns, by host (default: last 7 days)',
    description: 'Hosts no deployment owns belong to no tenant: global.',
    query: UnknownDomainsQuery,
    response: Type.Array(UnknownDomain),
    handler: (req) => queries.unknownDomains(req.query),
  });

  ctx.route(
    operationRoute(ops.cleanup, {
      method: 'POST',
      path: '/traffic/cleanup',
      permission: 'traffic:write',
      operationId: 'traffic.cleanup',
      tag: 'traffic',
      summary: 'Remove traffic records older than `older_than` seconds',
      body: ops.cleanup.input,
      response: Type.Object({ deleted: Type.Integer() }),
      input: (req) => req.body,
    }),
  );

  ctx.route({
    ...common,
    method: 'GET',
    path: '/deployments/:name/traffic',
    operationId: 'traffic.deployment',
    summary: "A deployment's traffic statistics since a time (`since`: 15m, 24h, 7d or RFC 3339; default 24h)",
    deployment: 'name',
    params: DeploymentParams,
    query: DeploymentQuery,
    response: DeploymentTraffic,
    handler: (req) => queries.deployment(req.params.name, req.query.since),
  });
}
