/**
 * Schemas of the deployment routes and operations: each input is declared here once; the route validates and
 * documents it with the same object and the operation takes its type from it.
 */
import { DEPLOYMENT_NAME, deploymentName, Nullable, Secret, Type } from '@agent/sdk';
import { ENV_KEY } from './env-file.js';
import { SOURCE_ID } from './log-sources.js';
import { TEMPLATE_ID } from './templates.js';

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

const EXCEPTIONS = 'host-safety exceptions, each as a `HOST_SAFETY` refusal names it (`<rule>` or `<rule>:<value>`, e.g. `cap_add:NET_ADMIN`)';
const exceptionList = (options: { description: string; default?: string[] }) =>
  Type.Array(Type.String({ pattern: '^[a-z_][a-z_.]*(:[^\\u0000-\\u001f]{1,1024})?$', maxLength: 1100 }), { maxItems: 100, ...options });
export const Exceptions = exceptionList({ description: EXCEPTIONS });

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

export const COMPOSE_CONTENT = Type.String({ minLength: 1, maxLength: 1024 * 1024, description: 'full text of the compose file (YAML)' });

// ---- inputs of the operations (the request's body, query and params, as the operations take them) ----------------

/** `POST /deployments`; also what other plugins create with (`exceptions` instead of `host_safety_exceptions`). */
export const CreateDeployment = Type.Object({
  name: deploymentName(),
  compose_content: COMPOSE_CONTENT,
  env_vars: Type.Optional(EnvVars),
  auto_start: Type.Optional(Type.Boolean({ default: false, description: 'start after creation' })),
  template: Type.Optional(Type.String({ pattern: TEMPLATE_ID.source, description: 'template the deployment comes from (its kind: built-in log sources)' })),
  host_safety_exceptions: Type.Optional(exceptionList({ default: [], description: `${EXCEPTIONS} granted with the creation (needs host-safety:write)` })),
});

export const CreatedDeployment = Type.Intersect([Deployment, Type.Object({ start_error: Type.Union([Type.String(), Type.Null()]) })]);

/** The body of `PUT /deployments/:name`. */
export const UpdateDeployment = Type.Object({ compose_content: Type.Optional(COMPOSE_CONTENT), env_vars: Type.Optional(EnvVars) }, { minProperties: 1 });
export const UpdateDeploymentInput = Type.Composite([NameParams, UpdateDeployment]);
export const UpdatedDeployment = Type.Intersect([
  Deployment,
  Type.Object({ recreated: Type.Boolean({ description: 'running services were brought up to date' }) }),
]);

/** The query of `DELETE /deployments/:name`. */
export const DeleteDeployment = Type.Object({
  remove_files: Type.Optional(Type.Boolean({ default: false, description: 'delete the deployment folder' })),
  remove_volumes: Type.Optional(Type.Boolean({ default: false, description: 'delete the named volumes of the compose file' })),
});
export const DeleteDeploymentInput = Type.Composite([NameParams, DeleteDeployment]);
export const DeletedDeployment = Type.Object({ name: Type.String(), removed_files: Type.Boolean(), removed_volumes: Type.Boolean() });

/** The body of `PUT /deployments/:name/host-safety`. */
export const SetHostSafety = Type.Object({ exceptions: Exceptions });
export const SetHostSafetyInput = Type.Composite([NameParams, SetHostSafety]);

/** The body of `PUT /deployments/:name/log-sources`. */
export const SetLogSources = Type.Object({
  sources: Type.Array(
    Type.Object({
      id: Type.String({ pattern: SOURCE_ID }),
      name: Type.String({ minLength: 1, maxLength: 100 }),
      path: Type.String({ minLength: 1, maxLength: 1024, description: 'file path relative to the deployment folder' }),
      format: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,31}$', description: 'e.g. text, json, nginx' })),
    }),
    { maxItems: 50 },
  ),
});
export const SetLogSourcesInput = Type.Composite([NameParams, SetLogSources]);

/** A plugin's name, as `POST /plugins/:name/deployments` takes it. */
export const PluginParams = Type.Object({ name: Type.String({ pattern: '^[@a-z0-9][a-z0-9./_-]*$', maxLength: 214 }) });

/** The body of `POST /plugins/:name/deployments`. */
export const DeployFromPlugin = Type.Object({
  name: Type.String({ pattern: DEPLOYMENT_NAME, description: 'name of the new deployment' }),
  config: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), { description: "values for the plugin's deployment config schema (see GET /api/plugins/:name)" }),
  ),
});
/** The plugin's name (the path's `:name`) as `plugin`: `name` is the new deployment's. */
export const DeployFromPluginInput = Type.Composite([Type.Object({ plugin: PluginParams.properties.name }), DeployFromPlugin]);
