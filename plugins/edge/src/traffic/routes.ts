/** Traffic endpoints: the journal with its filters, statistics, unknown domains, cleanup, per deployment. */
import { deploymentName, deploymentOrRetired, errors, Nullable, Pagination, reply, Seconds, Type } from '@agent/sdk';
import { filterScope, TimeQuery, timeParam } from '../access.js';
import { checkIp, printable } from '../validate.js';
import type { Runtime } from '../runtime.js';
import { COUNT_CAP, type TrafficJournal } from './journal.js';
import { invalidPathPattern, MAX_PATH_PATTERN_LENGTH, MAX_PATH_WILDCARDS } from './pattern.js';

const TrafficItem = Type.Object({
  id: Type.Integer(),
  time: Type.String(),
  deployment: Nullable(Type.String()),
  host: Type.String(),
  method: Type.String(),
  path: Type.String(),
  status: Type.Integer(),
  bytes: Type.Integer(),
  duration_ms: Type.Number(),
  source_ip: Type.String(),
  user_agent: Type.String(),
});
const StatusGroups = Type.Record(Type.String(), Type.Integer());
const DeploymentStats = Type.Object({
  deployment: Nullable(Type.String()),
  requests: Type.Integer(),
  bytes: Type.Integer(),
  status: StatusGroups,
  p50_ms: Nullable(Type.Number()),
  p95_ms: Nullable(Type.Number()),
});
const Stats = Type.Object({
  since: Type.String(),
  until: Nullable(Type.String()),
  total: Type.Object({
    requests: Type.Integer(),
    bytes: Type.Integer(),
    status: StatusGroups,
    p50_ms: Nullable(Type.Number()),
    p95_ms: Nullable(Type.Number()),
  }),
  deployments: Type.Array(DeploymentStats),
});
const DAY = 86_400_000;

/** `15m`, `24h`, `7d`, `30s` or an RFC 3339 time → epoch ms. */
export function sinceParam(value: string | undefined, fallbackMs: number): number {
  if (!value) return Date.now() - fallbackMs;
  const m = /^(\d{1,6})([smhd])$/.exec(value);
  if (m) return Date.now() - Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: DAY }[m[2] as 's' | 'm' | 'h' | 'd'];
  return timeParam(value, 'since')!;
}

export function trafficRoutes(rt: Runtime, journal: TrafficJournal): void {
  const { ctx } = rt;

  ctx.route({
    method: 'GET',
    path: '/traffic/logs',
    permission: 'traffic:read',
    operationId: 'traffic.logs',
    tag: 'traffic',
    summary: 'Requests the proxy served, newest first (in the order the proxy logged them)',
    tenancy: 'filtered',
    description:
      "Rows of the caller's deployments; rows of unknown hosts and of deleted deployments (retired names) only for global principals. `deployment` naming one the caller does not reach is 404.",
    query: Type.Object({
      deployment: Type.Optional(deploymentOrRetired()),
      method: Type.Optional(Type.String({ pattern: '^[A-Z]{3,10}$', description: 'HTTP method' })),
      status_group: Type.Optional(Type.String({ pattern: '^[1-5]xx$', description: '1xx … 5xx' })),
      status_code: Type.Optional(Type.Integer({ minimum: 100, maximum: 599 })),
      source_ip: Type.Optional(Type.String({ maxLength: 64 })),
      path: Type.Optional(
        Type.String({
          maxLength: MAX_PATH_PATTERN_LENGTH,
          description: `substring, or a pattern with * wildcards (at most ${MAX_PATH_WILDCARDS}) matching the whole path; A–Z match either case. Read in slices: a search that has not filled its page after 10 s answers 503 SEARCH_TIMEOUT`,
        }),
      ),
      start_time: TimeQuery(),
      end_time: TimeQuery(),
      ...Pagination(100, 1000),
      exact_total: Type.Optional(
        Type.Boolean({ default: false, description: `count every match (slower); by default counting stops at ${COUNT_CAP} and meta.total_capped says so` }),
      ),
    }),
    response: Type.Array(TrafficItem),
    handler: async (req) => {
      const q = req.query;
      const visible = filterScope(req.principal, q.deployment);
      const limit = q.limit ?? 100;
      const offset = q.offset ?? 0;
      const problem = q.path === undefined ? null : invalidPathPattern(q.path);
      if (problem) throw errors.badRequest(`path: '${printable(q.path!)}' ${problem}`, 'INVALID_PATTERN', { field: 'path' });
      const { items, total, capped } = await journal.search(
        {
          deployment: q.deployment,
          deployments: visible,
          method: q.method,
          status_group: q.status_group,
          status_code: q.status_code,
          source_ip: q.source_ip ? checkIp(q.source_ip, 'source_ip') : undefined,
          path: q.path,
          start_ms: timeParam(q.start_time, 'start_time'),
          end_ms: timeParam(q.end_time, 'end_time'),
        },
        limit,
        offset,
        q.exact_total ?? false,
      );
      return reply.ok(items, undefined, { total, limit, offset, total_capped: capped });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/traffic/stats',
    permission: 'traffic:read',
    operationId: 'traffic.stats',
    tag: 'traffic',
    summary: 'Requests per deployment and status group, bytes, p50/p95 latency (default: last 24 h)',
    tenancy: 'filtered',
    description: "Counts only the caller's deployments (totals included); unknown hosts and retired names only for global principals.",
    query: Type.Object({
      deployment: Type.Optional(deploymentOrRetired()),
      start_time: TimeQuery(),
      end_time: TimeQuery(),
    }),
    response: Stats,
    handler: async (req) => {
      const visible = filterScope(req.principal, req.query.deployment);
      const start = timeParam(req.query.start_time, 'start_time') ?? Date.now() - DAY;
      const end = timeParam(req.query.end_time, 'end_time');
      const s = await journal.stats({ deployment: req.query.deployment, deployments: visible, start_ms: start, end_ms: end });
      return { since: new Date(start).toISOString(), until: end === undefined ? null : new Date(end).toISOString(), ...s };
    },
  });

  ctx.route({
    method: 'GET',
    path: '/traffic/unknown-domains',
    permission: 'traffic:read',
    operationId: 'traffic.unknownDomains',
    tag: 'traffic',
    summary: 'Requests for host names no deployment owns, by host (default: last 7 days)',
    description: 'Hosts no deployment owns belong to no tenant: global.',
    query: Type.Object({
      start_time: TimeQuery(),
      end_time: TimeQuery(),
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    }),
    response: Type.Array(
      Type.Object({ host: Type.String(), requests: Type.Integer(), sources: Type.Integer(), first_seen: Type.String(), last_seen: Type.String() }),
    ),
    handler: async (req) => {
      const start = timeParam(req.query.start_time, 'start_time') ?? Date.now() - 7 * DAY;
      return (await journal.unknownDomains({ start_ms: start, end_ms: timeParam(req.query.end_time, 'end_time') }, req.query.limit ?? 100)).map((r) => ({
        host: r.host,
        requests: r.requests,
        sources: r.sources,
        first_seen: new Date(r.first).toISOString(),
        last_seen: new Date(r.last).toISOString(),
      }));
    },
  });

  ctx.route({
    method: 'POST',
    path: '/traffic/cleanup',
    permission: 'traffic:write',
    operationId: 'traffic.cleanup',
    tag: 'traffic',
    summary: 'Remove traffic records older than `older_than` seconds',
    body: Type.Object({ older_than: Seconds({ minimum: 0 }) }),
    response: Type.Object({ deleted: Type.Integer() }),
    handler: (req) => ({ deleted: journal.cleanup(Date.now() - req.body.older_than * 1000) }),
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/traffic',
    permission: 'traffic:read',
    operationId: 'traffic.deployment',
    tag: 'traffic',
    summary: "A deployment's traffic statistics since a time (`since`: 15m, 24h, 7d or RFC 3339; default 24h)",
    deployment: 'name',
    params: Type.Object({ name: deploymentName() }),
    query: Type.Object({
      since: Type.Optional(
        Type.String({
          maxLength: 40,
          pattern: '^([0-9]{1,6}[smhd]|[0-9]{4}-[0-9]{2}-[0-9]{2}T.+)$',
          description: '15m, 24h, 7d (up to 6 digits) or an RFC 3339 time',
        }),
      ),
    }),
    response: Type.Object({
      deployment: Type.String(),
      since: Type.String(),
      requests: Type.Integer(),
      bytes: Type.Integer(),
      status: StatusGroups,
      p50_ms: Nullable(Type.Number()),
      p95_ms: Nullable(Type.Number()),
      top_paths: Type.Array(Type.Object({ path: Type.String(), requests: Type.Integer() })),
      top_sources: Type.Array(Type.Object({ source_ip: Type.String(), requests: Type.Integer() })),
    }),
    handler: async (req) => {
      const name = req.params.name;
      if (!rt.deployments().get(name)) throw errors.notFound(`deployment '${name}' not found`);
      const since = sinceParam(req.query.since, DAY);
      const s = await journal.stats({ deployment: name, start_ms: since });
      const row = s.deployments[0];
      const [paths, sources] = await Promise.all([
        journal.top({ deployment: name, start_ms: since }, 'path', 10),
        journal.top({ deployment: name, start_ms: since }, 'source_ip', 10),
      ]);
      return {
        deployment: name,
        since: new Date(since).toISOString(),
        requests: row?.requests ?? 0,
        bytes: row?.bytes ?? 0,
        status: row?.status ?? { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 },
        p50_ms: row?.p50_ms ?? null,
        p95_ms: row?.p95_ms ?? null,
        top_paths: paths.map((r) => ({ path: r.value, requests: r.requests })),
        top_sources: sources.map((r) => ({ source_ip: r.value, requests: r.requests })),
      };
    },
  });
}
