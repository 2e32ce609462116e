/** The shared networks: the list (a read), attach and detach of a deployment's containers (operations). */
import { operationRoute, Type, type PluginContext } from '@agent/sdk';
import type { InfrastructureManager } from '../manager.js';
import type { NetworkOperations } from '../operations/networks.js';
import { Attach, Attached, NetworkView } from '../schemas.js';

export function networkRoutes(ctx: PluginContext, manager: InfrastructureManager, ops: NetworkOperations): void {
  ctx.route({
    method: 'GET',
    path: '/infrastructure/networks',
    permission: 'infrastructure:read',
    operationId: 'infrastructure.networks',
    summary: 'Shared networks deployments may join',
    response: Type.Array(NetworkView),
    handler: () => manager.networks(),
  });

  for (const op of [ops.attach, ops.detach]) {
    const attach = op === ops.attach;
    ctx.route(
      operationRoute(op, {
        method: 'POST',
        path: `/infrastructure/networks/:network/${attach ? 'attach' : 'detach'}`,
        permission: 'infrastructure:write',
        summary: attach ? 'Connect the containers of a deployment to a shared network' : 'Disconnect the containers of a deployment from a shared network',
        description:
          'The connection lasts until the containers are recreated; for a permanent one, declare the network as external in the compose file. ' +
          'Global: a shared network reaches the shared database, cache and DNS server of every deployment, so a principal limited to its ' +
          'deployments may not attach even its own (403 GLOBAL_SCOPE_REQUIRED); a global one needs write access to the deployment.',
        // Not bound to the deployment on purpose: what changes is who reaches the shared services (global state).
        params: ops.params,
        body: Attach,
        response: Attached,
        errors: { 409: ['NO_RUNNING_CONTAINER'] },
        input: (req) => ({ ...req.body, ...req.params }),
      }),
    );
  }
}
