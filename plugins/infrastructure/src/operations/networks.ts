/**
 * Attaching a deployment's running containers to a shared network, and detaching them, as operations. Who joins a
 * shared network is global state (it reaches the shared services of everyone): the routes are not bound to the
 * deployment, so the kernel asks for a global principal, and `prepare` asks for write access to the deployment
 * (404 for one the caller cannot see or that does not exist, 403 below write) and finds its running containers
 * (409 without any); `apply` connects (with the alias `<deployment>-<service>`) or disconnects them.
 */
import { defineOperation, errors, levelRank, Type, type Static } from '@agent/sdk';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import type { DockerService } from '@agent/plugin-docker/api';
import { Attach, networkParams } from '../schemas.js';

export type NetworkOperations = ReturnType<typeof networkOperations>;

export function networkOperations(
  docker: DockerService,
  deployments: () => DeploymentsService | undefined,
  networks: string[],
  labels: Record<string, string>,
) {
  const params = networkParams(networks);
  const input = Type.Composite([params, Attach]);

  const operation = (action: 'attach' | 'detach') =>
    defineOperation({
      name: `infrastructure.${action}`,
      input,
      resource: ({ network }: Static<typeof input>) => ({ type: 'network', id: network }),
      prepare: async ({ network, deployment, service }: Static<typeof input>, { principal }) => {
        const level = principal.deploymentLevel(deployment);
        const known = deployments();
        if (!level || (known && !known.get(deployment))) throw errors.notFound(`deployment '${deployment}' not found`);
        if (levelRank(level) < levelRank('write')) throw errors.forbidden(`'write' access to deployment '${deployment}' required`);
        const containers = (await docker.listContainers({ all: false, deployment })).filter((c) => !service || c.service === service);
        if (containers.length === 0) {
          throw errors.conflict(`deployment '${deployment}'${service ? ` service '${service}'` : ''} has no running container`, 'NO_RUNNING_CONTAINER');
        }
        return {
          value: { network, deployment, containers },
          preview: {
            summary: `${action} ${containers.length} container(s) of ${deployment} ${action === 'attach' ? 'to' : 'from'} ${network}`,
            changes: containers.map((c) => ({ type: 'container', id: c.name, actions: ['update' as const], after: { [action]: network } })),
          },
        };
      },
      apply: async ({ network, deployment, containers }) => {
        if (action === 'attach') await docker.networks.ensure(network, { labels: { ...labels, 'agent.infrastructure.network': network } });
        for (const c of containers) {
          if (action === 'attach') await docker.networks.connect(network, c.id, c.service ? { aliases: [`${deployment}-${c.service}`] } : {});
          else await docker.networks.disconnect(network, c.id);
        }
        return { network, deployment, containers: containers.map((c) => c.name) };
      },
    });

  return { params, attach: operation('attach'), detach: operation('detach') };
}
