/** The infrastructure services: list, one, logs (reads); settings, start, stop, restart (operations). */
import { operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { INFRASTRUCTURE_ERRORS } from '../api.js';
import type { InfrastructureManager } from '../manager.js';
import type { ServiceOperations } from '../operations/services.js';
import { Configure, LogLines, LogsQuery, NameParams, Start, Status } from '../schemas.js';

export function serviceRoutes(ctx: PluginContext, manager: InfrastructureManager, ops: ServiceOperations): void {
  readRoutes(ctx, manager);
  changeRoutes(ctx, ops);
}

function readRoutes(ctx: PluginContext, manager: InfrastructureManager): void {
  ctx.route({
    method: 'GET',
    path: '/infrastructure',
    permission: 'infrastructure:read',
    operationId: 'infrastructure.list',
    summary: 'Infrastructure services with status, health and ports',
    response: Type.Array(Status),
    handler: () => manager.list(),
  });

  ctx.route({
    method: 'GET',
    path: '/infrastructure/:name',
    permission: 'infrastructure:read',
    operationId: 'infrastructure.get',
    summary: 'One infrastructure service',
    params: NameParams,
    response: Status,
    handler: (req) => manager.get(req.params.name),
  });

  ctx.route({
    method: 'GET',
    path: '/infrastructure/:name/logs',
    permission: 'infrastructure:read',
    operationId: 'infrastructure.logs',
    summary: 'Logs of a service: the last `tail` lines (0: all), optionally only lines containing `filter`',
    params: NameParams,
    query: LogsQuery,
    response: LogLines,
    handler: (req) => manager.logs(req.params.name, { tail: req.query.tail ?? 100, filter: req.query.filter, service: req.query.service }),
  });
}

function changeRoutes(ctx: PluginContext, ops: ServiceOperations): void {
  ctx.route(
    operationRoute(ops.configure, {
      method: 'PUT',
      path: '/infrastructure/:name/settings',
      permission: 'infrastructure:write',
      summary: 'Change template settings of a service (a running service is updated)',
      params: NameParams,
      body: Configure,
      response: Status,
      errors: INFRASTRUCTURE_ERRORS,
      input: (req) => ({ ...req.body, ...req.params }),
    }),
  );

  ctx.route(
    operationRoute(ops.start, {
      method: 'POST',
      path: '/infrastructure/:name/start',
      permission: 'infrastructure:write',
      summary: 'Start a service (its project is created from the template first)',
      params: NameParams,
      body: Start,
      response: Status,
      errors: INFRASTRUCTURE_ERRORS,
      input: (req) => ({ ...req.body, ...req.params }),
      respond: (status) => reply.ok(status, `'${status.name}' started`),
    }),
  );

  const lifecycle = [
    [ops.stop, 'stop', 'stopped', 'Stop a service (containers and data are kept)'],
    [ops.restart, 'restart', 'restarted', 'Recreate and restart a service'],
  ] as const;
  for (const [op, verb, done, summary] of lifecycle) {
    ctx.route(
      operationRoute(op, {
        method: 'POST',
        path: `/infrastructure/:name/${verb}`,
        permission: 'infrastructure:write',
        summary,
        params: NameParams,
        response: Status,
        errors: INFRASTRUCTURE_ERRORS,
        input: (req) => req.params,
        respond: (status) => reply.ok(status, `'${status.name}' ${done}`),
      }),
    );
  }
}
