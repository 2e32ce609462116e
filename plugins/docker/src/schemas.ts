/** Response schemas of the docker routes (also the OpenAPI documentation). */
import { Nullable, Type } from '@agent/sdk';

export const Health = Type.Union([Type.Literal('healthy'), Type.Literal('unhealthy'), Type.Literal('starting'), Type.Literal('none')], {
  description: 'healthcheck state; `none` when the container has no healthcheck',
});

const deploymentField = Nullable(Type.String({ description: 'the deployment (compose project) this belongs to, or null' }));

export const Port = Type.Object({
  private: Type.Integer(),
  public: Nullable(Type.Integer()),
  ip: Nullable(Type.String()),
  protocol: Type.String(),
});

export const ContainerSummary = Type.Object({
  id: Type.String(),
  name: Type.String(),
  image: Type.String(),
  state: Type.String({ description: 'created, running, paused, restarting, removing, exited or dead' }),
  status: Type.String({ description: 'human status, e.g. "Up 3 minutes (healthy)"' }),
  health: Health,
  created_at: Type.String(),
  labels: Type.Record(Type.String(), Type.String()),
  deployment: deploymentField,
  service: Nullable(Type.String({ description: 'compose service' })),
  ports: Type.Array(Port),
  networks: Type.Record(Type.String(), Type.String(), { description: 'network name → IPv4 address' }),
});

export const LogLine = Type.Object({
  stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]),
  time: Nullable(Type.String()),
  text: Type.String(),
});

export const Image = Type.Object({
  id: Type.String(),
  tags: Type.Array(Type.String()),
  digests: Type.Array(Type.String()),
  size: Type.Integer({ description: 'bytes' }),
  created_at: Type.String(),
  containers: Type.Array(Type.String(), { description: 'names of the containers (running or not) using it' }),
  in_use: Type.Boolean(),
  deployment: deploymentField,
  deployments: Type.Array(Type.String(), { description: 'every deployment with a container using it' }),
});

export const PullJob = Type.Object({
  id: Type.String({ description: 'the id of its job (`GET /api/jobs/:id`, cancel with `POST /api/jobs/:id/cancel`)' }),
  type: Type.Literal('image.pull'),
  image: Type.String(),
  status: Type.Union([Type.Literal('running'), Type.Literal('succeeded'), Type.Literal('failed'), Type.Literal('cancelled'), Type.Literal('interrupted')], {
    description: '`cancelled`: `POST /api/jobs/:id/cancel`; `interrupted`: the agent stopped while it ran',
  }),
  progress: Type.Object({
    percent: Type.Number({ description: '0–100, from the bytes the engine reported' }),
    current_bytes: Type.Integer(),
    total_bytes: Type.Integer(),
    layers_done: Type.Integer(),
    layers_total: Type.Integer(),
  }),
  output: Type.Array(Type.String(), { description: 'last status lines of the pull stream' }),
  authenticated: Type.Boolean({ description: 'registry credentials were used' }),
  error: Nullable(Type.String()),
  started_at: Type.String(),
  finished_at: Nullable(Type.String()),
});

export const Volume = Type.Object({
  name: Type.String(),
  driver: Type.String(),
  mountpoint: Type.String(),
  scope: Type.String(),
  created_at: Nullable(Type.String()),
  labels: Type.Record(Type.String(), Type.String()),
  containers: Type.Array(Type.String()),
  in_use: Type.Boolean(),
  deployment: deploymentField,
});

export const Network = Type.Object({
  id: Type.String(),
  name: Type.String(),
  driver: Type.String(),
  scope: Type.String(),
  internal: Type.Boolean(),
  created_at: Nullable(Type.String()),
  labels: Type.Record(Type.String(), Type.String()),
  containers: Type.Array(Type.String()),
  in_use: Type.Boolean(),
  deployment: deploymentField,
});

export const LabelMap = Type.Record(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$' }), Type.String({ maxLength: 1024 }), {
  description: 'labels (keys: letters, digits, `._/-`)',
});
