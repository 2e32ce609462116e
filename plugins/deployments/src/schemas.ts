/** Schemas shared by the deployment routes (request validation and OpenAPI). */
import { deploymentName, Nullable, Secret, Type } from '@agent/sdk';
import { ENV_KEY } from './env-file.js';

export const DEPLOYMENT_STATUSES = ['running', 'stopped', 'partial', 'failed', 'unknown'] as const;

export const Status = Type.Union(
  DEPLOYMENT_STATUSES.map((s) => Type.Literal(s)),
  {
    description:
      '`running`: every service runs; `partial`: some do; `stopped`: none runs (stopped or never started); ' +
      '`failed`: none runs and a container exited with an error, died or keeps restarting; `unknown`: the engine does not answer.',
  },
);

export const ServiceState = Type.Object({
  name: Type.String(),
  status: Type.String({ description: 'container state (running, exited, created, restarting, …) or `missing` when the service has no container' }),
  health: Type.Union([Type.Literal('healthy'), Type.Literal('unhealthy'), Type.Literal('starting'), Type.Literal('none')]),
  container_id: Nullable(Type.String()),
  container_name: Nullable(Type.String()),
  image: Nullable(Type.String()),
});

export const Deployment = Type.Object({
  name: Type.String(),
  path: Type.String({ description: 'absolute folder of the deployment' }),
  status: Status,
  created_at: Type.String({ description: 'RFC 3339' }),
  services: Type.Array(ServiceState),
  compose_file: Type.String(),
  env_file: Type.String(),
});

export const Port = Type.Object({
  service: Nullable(Type.String()),
  container: Type.String(),
  container_port: Type.Integer(),
  host_port: Nullable(Type.Integer()),
  host_ip: Nullable(Type.String()),
  protocol: Type.String(),
});

export const EnvEntry = Type.Object({ key: Type.String(), value: Type.String({ description: '`********` for secrets' }), secret: Type.Boolean() });

export const DeploymentDetails = Type.Intersect([
  Deployment,
  Type.Object({
    compose_content: Type.String(),
    env: Type.Array(EnvEntry),
    containers: Type.Array(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        service: Nullable(Type.String()),
        image: Type.String(),
        state: Type.String(),
        status: Type.String(),
        health: Type.String(),
        created_at: Type.String(),
      }),
    ),
    ports: Type.Array(Port),
    template: Nullable(Type.String()),
    host_safety: Type.Object({
      policy: Type.Union([Type.Literal('enforced'), Type.Literal('off')]),
      exceptions: Type.Array(Type.String(), { description: 'granted by an admin' }),
      used: Type.Array(Type.String(), { description: 'exceptions the model that last ran needed' }),
    }),
    file_problems: Type.Array(Type.String(), { description: 'files of the folder the agent does not read (a symlink or special file in their place)' }),
  }),
]);

export const Exceptions = Type.Array(Type.String({ pattern: '^[a-z_][a-z_.]*(:[^\\u0000-\\u001f]{1,1024})?$', maxLength: 1100 }), {
  maxItems: 100,
  description: 'host-safety exceptions, each as a `HOST_SAFETY` refusal names it (`<rule>` or `<rule>:<value>`, e.g. `cap_add:NET_ADMIN`)',
});

const Violation = Type.Object({
  service: Nullable(Type.String()),
  key: Type.String(),
  value: Type.String(),
  exception: Type.String(),
  why: Type.String(),
});

export const HostSafetyReport = Type.Object({
  policy: Type.Union([Type.Literal('enforced'), Type.Literal('off')]),
  exceptions: Type.Array(Type.String(), { description: 'granted by an admin' }),
  used: Type.Array(Type.String(), { description: 'granted exceptions the current files need' }),
  violations: Type.Array(Violation, { description: 'what the policy refuses in the current files (with the policy off: what it would refuse)' }),
  passes: Type.Boolean({ description: 'the current files would start' }),
});

export const EnvVars = Type.Array(
  Type.Object({
    key: Type.String({ pattern: ENV_KEY, description: 'variable name' }),
    value: Secret({ maxLength: 65536, description: 'value (kept out of plans and responses when the key looks secret)' }),
  }),
  { maxItems: 500, description: 'variables written to `.env` and used for `${VAR}` interpolation in the compose file' },
);

export const NameParams = Type.Object({ name: deploymentName() });
