/** Request and answer schemas of the cluster routes, each declared once. */
import { Nullable, Type } from '@agent/sdk';

const Availability = Type.Union([Type.Literal('active'), Type.Literal('pause'), Type.Literal('drain')]);
/** Node labels as Swarm placement constraints read them (`node.labels.<key>`). */
const Labels = Type.Record(Type.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$' }), Type.String({ maxLength: 256 }), { maxProperties: 64 });

export const ClusterView = Type.Object({
  state: Type.String({ description: 'the engine word: inactive, pending, active, error, locked' }),
  manager: Type.Boolean({ description: 'this engine is an active swarm manager (cluster routes and swarm deployments work)' }),
  node_id: Nullable(Type.String()),
  cluster_id: Nullable(Type.String()),
  nodes: Nullable(Type.Integer()),
  managers: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
});

export const InitInput = Type.Object({
  advertise_addr: Type.Optional(
    Type.String({
      // An address or interface name; no ports beyond the swarm's own and nothing a shell could read.
      pattern: '^[A-Za-z0-9.:_-]{1,64}$',
      description: 'address other nodes reach this one at (default 127.0.0.1: a single-node swarm)',
    }),
  ),
});

export const JoinTokens = Type.Object({ worker: Type.String(), manager: Type.String() });

export const NodeView = Type.Object({
  id: Type.String(),
  hostname: Type.String(),
  role: Type.Union([Type.Literal('manager'), Type.Literal('worker')]),
  availability: Availability,
  labels: Type.Record(Type.String(), Type.String()),
  state: Type.String({ description: 'ready, down, unknown, disconnected' }),
  address: Nullable(Type.String()),
  leader: Type.Boolean(),
  reachability: Nullable(Type.String({ description: 'managers only: reachable, unreachable, unknown' })),
  engine_version: Nullable(Type.String()),
  resources: Type.Object({ nano_cpus: Type.Integer(), memory_bytes: Type.Integer() }),
});

export const NodeParams = Type.Object({ id: Type.String({ pattern: '^[a-z0-9]{1,64}$' }) });

export const NodeChange = Type.Object({
  labels: Type.Optional(Labels),
  availability: Type.Optional(Availability),
});

export const UpdateNodeInput = Type.Composite([NodeParams, NodeChange]);
