/**
 * Scaling a service of a swarm deployment (`runtime: swarm`) as an operation: the route, its plans and other
 * callers run it. The replicas are set on the engine's service at once and kept in the deployment's record: later
 * deploys of the same file (a start, an update of the `.env`, a redeploy) run with them, until the file's own
 * `deploy.replicas` of the service changes (deploy/scale.ts).
 */
import { defineOperation, errors, Type } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';

const SERVICE = Type.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$' });
export const ScaleBody = Type.Object({
  service: SERVICE,
  replicas: Type.Integer({ minimum: 0, maximum: 100, description: 'tasks wanted (0 stops the service without removing it)' }),
});
export const ScaleInput = Type.Object({ name: Type.String(), service: SERVICE, replicas: ScaleBody.properties.replicas });

export type ScaleOperations = ReturnType<typeof scaleOperations>;

export function scaleOperations(manager: DeploymentManager) {
  const docker = manager.opts.docker;

  const scale = defineOperation({
    name: 'deployments.scale',
    input: ScaleInput,
    resource: ({ name }) => ({ type: 'deployment', id: name }),
    prepare: async ({ name, service, replicas }) => {
      const entry = manager.require(name);
      if (entry.record.runtime !== 'swarm')
        throw errors.conflict(`deployment '${entry.name}' runs with compose: only swarm deployments (runtime: swarm) scale`, 'NOT_SWARM_DEPLOYMENT');
      if (!entry.services.includes(service)) throw errors.notFound(`deployment '${entry.name}' has no service '${service}'`);
      docker.assertAvailable();
      const current = (await docker.swarm.stackServices(entry.name)).find((s) => s.name === service);
      if (!current) throw errors.conflict(`service '${service}' of '${entry.name}' is not deployed: start the deployment first`, 'DEPLOYMENT_NOT_RUNNING');
      if (current.mode !== 'replicated') throw errors.conflict(`service '${service}' runs in global mode: it cannot be scaled`, 'NOT_REPLICATED');
      return {
        value: { name: entry.name, service, replicas },
        preview: {
          summary: `scale ${entry.name}/${service}: ${current.replicas.desired} → ${replicas} replicas`,
          changes: [
            { type: 'service', id: `${entry.name}/${service}`, actions: ['update'], before: { replicas: current.replicas.desired }, after: { replicas } },
          ],
        },
        // A plan made for one number of replicas is stale once someone else scaled the service.
        snapshot: { records: { desired: current.replicas.desired } },
      };
    },
    apply: async ({ name, service, replicas }) => {
      await manager.lock.run(name, async () => {
        await docker.swarm.scale(name, service, replicas);
        await manager.rememberScale(manager.require(name), service, replicas);
      });
      await manager.swarm.refresh();
      return { name, service, replicas };
    },
  });

  return { scale };
}
