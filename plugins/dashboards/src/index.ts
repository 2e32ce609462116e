/**
 * dashboards: saved panel layouts over container and serving metrics. A dashboard belongs to the user who made
 * it; it is visible to its owner and to admins, and to every global principal who may read dashboards when
 * `shared` — with the panels of deployments they cannot access left out. A principal limited to its deployments
 * only ever sees and changes its own: a shared dashboard is made by and for the whole team (its names and panel
 * titles describe everyone's deployments).
 */
import { randomUUID } from 'node:crypto';
import { definePlugin, deploymentName, errors, reply, Type, type Principal, type Static } from '@agent/sdk';
import { CONTAINER_METRICS, SERVING_METRICS } from '@agent/plugin-observability/api';
import type {} from '@agent/plugin-deployments/api';

const SERIES: Record<'container' | 'serving', string[]> = {
  container: CONTAINER_METRICS.map((m) => m.name),
  serving: SERVING_METRICS.map((m) => m.name),
};

const PanelInput = Type.Object({
  id: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$', description: 'generated when absent' })),
  title: Type.String({ minLength: 1, maxLength: 100 }),
  source: Type.Union([Type.Literal('container'), Type.Literal('serving')]),
  series: Type.String({
    minLength: 1,
    maxLength: 100,
    description: `a metric of the source: container: ${SERIES.container.join(', ')}; serving: ${SERIES.serving.join(', ')}`,
  }),
  deployment: Type.Optional(deploymentName()),
  type: Type.Union([Type.Literal('line'), Type.Literal('stat')]),
  width: Type.Integer({ minimum: 1, maximum: 12, description: 'columns of a 12-column grid' }),
});

const DashboardInput = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  panels: Type.Array(PanelInput, { maxItems: 50 }),
  shared: Type.Optional(Type.Boolean({ default: false, description: 'visible to every user who may read dashboards' })),
});

const Panel = Type.Object({
  id: Type.String(),
  title: Type.String(),
  source: Type.String(),
  series: Type.String(),
  deployment: Type.Optional(Type.String()),
  type: Type.String(),
  width: Type.Integer(),
});

const DashboardView = Type.Object({
  id: Type.String(),
  name: Type.String(),
  panels: Type.Array(Panel),
  shared: Type.Boolean(),
  owner: Type.Object({ id: Type.Union([Type.Integer(), Type.Null()]), name: Type.String() }),
  created_at: Type.String(),
  updated_at: Type.String(),
});

type Panel = Static<typeof Panel>;
interface Dashboard {
  id: string;
  name: string;
  panels: Panel[];
  shared: boolean;
  owner: { id: number | null; principal: string; name: string };
  created_at: string;
  updated_at: string;
}

const IdParams = Type.Object({ id: Type.String({ format: 'uuid' }) });

const isOwner = (p: Principal, d: Dashboard) => d.owner.principal === p.id || (p.user_id !== null && d.owner.id === p.user_id);
/** `isAdmin` is global by definition: admins see other users' dashboards, which no permission expresses. */
const visible = (p: Principal, d: Dashboard) => p.isAdmin || isOwner(p, d) || (d.shared && p.isGlobal);
const panelVisible = (p: Principal, panel: Panel) => panel.deployment === undefined || p.canAccessDeployment(panel.deployment);

const view = (p: Principal, d: Dashboard) => ({
  id: d.id,
  name: d.name,
  shared: d.shared,
  owner: { id: d.owner.id, name: d.owner.name },
  panels: d.panels.filter((panel) => panelVisible(p, panel)),
  created_at: d.created_at,
  updated_at: d.updated_at,
});

export default definePlugin({
  name: 'dashboards',
  version: '0.1.0',
  description: 'Saved dashboards of metric panels, per user',
  // Global: a dashboard belongs to a user, not to a deployment (its panels may name several, or none).
  resources: { dashboards: { description: "saved dashboards (each user's own)", operator: 'write', viewer: 'read', owner: 'global' } },

  async setup(ctx) {
    const doc = await ctx.store.document({ dashboards: [] as Dashboard[] }, 'dashboards');

    // A panel of a deleted deployment would show a new deployment of the same name (someone else's, maybe): removed.
    ctx.events.on('deployment.deleted', async ({ name }) => {
      if (!doc.data.dashboards.some((d) => d.panels.some((p) => p.deployment === name))) return;
      await doc.update((data) => {
        for (const d of data.dashboards) d.panels = d.panels.filter((p) => p.deployment !== name);
      });
      ctx.log.info('dashboard panels of a deleted deployment removed', { deployment: name });
    });

    const panelsOf = (p: Principal, input: Static<typeof DashboardInput>['panels']): Panel[] => {
      const ids = new Set<string>();
      return input.map((panel, i) => {
        const at = `body.panels[${i}]`;
        if (!SERIES[panel.source].includes(panel.series)) {
          throw errors.badRequest(
            `${at}.series: unknown ${panel.source} series '${panel.series}' (known: ${SERIES[panel.source].join(', ')})`,
            'VALIDATION_FAILED',
            { field: `panels[${i}].series` },
          );
        }
        if (panel.deployment !== undefined && !p.canAccessDeployment(panel.deployment)) {
          throw errors.badRequest(`${at}.deployment: unknown deployment '${panel.deployment}'`, 'VALIDATION_FAILED', { field: `panels[${i}].deployment` });
        }
        const id = panel.id ?? `p${i + 1}-${randomUUID().slice(0, 6)}`;
        if (ids.has(id)) throw errors.badRequest(`${at}.id: duplicate panel id '${id}'`, 'VALIDATION_FAILED', { field: `panels[${i}].id` });
        ids.add(id);
        return {
          id,
          title: panel.title,
          source: panel.source,
          series: panel.series,
          ...(panel.deployment !== undefined ? { deployment: panel.deployment } : {}),
          type: panel.type,
          width: panel.width,
        };
      });
    };

    const find = (p: Principal, id: string): Dashboard => {
      const d = doc.data.dashboards.find((x) => x.id === id);
      if (!d || !visible(p, d)) throw errors.notFound(`dashboard '${id}' not found`);
      return d;
    };
    const mayChange = (p: Principal, d: Dashboard) => {
      if (!p.isAdmin && !isOwner(p, d)) throw errors.forbidden('only the owner of a dashboard (or an admin) may change it');
    };

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

    ctx.route({
      method: 'POST',
      path: '/dashboards',
      permission: 'dashboards:write',
      operationId: 'dashboards.create',
      creates: 'id',
      tenancy: 'own',
      status: 201,
      summary: 'Create a dashboard',
      body: DashboardInput,
      response: DashboardView,
      handler: async (req) => {
        const p = req.principal;
        const panels = panelsOf(p, req.body.panels);
        const now = new Date().toISOString();
        const d: Dashboard = {
          id: randomUUID(),
          name: req.body.name,
          panels,
          shared: req.body.shared ?? false,
          owner: { id: p.user_id, principal: p.id, name: p.name },
          created_at: now,
          updated_at: now,
        };
        await doc.update((data) => {
          data.dashboards.push(d);
        });
        return reply.created(view(p, d), `dashboard '${d.name}' created`);
      },
    });

    ctx.route({
      method: 'GET',
      path: '/dashboards/:id',
      permission: 'dashboards:read',
      operationId: 'dashboards.get',
      tenancy: 'own',
      summary: 'One dashboard',
      params: IdParams,
      response: DashboardView,
      handler: (req) => view(req.principal, find(req.principal, req.params.id)),
    });

    ctx.route({
      method: 'PUT',
      path: '/dashboards/:id',
      permission: 'dashboards:write',
      operationId: 'dashboards.update',
      tenancy: 'own',
      summary: 'Replace a dashboard (owner or admin)',
      params: IdParams,
      body: DashboardInput,
      response: DashboardView,
      handler: async (req) => {
        const p = req.principal;
        const d = find(p, req.params.id);
        mayChange(p, d);
        // Panels of deployments the caller cannot see are kept: it may not remove what it cannot see.
        const hidden = d.panels.filter((panel) => !panelVisible(p, panel));
        const panels = [...panelsOf(p, req.body.panels), ...hidden];
        if (new Set(panels.map((x) => x.id)).size !== panels.length) throw errors.badRequest('body.panels: a panel id is already used', 'VALIDATION_FAILED');
        const updated = await doc.update((data) => {
          const target = data.dashboards.find((x) => x.id === d.id)!;
          Object.assign(target, { name: req.body.name, panels, shared: req.body.shared ?? target.shared, updated_at: new Date().toISOString() });
          return target;
        });
        return view(p, updated);
      },
    });

    ctx.route({
      method: 'DELETE',
      path: '/dashboards/:id',
      permission: 'dashboards:write',
      operationId: 'dashboards.delete',
      tenancy: 'own',
      summary: 'Remove a dashboard (owner or admin)',
      params: IdParams,
      handler: async (req) => {
        const d = find(req.principal, req.params.id);
        mayChange(req.principal, d);
        await doc.update((data) => {
          data.dashboards = data.dashboards.filter((x) => x.id !== d.id);
        });
        return reply.ok(null, `dashboard '${d.name}' deleted`);
      },
    });
  },
});
