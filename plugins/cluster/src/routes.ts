/** /api/cluster: the swarm of this engine. Global and admin-only (the `cluster` resource grants nobody but admins). */
import { operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import type { DockerService } from '@agent/plugin-docker/api';
import type { ClusterOperations } from './operations.js';
import { ClusterView, InitInput, JoinTokens, NodeChange, NodeParams, NodeView } from './schemas.js';

const NOT_MANAGER = { 409: ['NOT_SWARM_MANAGER'] } as const;

export function clusterRoutes(ctx: PluginContext, docker: DockerService, ops: ClusterOperations): void {
  ctx.route({
    method: 'GET',
    path: '/cluster',
    permission: 'cluster:read',
    operationId: 'cluster.get',
    summary: 'Whether this engine is in a swarm and manages it, its node and cluster ids',
    response: ClusterView,
    handler: () => docker.swarm.info(),
  });

  ctx.route(
    operationRoute(ops.init, {
      method: 'POST',
      path: '/cluster/init',
      permission: 'cluster:write',
      summary: 'Initialise a single-node swarm on this engine (409 SWARM_EXISTS when it is part of one)',
      status: 201,
      body: InitInput,
      response: ClusterView,
      plannable: true,
      errors: { 409: ['SWARM_EXISTS'] },
      input: (req) => req.body ?? {},
      respond: (info) => reply.created(info, `swarm initialised (cluster ${info.cluster_id ?? '?'})`),
    }),
  );

  ctx.route({
    method: 'GET',
    path: '/cluster/join-tokens',
    permission: 'cluster:write',
    operationId: 'cluster.joinTokens',
    summary: 'The tokens a worker or a manager joins with (secrets: whoever holds one adds a node to the cluster)',
    description: 'Needs `cluster:write` (admins): a join token is the power to add a node, which then runs tasks and, as a manager, reads every secret.',
    response: JoinTokens,
    errors: NOT_MANAGER,
    handler: () => docker.swarm.joinTokens(),
  });

  ctx.route({
    method: 'GET',
    path: '/cluster/nodes',
    permission: 'cluster:read',
    operationId: 'cluster.nodes',
    summary: 'Nodes of the swarm: role, availability, labels, resources, state and reachability',
    response: Type.Array(NodeView),
    errors: NOT_MANAGER,
    handler: () => docker.swarm.nodes(),
  });

  ctx.route(
    operationRoute(ops.updateNode, {
      method: 'PATCH',
      path: '/cluster/nodes/:id',
      permission: 'cluster:write',
      summary: "Change a node's labels (replaced whole) or availability (`drain` moves its tasks away)",
      params: NodeParams,
      body: NodeChange,
      response: NodeView,
      plannable: true,
      errors: NOT_MANAGER,
      input: (req) => ({ ...req.body, ...req.params }),
    }),
  );
}
