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
  // Settings and the doctor report are global (global scope only); stats are host figures for everyone plus the
  // deployments and containers each principal reaches (filtered).
  resources: {
    settings: { description: 'runtime settings of the agent and its plugins (secrets masked; global)', operator: 'read', viewer: 'read', owner: 'global' },
    stats: { description: 'host, Docker and agent statistics (deployment and container counts of the deployments the caller reaches)', operator: 'read', viewer: 'read', owner: 'both' },
    doctor: { description: 'the doctor report: versions, paths and state of the external parts (admins only by default; global)', operator: 'none', viewer: 'none', owner: 'global' },
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
