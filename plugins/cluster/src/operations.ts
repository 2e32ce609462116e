/**
 * The changes of the cluster as operations: init (a single-node swarm) and a node's labels or availability. Both
 * are plannable: `prepare` does every check and says what changes, `apply` changes it. Join tokens are not an
 * operation: reading them changes nothing, and they never go into a plan or an audit record.
 */
import { defineOperation, errors } from '@agent/sdk';
import type { DockerService } from '@agent/plugin-docker/api';
import { InitInput, UpdateNodeInput } from './schemas.js';

const LABEL_KEY = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$/;

export type ClusterOperations = ReturnType<typeof clusterOperations>;

export function clusterOperations(docker: DockerService) {
  const swarm = docker.swarm;

  const init = defineOperation({
    name: 'cluster.init',
    input: InitInput,
    resource: () => ({ type: 'cluster', id: 'swarm' }),
    // A plan to init is stale once the engine joined or left a swarm meanwhile.
    snapshot: async () => ({ records: { state: (await swarm.info()).state } }),
    prepare: async (input) => {
      const info = await swarm.info();
      if (info.state !== 'inactive') throw errors.conflict(`this engine is already part of a swarm (state '${info.state}')`, 'SWARM_EXISTS');
      return {
        value: input,
        preview: {
          summary: `initialise a single-node swarm on this engine (advertised at ${input.advertise_addr ?? '127.0.0.1'})`,
          changes: [{ type: 'cluster', id: 'swarm', actions: ['create'], after: { advertise_addr: input.advertise_addr ?? '127.0.0.1' } }],
        },
      };
    },
    apply: (input) => swarm.init(input),
  });

  const updateNode = defineOperation({
    name: 'cluster.updateNode',
    input: UpdateNodeInput,
    resource: ({ id }) => ({ type: 'node', id }),
    snapshot: async ({ id }) => {
      const n = await swarm.node(id);
      return { records: { node: { labels: n.labels, availability: n.availability, role: n.role } } };
    },
    prepare: async ({ id, labels, availability }) => {
      // The schema cannot constrain a record's keys: a label name is checked here, before the engine sees it.
      const bad = Object.keys(labels ?? {}).find((k) => !LABEL_KEY.test(k));
      if (bad !== undefined) throw errors.badRequest(`body.labels: '${bad}' is not a label name (letters, digits, '.', '_', '-')`, 'VALIDATION_FAILED');
      const before = await swarm.node(id);
      const after = { labels: labels ?? before.labels, availability: availability ?? before.availability };
      return {
        value: { id, labels, availability },
        preview: {
          summary: `node ${before.hostname} (${id}): ${availability && availability !== before.availability ? `availability ${before.availability} → ${availability}` : 'labels'}`,
          changes: [{ type: 'node', id, actions: ['update'], before: { labels: before.labels, availability: before.availability }, after }],
        },
      };
    },
    apply: ({ id, labels, availability }) => swarm.updateNode(id, { ...(labels ? { labels } : {}), ...(availability ? { availability } : {}) }),
  });

  return { init, updateNode };
}
