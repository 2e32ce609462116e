/**
 * observability: an app plugin. The apps plugin runs `dist/app/main.js` as a separate process (restarted with
 * backoff if it dies) and the core serves it at `/api/plugin/observability/…` after authentication, the permission
 * and the tenancy checks; the app filters every answer by the caller's scope and deployment grants. This in-process
 * part tells the app what only the agent knows (`agent-routes.ts`): which deployments were deleted, and whether a
 * rule's creator may still act.
 */
import { definePlugin, principalDirectory, Type } from '@agent/sdk';
import { registerAgentRoutes } from './agent-routes.js';
import { routes } from './app-routes.js';

const Seconds = (def: number, min: number, max: number, description: string) => Type.Integer({ minimum: min, maximum: max, default: def, description });

export const configSchema = Type.Object({
  observability: Type.Object(
    {
      sample_interval: Seconds(5, 1, 3600, 'seconds between two samples of every container and of the host'),
      raw_retention: Seconds(6 * 3600, 60, 30 * 86400, 'seconds raw samples are kept (default 6 h)'),
      rollup_retention: Seconds(7 * 86400, 3600, 400 * 86400, 'seconds 1-minute rollups are kept (default 7 days)'),
      docker_socket: Type.String({ default: '/var/run/docker.sock', description: 'the Docker engine socket the collector reads' }),
      container_labels: Type.Record(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_./-]{0,127}$' }), Type.String({ maxLength: 256 }), {
        default: {},
        description: 'only watch containers carrying all these labels (empty: every container)',
      }),
      disk_path: Type.String({ default: '', description: 'file system measured by system.disk.utilization (default: the agent data folder)' }),
      stats_concurrency: Type.Integer({ minimum: 1, maximum: 64, default: 8, description: 'engine stats requests in flight at once' }),
      health: Type.Object(
        {
          enabled: Type.Boolean({ default: true }),
          cooldown: Seconds(60, 1, 86400, 'seconds between two restarts of the same container'),
          max_retries: Type.Integer({ minimum: 0, maximum: 100, default: 3, description: 'restarts before giving up' }),
          scope: Type.Union([Type.Literal('deployments'), Type.Literal('all')], {
            default: 'deployments',
            description: "containers of this agent's deployments only, or every container",
          }),
        },
        { default: {} },
      ),
      alerts: Type.Object(
        {
          events_max: Type.Integer({ minimum: 10, maximum: 100_000, default: 1000, description: 'alert and health events kept' }),
        },
        { default: {} },
      ),
    },
    { default: {} },
  ),
});

export default definePlugin({
  name: 'observability',
  version: '0.1.0',
  description: 'Container and host metrics, alert rules and a container health watcher (a separate app process)',
  config: configSchema,
  resources: {
    metrics: {
      description:
        "container and host metrics and container health (a deployment's containers are its own; host metrics and containers of no deployment are global)",
      operator: 'read',
      viewer: 'read',
      owner: 'both',
    },
    alerts: {
      description: 'alert rules, firing alerts and alert history (of a deployment; rules of every container or of the host are global)',
      operator: 'write',
      viewer: 'read',
      owner: 'deployment',
    },
    observability: {
      description: 'settings of the observability app (sampling, retention, health watcher)',
      operator: 'read',
      viewer: 'none',
      owner: 'global',
    },
  },
  app: { entry: 'dist/app/main.js', routes },
  deps: { principals: principalDirectory },
  async setup(ctx, deps) {
    await registerAgentRoutes(ctx, deps.principals);
  },
});
