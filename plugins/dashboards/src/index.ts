/**
 * dashboards: saved panel layouts over container and serving metrics. A dashboard belongs to the user who made
 * it; it is visible to its owner and to admins, and to every global principal who may read dashboards when
 * `shared` — with the panels of deployments they cannot access left out. A principal limited to its deployments
 * only ever sees and changes its own: a shared dashboard is made by and for the whole team (its names and panel
 * titles describe everyone's deployments).
 */
import { definePlugin } from '@agent/sdk';
import type {} from '@agent/plugin-deployments/api';
import type { DashboardsDoc } from './dashboards.js';
import { dashboardOperations } from './operations/dashboards.js';
import { dashboardRoutes } from './routes/dashboards.js';

export default definePlugin({
  name: 'dashboards',
  version: '0.1.0',
  description: 'Saved dashboards of metric panels, per user',
  // Global: a dashboard belongs to a user, not to a deployment (its panels may name several, or none).
  resources: { dashboards: { description: "saved dashboards (each user's own)", operator: 'write', viewer: 'read', owner: 'global' } },

  async setup(ctx) {
    const doc = await ctx.store.document<DashboardsDoc>({ dashboards: [] }, 'dashboards');

    // A panel of a deleted deployment would show a new deployment of the same name (someone else's, maybe): removed.
    ctx.events.on('deployment.deleted', async ({ name }) => {
      if (!doc.data.dashboards.some((d) => d.panels.some((p) => p.deployment === name))) return;
      await doc.update((data) => {
        for (const d of data.dashboards) d.panels = d.panels.filter((p) => p.deployment !== name);
      });
      ctx.log.info('dashboard panels of a deleted deployment removed', { deployment: name });
    });

    // Each change is an operation (src/operations); the routes (src/routes) run them.
    dashboardRoutes(ctx, doc, dashboardOperations(doc));
  },
});
