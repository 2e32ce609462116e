/**
 * The changes of dashboards as operations: create, update (a replacement), delete. `prepare` runs every check (the
 * dashboard is visible to the caller and the caller its owner or an admin, the panels' series and deployments) and
 * builds the dashboard or panels `apply` stores. The routes run them (none is plannable).
 */
import { randomUUID } from 'node:crypto';
import { defineOperation, errors } from '@agent/sdk';
import { assertMayChange, findVisible, panelsOf, panelVisible, view, type Dashboard, type DashboardsDocument } from '../dashboards.js';
import { DashboardInput, IdParams, UpdateDashboardInput } from '../schemas.js';

export type DashboardOperations = ReturnType<typeof dashboardOperations>;

const aboutDashboard = (input: { id: string }) => ({ type: 'dashboard', id: input.id });

export function dashboardOperations(doc: DashboardsDocument) {
  /** The stored dashboard `apply` changes: deleted meanwhile by another request, it is a 404 as for prepare. */
  const stored = (data: { dashboards: Dashboard[] }, id: string) => {
    const found = data.dashboards.find((x) => x.id === id);
    if (!found) throw errors.notFound(`dashboard '${id}' not found`);
    return found;
  };

  const create = defineOperation({
    name: 'dashboards.create',
    input: DashboardInput,
    resource: (input) => ({ type: 'dashboard', id: input.name }),
    prepare: (input, { principal: p }) => {
      const panels = panelsOf(p, input.panels);
      const value = { name: input.name, panels, shared: input.shared ?? false, owner: { id: p.user_id, principal: p.id, name: p.name } };
      return {
        value,
        preview: { summary: `create dashboard '${input.name}'`, changes: [{ type: 'dashboard', id: input.name, actions: ['create'], after: value }] },
      };
    },
    apply: async (value, { principal }) => {
      const now = new Date().toISOString();
      const d: Dashboard = { id: randomUUID(), ...value, created_at: now, updated_at: now };
      await doc.update((data) => {
        data.dashboards.push(d);
      });
      return view(principal, d);
    },
  });

  const update = defineOperation({
    name: 'dashboards.update',
    input: UpdateDashboardInput,
    resource: aboutDashboard,
    prepare: (input, { principal: p }) => {
      const d = findVisible(doc, p, input.id);
      assertMayChange(p, d);
      // Panels of deployments the caller cannot see are kept: it may not remove what it cannot see.
      const hidden = d.panels.filter((panel) => !panelVisible(p, panel));
      const panels = [...panelsOf(p, input.panels), ...hidden];
      if (new Set(panels.map((x) => x.id)).size !== panels.length) throw errors.badRequest('body.panels: a panel id is already used', 'VALIDATION_FAILED');
      const value = { id: d.id, name: input.name, panels, shared: input.shared };
      return {
        value,
        preview: { summary: `update dashboard '${d.name}'`, changes: [{ type: 'dashboard', id: d.id, actions: ['update'], before: d, after: value }] },
      };
    },
    apply: async ({ id, name, panels, shared }, { principal }) => {
      const updated = await doc.update((data) => {
        const target = stored(data, id);
        Object.assign(target, { name, panels, shared: shared ?? target.shared, updated_at: new Date().toISOString() });
        return target;
      });
      return view(principal, updated);
    },
  });

  const remove = defineOperation({
    name: 'dashboards.delete',
    input: IdParams,
    resource: aboutDashboard,
    prepare: ({ id }, { principal }) => {
      const d = findVisible(doc, principal, id);
      assertMayChange(principal, d);
      return { value: d, preview: { summary: `delete dashboard '${d.name}'`, changes: [{ type: 'dashboard', id: d.id, actions: ['delete'], before: d }] } };
    },
    apply: async (d) => {
      await doc.update((data) => {
        data.dashboards = data.dashboards.filter((x) => x.id !== d.id);
      });
      return d;
    },
  });

  return { create, update, remove };
}
