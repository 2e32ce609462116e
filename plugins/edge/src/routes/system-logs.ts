/** System log routes: the sources, a read of one, and a websocket that follows it. */
import { Type, type PluginContext } from '@agent/sdk';
import { ENGINE_ERRORS } from '@agent/plugin-docker/api';
import type { EdgeConfig } from '../config.js';
import { LineSchema, LogsQuery, SourceSchema, type SystemLogs } from '../syslogs/sources.js';

export function systemLogRoutes(ctx: PluginContext<EdgeConfig>, logs: SystemLogs): void {
  const common = { permission: 'system-logs:read', tag: 'system' } as const;
  const bound = 'With `deployment`, bound to it (its access-log lines only); without, global.';

  ctx.route({
    ...common,
    method: 'GET',
    path: '/system/logs/sources',
    operationId: 'system.logSources',
    summary: 'Host log sources: proxy access and error logs, shared infrastructure containers',
    response: Type.Array(SourceSchema),
    // Infrastructure containers are listed by the docker service.
    errors: ENGINE_ERRORS,
    handler: () => logs.sources(),
  });

  ctx.route({
    ...common,
    method: 'GET',
    path: '/system/logs',
    operationId: 'system.logs',
    summary: 'Read a host log source (last lines, text filter, one deployment)',
    query: LogsQuery,
    description: bound,
    deployment: (req) => req.query.deployment,
    response: Type.Array(LineSchema),
    // A container source is read through the docker service.
    errors: ENGINE_ERRORS,
    handler: (req) => logs.read(req.query, req.principal),
  });

  ctx.websocket({
    ...common,
    path: '/system/logs/stream',
    operationId: 'system.logsStream',
    summary: 'Follow a host log source (same query as /system/logs); messages are {line, time, stream}',
    query: LogsQuery,
    description: bound,
    deployment: (req) => req.query.deployment,
    handler: (conn, req) => logs.follow(conn, req.query, req.principal),
  });
}
