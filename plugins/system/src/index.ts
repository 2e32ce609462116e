/**
 * system: the agent's runtime settings (`/api/settings`), system statistics (`/api/stats`) and the doctor report
 * (`/api/system/doctor`).
 */
import { coreServices, definePlugin, deploymentsService, dockerService } from '@agent/sdk';
import { registerSettingsRoutes } from './settings.js';
import { registerStatsRoute } from './stats.js';
import { registerDoctorRoute } from './doctor.js';

let completeSettings: (() => void) | null = null;

export default definePlugin({
  name: 'system',
  version: '0.1.0',
  description: 'Agent settings, system statistics and the doctor report',
  resources: {
    settings: { description: 'runtime settings of the agent and its plugins (secrets masked)', operator: 'read', viewer: 'read' },
    stats: { description: 'host, Docker and agent statistics', operator: 'read', viewer: 'read' },
    doctor: { description: 'the doctor report: versions, paths and state of the external parts (admins only by default)', operator: 'none', viewer: 'none' },
  },
  optional: [dockerService, deploymentsService],

  setup(ctx) {
    const settings = registerSettingsRoutes(ctx, ctx.services.get(coreServices.settings));
    completeSettings = settings.complete;
    registerStatsRoute(ctx, {
      docker: () => ctx.services.optional(dockerService),
      deployments: () => ctx.services.optional(deploymentsService),
    });
    registerDoctorRoute(ctx);
  },

  start() {
    // Every plugin has declared its settings by now.
    completeSettings?.();
  },
});
