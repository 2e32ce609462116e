/**
 * system: the agent's runtime settings (`/api/settings`), system statistics (`/api/stats`) and the doctor report
 * (`/api/system/doctor`).
 */
import { coreServices, definePlugin, optional } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { dockerService } from '@agent/plugin-docker/api';
import { settingsSchemas } from './settings.js';
import { settingsOperations } from './operations/settings.js';
import { settingsRoutes } from './routes/settings.js';
import { statsRoutes } from './routes/stats.js';
import { doctorRoutes } from './routes/doctor.js';

export default definePlugin({
  name: 'system',
  version: '0.1.0',
  description: 'Agent settings, system statistics and the doctor report',
  // Settings and the doctor report are global (global scope only); stats are host figures for everyone plus the
  // deployments and containers each principal reaches (filtered).
  resources: {
    settings: { description: 'runtime settings of the agent and its plugins (secrets masked; global)', operator: 'read', viewer: 'read', owner: 'global' },
    stats: {
      description: 'host, Docker and agent statistics (deployment and container counts of the deployments the caller reaches)',
      operator: 'read',
      viewer: 'read',
      owner: 'both',
    },
    doctor: {
      description: 'the doctor report: versions, paths and state of the external parts (admins only by default; global)',
      operator: 'none',
      viewer: 'none',
      owner: 'global',
    },
  },
  deps: { settings: coreServices.settings, plugins: coreServices.plugins, docker: optional(dockerService), deployments: optional(deploymentsService) },

  setup(ctx, deps) {
    const schemas = settingsSchemas(deps.settings);
    // The settings update is an operation (src/operations); stats and the doctor report are reads.
    settingsRoutes(ctx, deps.settings, schemas, settingsOperations(deps.settings, schemas));
    statsRoutes(ctx, { docker: () => deps.docker, deployments: () => deps.deployments });
    doctorRoutes(ctx, deps.plugins);
    // Every plugin has declared its settings by the time the plugins start.
    return { start: () => schemas.complete() };
  },
});
