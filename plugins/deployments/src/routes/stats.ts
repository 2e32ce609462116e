/** Resource statistics of a deployment's running containers. */
import { Type, type PluginContext } from '@agent/sdk';
import { ENGINE_ERRORS } from '@agent/plugin-docker/api';
import type { DeploymentManager } from '../manager.js';
import { NameParams } from '../schemas.js';
import type { ContainersOf } from '../logs.js';

export function statsRoutes(ctx: PluginContext<any>, manager: DeploymentManager, containersOf: ContainersOf): void {
  const docker = manager.opts.docker;
  ctx.route({
    method: 'GET',
    path: '/deployments/:name/stats',
    permission: 'deployments:read',
    operationId: 'deployments.stats',
    tag: 'deployments',
    summary: 'Resource usage of every running container of the deployment',
    description: 'One-shot engine statistics, fetched in parallel: CPU %, memory usage/limit/%, network rx/tx bytes, block I/O bytes, pids.',
    params: NameParams,
    deployment: 'name',
    errors: ENGINE_ERRORS,
    response: Type.Array(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        deployment: Type.Union([Type.String(), Type.Null()]),
        service: Type.Union([Type.String(), Type.Null()]),
        cpu_percent: Type.Number(),
        memory_usage: Type.Integer(),
        memory_limit: Type.Integer(),
        memory_percent: Type.Number(),
        network_rx: Type.Integer(),
        network_tx: Type.Integer(),
        block_read: Type.Integer(),
        block_write: Type.Integer(),
        pids: Type.Integer(),
        read_at: Type.String(),
      }),
    ),
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      const running = await containersOf(entry, undefined, true);
      const stats = await Promise.all(
        running.map((c) =>
          docker.stats(c.id).catch((err) => {
            // A container that stopped meanwhile has no statistics: leave it out.
            if ((err as { status?: number }).status === 404 || (err as { status?: number }).status === 409) return null;
            throw err;
          }),
        ),
      );
      return stats.filter((s) => s !== null);
    },
  });
}
