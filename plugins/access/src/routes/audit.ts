/** `/api/audit/*`: events, one event, statistics and the export (reads), cleanup and retention run (operations). */
import { operationRoute, RecordId, reply, Type, type PluginContext } from '@agent/sdk';
import { COUNT_CAP, type AuditReads } from '../audit/reads.js';
import { CleanupQuery, CleanupView, ExecutionView, ExportBody, ListQuery, StatsQuery, StatsView } from '../audit/schemas.js';
import type { AuditOperations } from '../operations/audit.js';
import { AuditEventView } from '../schemas.js';

export function auditRoutes(ctx: PluginContext, reads: AuditReads, ops: AuditOperations): void {
  readRoutes(ctx, reads);
  changeRoutes(ctx, ops);
}

function readRoutes(ctx: PluginContext, reads: AuditReads): void {
  ctx.route({
    method: 'GET',
    path: '/audit/events',
    permission: 'audit:read',
    tag: 'audit',
    operationId: 'audit.list',
    tenancy: 'filtered',
    summary: 'Audit events, newest first, with the filters of the spec (limit default 50, max 1000)',
    description: `Non-admins see the events of deployments they can access; a global one also its own actions, one limited to its deployments (a scoped user, a key with a \`deployments\` list) nothing else. \`meta.total\` is exact for an unfiltered list or a time window alone, and up to ${COUNT_CAP} matches; beyond, it is ${COUNT_CAP} with \`meta.total_exact: false\` (\`GET /api/audit/stats\` counts exactly).`,
    query: ListQuery,
    response: Type.Array(AuditEventView),
    handler: (req) => {
      const page = reads.list(req.query, req.principal);
      return reply.ok(page.rows, undefined, page.meta);
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
    handler: (req) => reads.get(req.params.id, req.principal),
  });

  ctx.route({
    method: 'GET',
    path: '/audit/stats',
    permission: 'audit:read',
    tag: 'audit',
    operationId: 'audit.stats',
    tenancy: 'filtered',
    summary: 'Audit statistics: totals, by action, actor, resource, success, and per day (UTC)',
    query: StatsQuery,
    response: StatsView,
    handler: (req) => reads.stats(req.query, req.principal),
  });

  // A read, though a POST (the filters are a body, the answer a stream): a plain route, not an operation.
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
    produces: ['text/csv', 'application/json'],
    body: ExportBody,
    // The JSON array of `format: json`.
    response: Type.Array(AuditEventView),
    handler: (req) => {
      const { stream, contentType, filename } = reads.export(req.body, req.principal, req.signal);
      return reply.stream(stream, { contentType, filename });
    },
  });
}

function changeRoutes(ctx: PluginContext, ops: AuditOperations): void {
  ctx.route(
    operationRoute(ops.cleanup, {
      method: 'DELETE',
      path: '/audit/cleanup',
      permission: 'audit:write',
      tag: 'audit',
      summary: 'Delete audit events older than `older_than` seconds',
      query: CleanupQuery,
      response: CleanupView,
      input: (req) => req.query,
      respond: (done) => reply.ok(done, `${done.events_deleted} audit events deleted`),
    }),
  );

  ctx.route(
    operationRoute(ops.retentionRun, {
      method: 'POST',
      path: '/audit/retention/run',
      permission: 'audit:write',
      tag: 'audit',
      summary: 'Apply the retention setting now (the daily job, run at once)',
      response: ExecutionView,
      input: () => ({}),
    }),
  );
}
