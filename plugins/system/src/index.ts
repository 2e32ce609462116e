/** system: the agent's runtime settings (`/api/settings`) and system statistics (`/api/stats`). */
import { coreServices, definePlugin, deploymentsService, dockerService } from '@agent/sdk';
import { registerSettingsRoutes } from './settings.js';
import { registerStatsRoute } from './stats.js';

let completeSettings: (() => void) | null = null;

export default definePlugin({
  name: 'system',
  version: '0.1.0',
  description: 'Agent settings and system statistics',
  resources: {
    settings: { description: 'runtime settings of the agent and its plugins (secrets masked)', operator: 'read', viewer: 'read' },
    stats: { description: 'host, Docker and agent statistics', operator: 'read', viewer: 'read' },
  },
  optional: [dockerService, deploymentsService],

  setup(ctx) {
    const settings = registerSettingsRoutes(ctx, ctx.services.get(coreServices.settings));
    completeSettings = settings.complete;
    registerStatsRoute(ctx, {
      docker: () => ctx.services.optional(dockerService),
      deployments: () => ctx.services.optional(deploymentsService),
    });
  },

  start() {
    // Every plugin has declared its settings by now.
    completeSettings?.();
  },
});
