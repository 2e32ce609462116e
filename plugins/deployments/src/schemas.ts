/**
 * Schemas of the deployment routes and operations: each input is declared here once; the route validates and
 * documents it with the same object and the operation takes its type from it.
 */
import { DEPLOYMENT_NAME, deploymentName, deploymentOrRetired, Nullable, Secret, Type } from '@agent/sdk';
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

const RUNTIME = Type.Union([Type.Literal('compose'), Type.Literal('swarm')], {
  description: '`compose` (default): compose on this host; `swarm`: a stack of Docker Swarm (`docker stack deploy`) of the same file',
});

export const ServiceState = Type.Object({
  name: Type.String(),
  status: Type.String({ description: 'container state (running, exited, created, restarting, …) or `missing` when the service has no container' }),
  health: Type.Union([Type.Literal('healthy'), Type.Literal('unhealthy'), Type.Literal('starting'), Type.Literal('none')]),
  container_id: Nullable(Type.String()),
  container_name: Nullable(Type.String()),
  image: Nullable(Type.String()),
  replicas: Type.Optional(
    Type.Object(
      { running: Type.Integer(), desired: Type.Integer() },
      { description: 'swarm deployments: tasks running and wanted (`status` and `container_*` are of one running task)' },
    ),
  ),
  errors: Type.Optional(Type.Array(Type.String(), { description: 'swarm deployments: errors of its recent tasks, newest first' })),
  update: Type.Optional(
    Nullable(
      Type.Object(
        { state: Type.String(), message: Nullable(Type.String()) },
        { description: "swarm deployments: the engine's rolling update (updating, completed, rollback_started, rollback_completed, paused…)" },
      ),
    ),
  ),
});

export const Deployment = Type.Object({
  name: Type.String(),
  path: Type.String({ description: 'absolute folder of the deployment' }),
  status: Status,
  created_at: Type.String({ description: 'RFC 3339' }),
  services: Type.Array(ServiceState),
  compose_file: Type.String(),
  env_file: Type.String(),
  runtime: Type.Optional(RUNTIME),
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
    pins: Type.Record(Type.String(), Type.String(), {
      description: 'service → the image a rollback pinned it to; every start runs these until the compose file changes or a redeploy',
    }),
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

/** Why a change is made, and whether a backup is taken first: recorded with its revision. */
const REASON = Type.String({ maxLength: 500, pattern: '^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f]*$', description: 'why (recorded with the revision)' });
const BACKUP = Type.Boolean({
  description: 'take a backup of the deployment (backups plugin) before the change; the revision links it (503 `BACKUPS_UNAVAILABLE` without the plugin)',
});
// ---- inputs of the operations (the request's body, query and params, as the operations take them) ----------------

/**
 * A create in its compose form: what `POST /deployments` becomes once a template create is resolved, and what other
 * plugins create with (`exceptions` instead of `host_safety_exceptions`).
 */
export const CreateDeployment = Type.Object({
  name: deploymentName(),
  compose_content: COMPOSE_CONTENT,
  env_vars: Type.Optional(EnvVars),
  auto_start: Type.Optional(Type.Boolean({ default: false, description: 'start after creation' })),
  template: Type.Optional(Type.String({ pattern: TEMPLATE_ID.source, description: 'template the deployment comes from (its kind: built-in log sources)' })),
  host_safety_exceptions: Type.Optional(exceptionList({ default: [], description: `${EXCEPTIONS} granted with the creation (needs host-safety:write)` })),
  reason: Type.Optional(REASON),
  runtime: Type.Optional(RUNTIME),
});

/**
 * The body of `POST /deployments`: a compose file (`compose_content`, `env_vars`) or a template (`template`,
 * `variables`), not both (400 `COMPOSE_OR_TEMPLATE`, checked by the operation so that the answer names the fields).
 * `x-cli` tells agentctl how to take a field besides `-f`: `agentctl deployments create NAME --template T --set K=V`.
 */
export const CreateDeploymentRequest = Type.Composite([
  Type.Object({
    name: Type.String({ pattern: DEPLOYMENT_NAME, description: 'deployment name', 'x-cli': 'argument' }),
    compose_content: Type.Optional(COMPOSE_CONTENT),
    template: Type.Optional(
      Type.String({
        pattern: TEMPLATE_ID.source,
        description: "template to deploy, instead of `compose_content`: its compose file, its variables' defaults, its built-in log sources",
      }),
    ),
    variables: Type.Optional(
      // A map in its plain JSON Schema form (`additionalProperties`, names by `propertyNames`): TypeBox's Record
      // would say `patternProperties: {"^.*$": …}`, which clients that fill fields by path (agentctl -f) do not read.
      Type.Unsafe<Record<string, string>>({
        type: 'object',
        additionalProperties: Secret({ maxLength: 65536 }),
        propertyNames: { pattern: ENV_KEY },
        maxProperties: 500,
        description:
          "with `template`: values of the template's variables (`GET /api/templates/{id}`), the others keep their defaults; 400 `TEMPLATE_VARIABLE_REQUIRED` names a required one left empty",
        'x-cli': 'set',
      }),
    ),
  }),
  Type.Omit(CreateDeployment, ['name', 'compose_content', 'template']),
]);

export const CreatedDeployment = Type.Intersect([
  Deployment,
  Type.Object({ start_error: Type.Union([Type.String(), Type.Null()]), revision: Type.Integer({ description: 'the revision the create recorded' }) }),
]);

/** The body of `PUT /deployments/:name`. */
export const UpdateDeployment = Type.Object(
  { compose_content: Type.Optional(COMPOSE_CONTENT), env_vars: Type.Optional(EnvVars), reason: Type.Optional(REASON), backup: Type.Optional(BACKUP) },
  { minProperties: 1 },
);
export const UpdateDeploymentInput = Type.Composite([NameParams, UpdateDeployment]);
export const UpdatedDeployment = Type.Intersect([
  Deployment,
  Type.Object({
    recreated: Type.Boolean({ description: 'running services were brought up to date' }),
    revision: Type.Integer({ description: 'the revision the update recorded' }),
    backup_id: Nullable(Type.String({ description: 'the backup taken first (`backup: true`)' })),
  }),
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

// ---- revisions, redeploy, rollback, deploy hooks -----------------------------------------------------------------

/** A deployment's name, or the retired name `<name>~<time>` its revisions keep after a delete (global principals). */
export const RevisionsParams = Type.Object({ name: deploymentOrRetired() });
export const RevisionParams = Type.Object({
  name: deploymentOrRetired(),
  rev: Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'revision number' }),
});

export const STRATEGIES = ['recreate', 'start-first'] as const;
const STRATEGY = Type.Union(
  STRATEGIES.map((s) => Type.Literal(s)),
  {
    description:
      '`recreate` (default): compose recreates the containers (each service is down between its old container stopping and the new one starting); `start-first` (zero downtime through the proxy): a service with a healthcheck that a domain routes to gets its new container beside the old one, the proxy switches once it is healthy and the old one drains (`redeploy_health_timeout`, `redeploy_drain_timeout` settings); the others are recreated and listed in `fallbacks` with why',
  },
);
const SERVICE = Type.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$' });

/** What every change of a deployment may add to its request: why, and a backup first. */
export const ChangeOptions = Type.Object({ reason: Type.Optional(REASON), backup: Type.Optional(BACKUP) });

export const Redeploy = Type.Object({
  pull: Type.Optional(Type.Boolean({ default: false, description: "pull the services' images first (their tags are resolved again)" })),
  services: Type.Optional(Type.Array(SERVICE, { minItems: 1, maxItems: 100, uniqueItems: true, description: 'only these services (default: all)' })),
  strategy: Type.Optional(STRATEGY),
  reason: Type.Optional(REASON),
  backup: Type.Optional(BACKUP),
});
export const RedeployInput = Type.Composite([NameParams, Redeploy]);

export const Rollback = Type.Object({
  revision: Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'the revision to go back to (`GET /deployments/:name/revisions`)' }),
  strategy: Type.Optional(STRATEGY),
  reason: Type.Optional(REASON),
  backup: Type.Optional(BACKUP),
});
export const RollbackInput = Type.Composite([NameParams, Rollback]);

/** The body a deploy hook call may carry (signed with the rest of it): a subset of the redeploy's. */
export const HookBody = Type.Object({
  pull: Type.Optional(Type.Boolean({ default: false })),
  services: Type.Optional(Type.Array(SERVICE, { minItems: 1, maxItems: 100, uniqueItems: true })),
  reason: Type.Optional(REASON),
});

export const RevisionImage = Type.Object({
  image: Type.String({ description: 'the image as the model names it (`nginx:1.27`)' }),
  id: Nullable(Type.String({ description: 'the image the container ran (`sha256:…`)' })),
  digest: Nullable(Type.String({ description: '`repo@sha256:…` in its registry; null for an image built or tagged on this host' })),
});

export const RevisionAction = Type.Union(['create', 'update', 'redeploy', 'rollback'].map((a) => Type.Literal(a)));
export const RevisionStatus = Type.Union(
  ['pending', 'succeeded', 'failed', 'cancelled', 'interrupted'].map((s) => Type.Literal(s)),
  {
    description: '`pending` while the change runs; `interrupted`: the agent stopped while it ran',
  },
);

const LeftService = Type.Object({
  service: Type.String(),
  container: Nullable(Type.String()),
  state: Type.String({ description: 'container state, or `missing`' }),
  image_id: Nullable(Type.String()),
  recreated: Type.Boolean({ description: 'the change replaced its container before it stopped' }),
});

export const RevisionSummary = Type.Object({
  deployment: Type.String(),
  rev: Type.Integer(),
  action: RevisionAction,
  status: RevisionStatus,
  error: Nullable(Type.String()),
  reason: Nullable(Type.String()),
  created_at: Type.String(),
  finished_at: Nullable(Type.String()),
  created_by: Nullable(Type.String({ description: 'principal id (`user:3`, `api_key:5`, `system:hook`)' })),
  created_by_name: Nullable(Type.String()),
  ran: Type.Boolean({ description: 'the change ran compose (the deployment ran); a change of a stopped deployment records no images' }),
  images: Type.Record(Type.String(), RevisionImage, { description: 'service → the image it ran, as resolved when it ran' }),
  pins: Type.Record(Type.String(), Type.String(), { description: 'service → the reference a rollback pinned it to' }),
  strategy: Nullable(Type.String()),
  services: Nullable(Type.Array(Type.String(), { description: 'the services a redeploy replaced (null: all)' })),
  rollback_of: Nullable(Type.Integer({ description: 'the revision a rollback went back to' })),
  backup_id: Nullable(Type.String({ description: 'the backup taken before the change (`backup: true`)' })),
  job_id: Nullable(Type.String()),
  left: Nullable(Type.Array(LeftService, { description: 'what a failed or cancelled change left' })),
});

export const RevisionDiff = Type.Object({
  against: Type.Literal('current', { description: 'the deployment now: its files and the images its containers run' }),
  compose: Type.String({ description: 'unified diff from the current compose file to this revision’s (empty: the same)' }),
  env: Type.Object(
    { added: Type.Array(Type.String()), changed: Type.Array(Type.String()), removed: Type.Array(Type.String()) },
    { description: '`.env` keys that differ, from the current to this revision (never values)' },
  ),
  images: Type.Array(
    Type.Object({
      service: Type.String(),
      current: Nullable(Type.Object({ image: Type.String(), id: Nullable(Type.String()) })),
      revision: Nullable(RevisionImage),
      changed: Type.Boolean(),
    }),
  ),
});

export const RevisionDetails = Type.Intersect([
  RevisionSummary,
  Type.Object({
    compose_file: Type.String(),
    compose_content: Type.String(),
    env: Type.Array(EnvEntry, { description: 'the `.env` of the revision, secrets redacted' }),
    model: Nullable(Type.Record(Type.String(), Type.Unknown(), { description: "compose's checked model that ran (with the guard's pins and stamps)" })),
    diff: Nullable(RevisionDiff),
  }),
]);

export const StartedJob = Type.Object({
  job_id: Type.String({ description: 'follow it at `GET /api/jobs/:id` or `/api/jobs/:id/stream`; cancel with `POST /api/jobs/:id/cancel`' }),
  deployment: Type.String(),
  strategy: Type.String(),
  fallbacks: Type.Optional(
    Type.Array(Type.Object({ service: Type.String(), why: Type.String() }), {
      description: 'start-first: the services it will recreate instead, with why, as things are when asked (the job result says what it did)',
    }),
  ),
  note: Type.Optional(Type.String({ description: "swarm deployments (strategy `swarm`): how Swarm replaces the tasks (each service's update_config)" })),
});

export const StartedRollback = Type.Intersect([
  StartedJob,
  Type.Object({
    revision: Type.Integer(),
    pins: Type.Record(Type.String(), Type.String(), { description: 'service → the image reference it will run' }),
    unpinned: Type.Array(Type.Object({ service: Type.String(), why: Type.String() })),
    volumes: Type.Object({
      touched: Type.Literal(false),
      note: Type.String(),
      backup_before_revision: Nullable(Type.String({ description: 'the backup taken before that revision, if one was (restore it with the backups plugin)' })),
    }),
  }),
]);

export const HookState = Type.Object({
  deployment: Type.String(),
  enabled: Type.Boolean(),
  created_at: Nullable(Type.String()),
  created_by: Nullable(Type.String()),
  last_used_at: Nullable(Type.String()),
  url: Type.String({ description: 'path of the hook (POST, no bearer token)' }),
  headers: Type.Object({ timestamp: Type.String(), delivery: Type.String(), signature: Type.String() }),
  signature: Type.String({ description: 'what is signed' }),
});

export const CreatedHook = Type.Intersect([
  HookState,
  Type.Object({ secret: Type.String({ description: 'shown once: store it in CI; a new call rotates it (the old one stops working)' }) }),
]);
