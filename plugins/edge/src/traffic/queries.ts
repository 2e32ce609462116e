/** Traffic queries: the journal with its filters, statistics, unknown domains and one deployment's figures. */
import { deploymentName, deploymentOrRetired, errors, Nullable, Pagination, reply, Type, type Principal, type Static } from '@agent/sdk';
import { filterScope, TimeQuery, timeParam } from '../access.js';
import { checkIp, printable } from '../validate.js';
import type { Runtime } from '../runtime.js';
import { COUNT_CAP, type TrafficJournal } from './journal.js';
import { invalidPathPattern, MAX_PATH_PATTERN_LENGTH, MAX_PATH_WILDCARDS } from './pattern.js';

export const TrafficItem = Type.Object({
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
export const StatusGroups = Type.Record(Type.String(), Type.Integer());
export const DeploymentStats = Type.Object({
  deployment: Nullable(Type.String()),
  requests: Type.Integer(),
  bytes: Type.Integer(),
  status: StatusGroups,
  p50_ms: Nullable(Type.Number()),
  p95_ms: Nullable(Type.Number()),
});
export const Stats = Type.Object({
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
export const LogsQuery = Type.Object({
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
});

export const StatsQuery = Type.Object({
  deployment: Type.Optional(deploymentOrRetired()),
  start_time: TimeQuery(),
  end_time: TimeQuery(),
});

export const UnknownDomainsQuery = Type.Object({
  start_time: TimeQuery(),
  end_time: TimeQuery(),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
});
export const UnknownDomain = Type.Object({
  host: Type.String(),
  requests: Type.Integer(),
  sources: Type.Integer(),
  first_seen: Type.String(),
  last_seen: Type.String(),
});

export const DeploymentParams = Type.Object({ name: deploymentName() });
export const DeploymentQuery = Type.Object({
  since: Type.Optional(
    Type.String({
      maxLength: 40,
      pattern: '^([0-9]{1,6}[smhd]|[0-9]{4}-[0-9]{2}-[0-9]{2}T.+)$',
      description: '15m, 24h, 7d (up to 6 digits) or an RFC 3339 time',
    }),
  ),
});
export const DeploymentTraffic = Type.Object({
  deployment: Type.String(),
  since: Type.String(),
  requests: Type.Integer(),
  bytes: Type.Integer(),
  status: StatusGroups,
  p50_ms: Nullable(Type.Number()),
  p95_ms: Nullable(Type.Number()),
  top_paths: Type.Array(Type.Object({ path: Type.String(), requests: Type.Integer() })),
  top_sources: Type.Array(Type.Object({ source_ip: Type.String(), requests: Type.Integer() })),
});

const DAY = 86_400_000;

/** `15m`, `24h`, `7d`, `30s` or an RFC 3339 time → epoch ms. */
export function sinceParam(value: string | undefined, fallbackMs: number): number {
  if (!value) return Date.now() - fallbackMs;
  const m = /^(\d{1,6})([smhd])$/.exec(value);
  if (m) return Date.now() - Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: DAY }[m[2] as 's' | 'm' | 'h' | 'd'];
  return timeParam(value, 'since')!;
}

export class TrafficQueries {
  constructor(
    private readonly rt: Runtime,
    private readonly journal: TrafficJournal,
  ) {}

  /** A page of rows the caller reaches, newest first. */
  async logs(q: Static<typeof LogsQuery>, principal: Principal) {
    const visible = filterScope(principal, q.deployment);
    const limit = q.limit ?? 100;
    const offset = q.offset ?? 0;
    const problem = q.path === undefined ? null : invalidPathPattern(q.path);
    if (problem) throw errors.badRequest(`path: '${printable(q.path!)}' ${problem}`, 'INVALID_PATTERN', { field: 'path' });
    const { items, total, capped } = await this.journal.search(
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
  }

  async stats(q: Static<typeof StatsQuery>, principal: Principal): Promise<Static<typeof Stats>> {
    const visible = filterScope(principal, q.deployment);
    const start = timeParam(q.start_time, 'start_time') ?? Date.now() - DAY;
    const end = timeParam(q.end_time, 'end_time');
    const s = await this.journal.stats({ deployment: q.deployment, deployments: visible, start_ms: start, end_ms: end });
    return { since: new Date(start).toISOString(), until: end === undefined ? null : new Date(end).toISOString(), ...s };
  }

  async unknownDomains(q: Static<typeof UnknownDomainsQuery>): Promise<Static<typeof UnknownDomain>[]> {
    const start = timeParam(q.start_time, 'start_time') ?? Date.now() - 7 * DAY;
    return (await this.journal.unknownDomains({ start_ms: start, end_ms: timeParam(q.end_time, 'end_time') }, q.limit ?? 100)).map((r) => ({
      host: r.host,
      requests: r.requests,
      sources: r.sources,
      first_seen: new Date(r.first).toISOString(),
      last_seen: new Date(r.last).toISOString(),
    }));
  }

  async deployment(name: string, sinceValue: string | undefined): Promise<Static<typeof DeploymentTraffic>> {
    if (!this.rt.deployments().get(name)) throw errors.notFound(`deployment '${name}' not found`);
    const since = sinceParam(sinceValue, DAY);
    const s = await this.journal.stats({ deployment: name, start_ms: since });
    const row = s.deployments[0];
    const [paths, sources] = await Promise.all([
      this.journal.top({ deployment: name, start_ms: since }, 'path', 10),
      this.journal.top({ deployment: name, start_ms: since }, 'source_ip', 10),
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
  }
}
