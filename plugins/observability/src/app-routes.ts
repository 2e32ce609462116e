/**
 * The app's routes and their schemas: declared to the core (proxy permission checks, OpenAPI) by `index.ts`, and
 * used by the app process itself to validate bodies.
 */
import { DEPLOYMENT_NAME, DEPLOYMENT_OR_RETIRED, Type, type AppRouteSpec, type Static } from '@agent/sdk';
import { CONTAINER_METRICS, HOST_METRICS } from './metrics.js';

export const METRIC_NAMES = [...CONTAINER_METRICS.map((m) => m.name), ...HOST_METRICS.map((m) => m.name)];
export const CONTAINER_METRIC_NAMES: string[] = CONTAINER_METRICS.map((m) => m.name);
export const HOST_METRIC_NAMES: string[] = HOST_METRICS.map((m) => m.name);

/** Event filters also take a retired name (`<name>~<time>`): a deleted deployment's events, for global principals. */
/** Container names as the engine allows them. */
export const CONTAINER_NAME = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$';
export const SINCE_PATTERN = '^(\\d{1,6}(s|m|h|d)|\\d{4}-\\d{2}-\\d{2}T[0-9:.]+(Z|[+-]\\d{2}:\\d{2}))$';

const Since = Type.Optional(
  Type.String({ pattern: SINCE_PATTERN, default: '1h', description: 'a duration back from now (`15m`, `6h`, `7d`) or an RFC 3339 time' }),
);
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

/** One value per entry of `timestamps` (null where the series has no value then). */
const Values = Type.Array(Type.Union([Type.Number(), Type.Null()]));
const Timestamps = Type.Array(Type.Number(), { description: 'unix milliseconds of the points (start of each step), oldest first' });

export const LatestView = Type.Array(
  Type.Object({
    deployment: Nullable(Type.String()),
    containers: Type.Array(
      Type.Object({
        container: Type.String(),
        id: Type.String(),
        metrics: Type.Record(Type.String(), Type.Number()),
        updated: Type.String(),
      }),
    ),
  }),
);

export const SeriesView = Type.Object({
  since: Type.String(),
  until: Type.String(),
  step: Type.Integer({ description: 'seconds per point' }),
  timestamps: Timestamps,
  series: Type.Array(Type.Object({ container: Nullable(Type.String()), metric: Type.String(), values: Values })),
});

export const HostView = Type.Object({
  since: Type.String(),
  until: Type.String(),
  step: Type.Integer(),
  latest: Type.Record(Type.String(), Type.Number()),
  updated: Nullable(Type.String()),
  timestamps: Timestamps,
  series: Type.Array(Type.Object({ metric: Type.String(), values: Values })),
});

export const HealthView = Type.Array(
  Type.Object({
    container: Type.String(),
    id: Type.String(),
    deployment: Nullable(Type.String()),
    status: Type.Union(['healthy', 'unhealthy', 'starting', 'none'].map((s) => Type.Literal(s))),
    state: Type.String(),
    restarts_by_watcher: Type.Integer(),
    gave_up: Type.Boolean(),
  }),
);

export const HealthEvent = Type.Object({
  id: Type.Integer(),
  time: Type.String(),
  container: Type.String(),
  deployment: Nullable(Type.String()),
  action: Type.Union(['restarted', 'recovered', 'gave_up', 'restart_failed'].map((s) => Type.Literal(s))),
  attempt: Type.Integer(),
  message: Type.String(),
});

export const RuleInput = Type.Object(
  {
    id: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,62}$', description: 'kept from a previous read; generated when absent' })),
    name: Type.String({ minLength: 1, maxLength: 100 }),
    deployment: Type.Optional(Nullable(Type.String({ pattern: DEPLOYMENT_NAME }))),
    metric: Type.Union(METRIC_NAMES.map((m) => Type.Literal(m))),
    comparison: Type.Union([Type.Literal('above'), Type.Literal('below')]),
    threshold: Type.Number(),
    for_seconds: Type.Integer({ minimum: 0, maximum: 7 * 86400 }),
    enabled: Type.Optional(Type.Boolean({ default: true })),
    targets: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
        maxItems: 20,
        default: [],
        description: 'notification target ids or names; empty: the targets subscribed to alert events',
      }),
    ),
    action: Type.Optional(Type.Union([Type.Literal(''), Type.Literal('restart')], { default: '' })),
    // Set by the app when a rule is written; accepted (and ignored) so that a rule read can be sent back as it is.
    created_by: Type.Optional(Nullable(Type.String({ maxLength: 100, description: 'ignored: set by the app' }))),
    written_at: Type.Optional(Nullable(Type.String({ maxLength: 40, description: 'ignored: set by the app' }))),
  },
  { additionalProperties: false },
);
export type RuleInput = Static<typeof RuleInput>;
export const RulesBody = Type.Array(RuleInput, { maxItems: 500 });

export const RuleView = Type.Object({
  id: Type.String(),
  name: Type.String(),
  deployment: Nullable(Type.String()),
  metric: Type.String(),
  comparison: Type.String(),
  threshold: Type.Number(),
  for_seconds: Type.Integer(),
  enabled: Type.Boolean(),
  targets: Type.Array(Type.String()),
  action: Type.String(),
  created_by: Nullable(
    Type.String({
      description:
        'principal that last wrote the rule (`user:<id>`, `api_key:<id>`): its action runs only while that principal may still write to the deployment',
    }),
  ),
  written_at: Nullable(Type.String({ description: 'when the rule was last written' })),
});

export const AlertState = Type.Object({
  rule_id: Type.String(),
  rule_name: Type.String(),
  deployment: Nullable(Type.String()),
  container: Nullable(Type.String()),
  metric: Type.String(),
  comparison: Type.String(),
  threshold: Type.Number(),
  value: Type.Number(),
  state: Type.Union([Type.Literal('pending'), Type.Literal('firing')]),
  since: Type.String(),
});

export const AlertEvent = Type.Object({
  id: Type.Integer(),
  time: Type.String(),
  rule_id: Type.String(),
  rule_name: Type.String(),
  deployment: Nullable(Type.String()),
  container: Nullable(Type.String()),
  metric: Type.String(),
  value: Nullable(Type.Number()),
  threshold: Type.Number(),
  state: Type.Union(['pending', 'firing', 'resolved'].map((s) => Type.Literal(s))),
  message: Type.String(),
});

export const RuntimeConfig = Type.Object(
  {
    sample_interval: Type.Integer({ minimum: 1, maximum: 3600, description: 'seconds between samples' }),
    raw_retention: Type.Integer({ minimum: 60, maximum: 30 * 86400, description: 'seconds raw samples are kept' }),
    rollup_retention: Type.Integer({ minimum: 3600, maximum: 400 * 86400, description: 'seconds 1-minute rollups are kept' }),
    health: Type.Object(
      {
        enabled: Type.Boolean({ description: 'restart containers whose healthcheck reports unhealthy' }),
        cooldown: Type.Integer({ minimum: 1, maximum: 86400, description: 'seconds between two restarts of a container' }),
        max_retries: Type.Integer({ minimum: 0, maximum: 100, description: 'restarts before giving up' }),
        scope: Type.Union([Type.Literal('deployments'), Type.Literal('all')], { description: 'watch containers of deployments only, or every container' }),
      },
      { additionalProperties: false },
    ),
    alerts: Type.Object(
      {
        events_max: Type.Integer({ minimum: 10, maximum: 100_000, description: 'alert and health events kept' }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type RuntimeConfig = Static<typeof RuntimeConfig>;

export const ConfigPatch = Type.Object(
  {
    sample_interval: Type.Optional(RuntimeConfig.properties.sample_interval),
    raw_retention: Type.Optional(RuntimeConfig.properties.raw_retention),
    rollup_retention: Type.Optional(RuntimeConfig.properties.rollup_retention),
    health: Type.Optional(Type.Partial(RuntimeConfig.properties.health, { additionalProperties: false })),
    alerts: Type.Optional(Type.Partial(RuntimeConfig.properties.alerts, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type ConfigPatch = Static<typeof ConfigPatch>;

/** What the app's server answers a body it cannot read (app/server.ts), besides the checks of the handlers. */
const BODY_ERRORS = { 400: ['INVALID_JSON'], 413: ['PAYLOAD_TOO_LARGE'] } as const;

const Limit = (def: number, max: number) => Type.Optional(Type.Integer({ minimum: 1, maximum: max, default: def }));

export const routes: AppRouteSpec[] = [
  {
    method: 'GET',
    path: '/metrics/latest',
    permission: 'metrics:read',
    operationId: 'observability.metricsLatest',
    tenancy: 'filtered',
    summary: 'Latest reading per container, grouped by deployment',
    query: Type.Object({ deployment: Type.Optional(Type.String({ pattern: DEPLOYMENT_NAME })) }),
    response: LatestView,
  },
  {
    method: 'GET',
    path: '/metrics/timeseries',
    permission: 'metrics:read',
    operationId: 'observability.metricsTimeseries',
    tenancy: 'filtered',
    summary: 'History of every metric of every container of one deployment',
    query: Type.Object({ deployment: Type.String({ pattern: DEPLOYMENT_NAME }), since: Since }),
    response: SeriesView,
  },
  {
    method: 'GET',
    path: '/metrics/host',
    permission: 'metrics:read',
    operationId: 'observability.metricsHost',
    tenancy: 'global',
    summary: 'Host CPU, memory, disk and network: latest values and history',
    query: Type.Object({ since: Since }),
    response: HostView,
  },
  {
    method: 'GET',
    path: '/metrics/series',
    permission: 'metrics:read',
    operationId: 'observability.metricsSeries',
    tenancy: 'filtered',
    summary: 'History of one metric of one container',
    query: Type.Object({
      deployment: Type.Optional(Type.String({ pattern: DEPLOYMENT_NAME })),
      container: Type.String({ pattern: CONTAINER_NAME }),
      metric: Type.Union(CONTAINER_METRIC_NAMES.map((m) => Type.Literal(m))),
      since: Since,
    }),
    response: SeriesView,
  },
  {
    method: 'GET',
    path: '/metrics/prometheus',
    permission: 'metrics:read',
    operationId: 'observability.metricsPrometheus',
    tenancy: 'global',
    summary: 'Latest readings in the Prometheus text exposition format',
    produces: 'text/plain; version=0.0.4',
  },
  {
    method: 'GET',
    path: '/health',
    permission: 'metrics:read',
    operationId: 'observability.health',
    tenancy: 'filtered',
    summary: 'Health of each container (from its healthcheck) and what the watcher did',
    query: Type.Object({ deployment: Type.Optional(Type.String({ pattern: DEPLOYMENT_NAME })) }),
    response: HealthView,
  },
  {
    method: 'GET',
    path: '/health/events',
    permission: 'metrics:read',
    operationId: 'observability.healthEvents',
    tenancy: 'filtered',
    summary: 'Restarts, recoveries and give-ups of the health watcher, newest first',
    query: Type.Object({ deployment: Type.Optional(Type.String({ pattern: DEPLOYMENT_OR_RETIRED })), limit: Limit(100, 1000) }),
    response: Type.Array(HealthEvent),
  },
  {
    method: 'GET',
    path: '/alerts/rules',
    permission: 'alerts:read',
    operationId: 'observability.listRules',
    tenancy: 'filtered',
    summary: 'Alert rules (those of deployments you can access; rules of every container or of the host: global principals)',
    response: Type.Array(RuleView),
  },
  {
    method: 'PUT',
    path: '/alerts/rules',
    permission: 'alerts:write',
    operationId: 'observability.replaceRules',
    tenancy: 'filtered',
    summary: 'Replace the alert rules you can access (the whole array)',
    description:
      'Rules you cannot change are kept as they are (and those you cannot see are not shown). Rules without a deployment (every container, or host metrics) are global: a principal limited to its deployments gets 403 GLOBAL_SCOPE_REQUIRED for one, and 404 for a deployment it cannot see. The caller becomes the creator of every rule it adds or changes: a restart action runs only while its creator may still write to the deployment.',
    body: RulesBody,
    response: Type.Array(RuleView),
    errors: BODY_ERRORS,
  },
  {
    method: 'GET',
    path: '/alerts/firing',
    permission: 'alerts:read',
    operationId: 'observability.firingAlerts',
    tenancy: 'filtered',
    summary: 'Rules currently breached (pending or firing), per container',
    response: Type.Array(AlertState),
  },
  {
    method: 'GET',
    path: '/alerts/events',
    permission: 'alerts:read',
    operationId: 'observability.alertEvents',
    tenancy: 'filtered',
    summary: 'Alert history (pending, firing, resolved), newest first; bounded',
    query: Type.Object({
      deployment: Type.Optional(Type.String({ pattern: DEPLOYMENT_OR_RETIRED })),
      rule: Type.Optional(Type.String({ maxLength: 63 })),
      limit: Limit(100, 1000),
    }),
    response: Type.Array(AlertEvent),
  },
  {
    method: 'GET',
    path: '/config',
    permission: 'observability:read',
    operationId: 'observability.getConfig',
    tenancy: 'global',
    summary: 'Collector, retention, health watcher and alert settings',
    response: RuntimeConfig,
  },
  {
    method: 'PUT',
    path: '/config',
    permission: 'observability:write',
    operationId: 'observability.updateConfig',
    tenancy: 'global',
    summary: 'Change collector, retention, health watcher or alert settings (partial)',
    body: ConfigPatch,
    response: RuntimeConfig,
    errors: BODY_ERRORS,
  },
];
