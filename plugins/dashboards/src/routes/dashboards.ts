/** /api/dashboards: list and get (reads), create, update, delete (operations). Every route is `tenancy: own`. */
import { operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { findVisible, view, visible, type DashboardsDocument } from '../dashboards.js';
import type { DashboardOperations } from '../operations/dashboards.js';
import { DashboardInput, DashboardView, IdParams } from '../schemas.js';

export function dashboardRoutes(ctx: PluginContext, doc: DashboardsDocument, ops: DashboardOperations): void {
  ctx.route({
    method: 'GET',
    path: '/dashboards',
    permission: 'dashboards:read',
    operationId: 'dashboards.list',
    tenancy: 'own',
    summary: 'Dashboards you can see (yours; shared ones too with global scope; all for an admin)',
    response: Type.Array(DashboardView),
    handler: (req) => doc.data.dashboards.filter((d) => visible(req.principal, d)).map((d) => view(req.principal, d)),
  });

  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/dashboards',
      permission: 'dashboards:write',
      creates: 'id',
      tenancy: 'own',
      status: 201,
      summary: 'Create a dashboard',
      body: DashboardInput,
      response: DashboardView,
      input: (req) => req.body,
      respond: (created) => reply.created(created, `dashboard '${created.name}' created`),
    }),
  );

  ctx.route({
    method: 'GET',
    path: '/dashboards/:id',
    permission: 'dashboards:read',
    operationId: 'dashboards.get',
    tenancy: 'own',
    summary: 'One dashboard',
    params: IdParams,
    response: DashboardView,
    handler: (req) => view(req.principal, findVisible(doc, req.principal, req.params.id)),
  });

  ctx.route(
    operationRoute(ops.update, {
      method: 'PUT',
      path: '/dashboards/:id',
      permission: 'dashboards:write',
      tenancy: 'own',
      summary: 'Replace a dashboard (owner or admin)',
      params: IdParams,
      body: DashboardInput,
      response: DashboardView,
      input: (req) => ({ ...req.body, id: req.params.id }),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/dashboards/:id',
      permission: 'dashboards:write',
      tenancy: 'own',
      summary: 'Remove a dashboard (owner or admin)',
      params: IdParams,
      input: (req) => req.params,
      respond: (d) => reply.ok(null, `dashboard '${d.name}' deleted`),
    }),
  );
}
