/** `/api/audit/*` and the retention job over the audit journal. */
import { errors, MAX_INTEGER, RecordId, reply, Seconds, Type, type PluginContext, type Principal, type Static } from '@agent/sdk';
import type { AuditJournalService, IdentityService } from '../api.js';
import { AuditEventView } from '../schemas.js';
import { exportStream } from './export.js';
import {
  buildWhere,
  COLUMNS,
  scopeSql,
  searchScope,
  StatementCache,
  toSearch,
  toView,
  visibility,
  type AuditFilter,
  type AuditRow,
  type IdRange,
  type Where,
} from './query.js';

const ActorType = Type.Union([Type.Literal('user'), Type.Literal('api_key'), Type.Literal('system')]);
const Text = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: 256, description }));
const Time = (description: string) => Type.Optional(Type.String({ format: 'date-time', description }));

const filterFields = {
  actor_id: Text('e.g. `user:3`, `api_key:5`, `system:backups`'),
  actor_type: Type.Optional(ActorType),
  action: Text('operation id, e.g. `deployments.create`'),
  resource_type: Text('e.g. `deployments`'),
  resource_id: Text('e.g. a deployment name or an id'),
  deployment: Text('events about this deployment'),
  success: Type.Optional(Type.Boolean()),
  client_ip: Text('client IP address'),
  start_time: Time('from this time (RFC 3339, inclusive)'),
  end_time: Time('up to this time (RFC 3339, inclusive)'),
};
const FilterQuery = Type.Object({
  ...filterFields,
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INTEGER, default: 0 })),
});

const Count = Type.Integer({ minimum: 0 });
const StatsView = Type.Object({
  total: Count,
  succeeded: Count,
  failed: Count,
  by_action: Type.Array(Type.Object({ action: Type.String(), count: Count, failed: Count })),
  by_actor: Type.Array(Type.Object({ actor_id: Type.String(), actor_type: Type.String(), actor_name: Type.Union([Type.String(), Type.Null()]), count: Count })),
  by_resource: Type.Array(Type.Object({ resource_type: Type.String(), count: Count })),
  by_success: Type.Array(Type.Object({ success: Type.Boolean(), count: Count })),
  per_day: Type.Array(Type.Object({ day: Type.String(), count: Count, failed: Count })),
});

export const AuditSettings = Type.Object({
  retention_days: Type.Integer({
    minimum: 0,
    maximum: 36500,
    default: 365,
    description: 'audit events older than this are deleted daily; 0 keeps them forever',
  }),
});

const DAY_MS = 86_400_000;
/** Matches up to which stats aggregate the rows the search found, by id (beyond: a scan of the table). */
const STATS_BY_IDS = 100_000;
/** Ids per DELETE statement of a cleanup. */
const DELETE_SLICE = 16_384;
/** Beyond this many matches a filtered list reports `total: COUNT_CAP, total_exact: false` (exact counts: /audit/stats). */
export const COUNT_CAP = 10_000;

export function registerAuditRoutes(ctx: PluginContext, identity: IdentityService, audit: AuditJournalService): void {
  // Reading `database` commits the events queued, so a read sees every earlier request.
  const db = () => audit.database;
  const statements = new StatementCache(db);
  const settings = ctx.settings(AuditSettings);

  /** Ids bounding a filter's time window (undefined without one): SQL scans read only that rowid range. */
  const rangeOf = (f: AuditFilter): IdRange | undefined =>
    f.start_time === undefined && f.end_time === undefined
      ? undefined
      : audit.idRange(f.start_time === undefined ? undefined : Date.parse(f.start_time), f.end_time === undefined ? undefined : Date.parse(f.end_time));

  /**
   * The rows a stats query aggregates: with column filters or a non-admin's visibility, the ids the journal's search
   * finds (up to STATS_BY_IDS: rowid reads instead of scanning the table, which has no column indexes); else, or
   * beyond, the filter in SQL (a time window read as its id range).
   */
  const statsWhere = (filter: AuditFilter, principal: Principal): Where => {
    const { start_time: _start, end_time: _end, ...equals } = filter;
    const scope = searchScope(principal, identity);
    if (scope || Object.values(equals).some((v) => v !== undefined)) {
      const found = audit.search({ ...toSearch(filter, scope, { limit: STATS_BY_IDS, offset: 0, countCap: STATS_BY_IDS }), idsOnly: true });
      if (found.exact) return { sql: 'WHERE id IN (SELECT value FROM json_each(?))', params: [JSON.stringify(found.ids)] };
    }
    db();
    return buildWhere(filter, scopeSql(scope), rangeOf(filter));
  };

  const checkRange = (f: AuditFilter) => {
    if (f.start_time && f.end_time && Date.parse(f.start_time) > Date.parse(f.end_time)) {
      throw errors.badRequest('query.start_time: must not be after end_time', 'VALIDATION_FAILED', { field: 'start_time' });
    }
  };

  ctx.route({
    method: 'GET',
    path: '/audit/events',
    permission: 'audit:read',
    tag: 'audit',
    operationId: 'audit.list',
    tenancy: 'filtered',
    summary: 'Audit events, newest first, with the filters of the spec (limit default 50, max 1000)',
    description: `Non-admins see the events of deployments they can access; a global one also its own actions, one limited to its deployments (a scoped user, a key with a \`deployments\` list) nothing else. \`meta.total\` is exact for an unfiltered list or a time window alone, and up to ${COUNT_CAP} matches; beyond, it is ${COUNT_CAP} with \`meta.total_exact: false\` (\`GET /api/audit/stats\` counts exactly).`,
    query: FilterQuery,
    response: Type.Array(AuditEventView),
    handler: (req) => {
      const { limit = 50, offset = 0, ...filter } = req.query;
      checkRange(filter);
      // The journal's search walks its block postings newest first and stops counting past COUNT_CAP, so a page
      // costs about the same whether ten thousand or a million events match.
      const found = audit.search(toSearch(filter, searchScope(req.principal, identity), { limit, offset, countCap: COUNT_CAP }));
      return reply.ok(found.rows.map(toView), undefined, { total: found.total, limit, offset, total_exact: found.exact });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/audit/events/:id',
    permission: 'audit:read',
    tag: 'audit',
    operationId: 'audit.get',
    tenancy: 'filtered',
    summary: 'One audit event',
    params: Type.Object({ id: RecordId('audit event id') }),
    response: AuditEventView,
    handler: (req) => {
      db();
      const where = buildWhere({}, visibility(req.principal, identity));
      const row = statements
        .get(`SELECT ${COLUMNS} FROM audit_events ${where.sql ? `${where.sql} AND` : 'WHERE'} id = ?`)
        .get(...where.params, req.params.id) as AuditRow | undefined;
      if (!row) throw errors.notFound(`audit event ${req.params.id} not found`);
      return toView(row);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/audit/stats',
    permission: 'audit:read',
    tag: 'audit',
    operationId: 'audit.stats',
    tenancy: 'filtered',
    summary: 'Audit statistics: totals, by action, actor, resource, success, and per day (UTC)',
    query: Type.Object({
      ...filterFields,
      top: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 20, description: 'entries per ranking' })),
    }),
    response: StatsView,
    handler: (req) => {
      const { top = 20, ...filter } = req.query;
      checkRange(filter);
      const w = statsWhere(filter, req.principal);
      const q = (sql: string, ...extra: unknown[]) => statements.get(sql).all(...w.params, ...extra) as Record<string, unknown>[];
      const totals = statements.get(`SELECT COUNT(*) AS total, COALESCE(SUM(success), 0) AS ok FROM audit_events ${w.sql}`).get(...w.params) as {
        total: number;
        ok: number;
      };
      return {
        total: totals.total,
        succeeded: totals.ok,
        failed: totals.total - totals.ok,
        by_action: q(
          `SELECT action, COUNT(*) AS count, SUM(1 - success) AS failed FROM audit_events ${w.sql} GROUP BY action ORDER BY count DESC, action LIMIT ?`,
          top,
        ) as never,
        by_actor: q(
          `SELECT actor_id, actor_type, MAX(actor_name) AS actor_name, COUNT(*) AS count FROM audit_events ${w.sql} GROUP BY actor_id, actor_type ORDER BY count DESC, actor_id LIMIT ?`,
          top,
        ) as never,
        by_resource: q(
          `SELECT resource_type, COUNT(*) AS count FROM audit_events ${w.sql} GROUP BY resource_type ORDER BY count DESC, resource_type LIMIT ?`,
          top,
        ) as never,
        // From the totals (success is 0 or 1): one scan less.
        by_success: [
          { success: true, count: totals.ok },
          { success: false, count: totals.total - totals.ok },
        ].filter((r) => r.count > 0),
        per_day: q(
          `SELECT strftime('%Y-%m-%d', time_ms / 1000, 'unixepoch') AS day, COUNT(*) AS count, SUM(1 - success) AS failed FROM audit_events ${w.sql} GROUP BY day ORDER BY day DESC LIMIT 366`,
        ) as never,
      };
    },
  });

  ctx.route({
    method: 'POST',
    path: '/audit/export',
    permission: 'audit:read',
    tag: 'audit',
    operationId: 'audit.export',
    tenancy: 'filtered',
    summary: 'Export audit events as CSV (RFC 4180) or a JSON array, streamed, oldest first',
    description:
      'CSV cells that a spreadsheet would evaluate (starting with `=`, `+`, `-`, `@`, tab, CR) are prefixed with an apostrophe. `format: json` answers `application/json`.',
    produces: 'text/csv',
    body: Type.Object({
      format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')], { default: 'json' })),
      ...filterFields,
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000, default: 100_000 })),
    }),
    handler: (req) => {
      const { format = 'json', limit = 100_000, ...filter } = req.body;
      checkRange(filter);
      db();
      const where = buildWhere(filter, visibility(req.principal, identity), rangeOf(filter));
      const batch = statements.get(`SELECT ${COLUMNS} FROM audit_events ${where.sql ? `${where.sql} AND` : 'WHERE'} id > ? ORDER BY id LIMIT ?`);
      const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 15);
      return reply.stream(exportStream(format, { batch, params: where.params, limit }, req.signal), {
        contentType: format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8',
        filename: `audit-${stamp}.${format}`,
      });
    },
  });

  /**
   * Deletes events older than `cutoffMs`, a few blocks of ids per statement, within the id range that can hold
   * them. The journal's triggers note the blocks touched; reading `database` again re-indexes them (the postings of
   * emptied blocks are dropped, the block the cut goes through is rebuilt from its rows).
   */
  const deleteOlderThan = (cutoffMs: number): number => {
    const range = audit.idRange(undefined, cutoffMs - 1);
    if (!range) return 0;
    const slice = statements.get('DELETE FROM audit_events WHERE id BETWEEN ? AND ? AND time_ms < ?');
    let deleted = 0;
    for (let from = range.first; from <= range.last; from += DELETE_SLICE) {
      deleted += slice.run(from, Math.min(range.last, from + DELETE_SLICE - 1), cutoffMs).changes;
    }
    db();
    return deleted;
  };

  ctx.route({
    method: 'DELETE',
    path: '/audit/cleanup',
    permission: 'audit:write',
    tag: 'audit',
    operationId: 'audit.cleanup',
    summary: 'Delete audit events older than `older_than` seconds',
    query: Type.Object({ older_than: Seconds({ description: 'seconds' }) }),
    response: Type.Object({ events_deleted: Count, older_than: Type.String() }),
    handler: (req) => {
      db();
      const cutoff = Date.now() - req.query.older_than * 1000;
      const deleted = deleteOlderThan(cutoff);
      return reply.ok({ events_deleted: deleted, older_than: new Date(cutoff).toISOString() }, `${deleted} audit events deleted`);
    },
  });

  const retention = ctx.job({
    name: 'audit-retention',
    cron: '23 3 * * *',
    description: 'deletes audit events older than the retention setting',
    run: async (run) => {
      const days = settings.get().retention_days;
      if (days === 0) {
        run.output('retention is 0: events are kept forever');
        return;
      }
      db();
      const deleted = deleteOlderThan(Date.now() - days * DAY_MS);
      run.output(`${deleted} events older than ${days} days deleted`);
      await ctx.audit({ action: 'audit.retention', resource_type: 'audit', success: true, detail: { events_deleted: deleted, retention_days: days } });
    },
  });

  ctx.route({
    method: 'POST',
    path: '/audit/retention/run',
    permission: 'audit:write',
    tag: 'audit',
    operationId: 'audit.retentionRun',
    summary: 'Apply the retention setting now (the daily job, run at once)',
    response: Type.Object({ status: Type.String(), output: Type.String(), error: Type.Union([Type.String(), Type.Null()]) }),
    handler: async () => {
      const execution = await retention.runNow();
      return { status: execution.status, output: execution.output, error: execution.error };
    },
  });
}

export type AuditSettingsValue = Static<typeof AuditSettings>;
