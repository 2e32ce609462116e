/**
 * cluster: the Docker Swarm of the engine the agent drives (issue 29). Whether this host manages a swarm, init of a
 * single-node one, join tokens, nodes and their labels and availability. Swarm deployments themselves are the
 * deployments plugin's (`runtime: swarm`); the engine calls are the docker service's (`docker.swarm`).
 */
import { definePlugin } from '@agent/sdk';
import { dockerService, ENGINE_ERRORS } from '@agent/plugin-docker/api';
import { clusterOperations } from './operations.js';
import { clusterRoutes } from './routes.js';

export default definePlugin({
  name: 'cluster',
  version: '0.1.0',
  description: 'Docker Swarm of this engine: manager status, init, join tokens, nodes',
  // Global and admins only: a node runs every deployment's tasks, and a join token adds nodes to the cluster.
  resources: { cluster: { description: 'the swarm of this engine and its nodes (global; admins only)', operator: 'none', viewer: 'none', owner: 'global' } },
  deps: { docker: dockerService },
  // Every route asks the engine.
  errors: ENGINE_ERRORS,

  setup(ctx, { docker }) {
    clusterRoutes(ctx, docker, clusterOperations(docker));
  },
});
