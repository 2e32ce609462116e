/**
 * The routes the core serves itself: health, the live OpenAPI document, plans and the plugin list. The login, the
 * auth status and the token check belong to the principal directory's plugin.
 */
import { PlanView } from '../plans/schema.js';
import { errors, Nullable, reply, Type, type AppDirectory, type RouteSpec, type ServiceRef } from '@agent/sdk';
import type { ResourceCatalog } from '../auth/resources.js';
import { createdName, routeAuditEvent, type AuditWriter } from '../audit.js';
import type { PlanEngine } from '../plans/engine.js';
import { formatDuration } from '../config/units.js';
import { buildOpenApi } from '../openapi/document.js';
import type { RouteRegistry } from '../openapi/registry.js';
import type { PluginHost, PluginRecord } from '../plugins/host.js';
import { dependencies } from '../plugins/context.js';
import { execute } from './execute.js';

export interface CoreRouteDeps {
  version: string;
  startedAt: number;
  catalog: ResourceCatalog;
  audit: AuditWriter;
  plans: PlanEngine;
  registry: RouteRegistry;
  host: PluginHost;
  apps: AppDirectory;
}

/** A plugin as the list shows it (what `pluginView` answers without details). */
const pluginSummary = {
  name: Type.String(),
  version: Type.String(),
  description: Type.String(),
  status: Type.Union([Type.Literal('running'), Type.Literal('failed'), Type.Literal('stopped')]),
  error: Nullable(Type.String()),
  builtin: Type.Boolean(),
  source: Type.String({ description: 'the name or path it was enabled by' }),
  deployable: Nullable(Type.Object({ summary: Type.String() })),
  app: Nullable(
    Type.Object({
      status: Type.Union(['starting', 'running', 'crashed', 'stopped'].map((s) => Type.Literal(s))),
      // Absent while no process was started for it (`{status: 'stopped'}`).
      name: Type.Optional(Type.String()),
      pid: Type.Optional(Nullable(Type.Integer())),
      port: Type.Optional(Nullable(Type.Integer())),
      restarts: Type.Optional(Type.Integer()),
      last_exit: Type.Optional(Nullable(Type.Object({ code: Nullable(Type.Integer()), signal: Nullable(Type.String()), at: Type.String() }))),
    }),
  ),
  provides: Type.Array(Type.String(), { description: 'ids of the services it provides' }),
  requires: Type.Array(Type.String(), { description: 'ids of the services it needs' }),
  uses: Type.Array(Type.String(), { description: 'ids of the services it uses when present' }),
  route_count: Type.Integer({ description: 'routes, websockets and app routes' }),
};
const PluginSummary = Type.Object(pluginSummary);
const PluginDetails = Type.Object({
  ...pluginSummary,
  routes: Type.Array(
    Type.Object({
      method: Type.String(),
      path: Type.String(),
      operation_id: Type.String(),
      permission: Type.String(),
      plan: Type.Optional(Type.Boolean()),
      websocket: Type.Optional(Type.Boolean()),
    }),
  ),
  jobs: Type.Array(Type.Object({ name: Type.String(), cron: Type.String(), next_run: Nullable(Type.String()) })),
  resources: Type.Array(
    Type.Object({
      name: Type.String(),
      description: Type.String(),
      operator: Type.Union(['none', 'read', 'write'].map((s) => Type.Literal(s))),
      viewer: Type.Union(['none', 'read'].map((s) => Type.Literal(s))),
      owner: Type.Union(['deployment', 'global', 'both'].map((s) => Type.Literal(s))),
      plugin: Type.String(),
    }),
  ),
  deployable: Nullable(
    Type.Object({ summary: Type.String(), config: Type.Object({}, { additionalProperties: true, description: 'JSON Schema of the config it takes' }) }),
  ),
});

/** The top of `/api/openapi.json` (its parts are described by the OpenAPI 3.1 specification). */
const OpenApiDocument = Type.Object({
  openapi: Type.Literal('3.1.0'),
  info: Type.Object({ title: Type.String(), version: Type.String(), description: Type.String() }),
  servers: Type.Array(Type.Object({ url: Type.String() })),
  security: Type.Array(Type.Record(Type.String(), Type.Array(Type.String()))),
  tags: Type.Array(Type.Object({ name: Type.String(), description: Type.Optional(Type.String()) })),
  paths: Type.Record(Type.String(), Type.Record(Type.String(), Type.Unknown())),
  components: Type.Object({ securitySchemes: Type.Record(Type.String(), Type.Unknown()), schemas: Type.Record(Type.String(), Type.Unknown()) }),
  'x-permissions': Type.Array(
    Type.Object({ resource: Type.String(), description: Type.String(), operator: Type.String(), viewer: Type.String(), owner: Type.String() }),
  ),
});

export function coreRoutes(d: CoreRouteDeps): RouteSpec<any, any, any>[] {
  // Built on first request: every plugin has registered its routes by then.
  let openapi: string | null = null;
  const pluginView = (p: PluginRecord, detailed: boolean) => {
    const own = d.registry.forPlugin(p.name);
    const def = p.definition;
    const app = def?.app ? d.apps.state(p.name) : undefined;
    const deps = def ? dependencies(def).map(([, dep]) => dep) : [];
    const base = {
      name: p.name,
      version: p.version,
      description: p.description,
      status: p.status,
      error: p.error,
      builtin: p.builtin,
      source: p.source,
      deployable: def?.deployable ? { summary: def.deployable.summary } : null,
      app: def?.app ? (app ? { ...app, secret: undefined } : { status: 'stopped' }) : null,
      provides: Object.values((def?.provides ?? {}) as Record<string, ServiceRef<unknown>>).map((r) => r.id),
      requires: deps.filter((dep) => !dep.optional).map((dep) => dep.ref.id),
      uses: deps.filter((dep) => dep.optional).map((dep) => dep.ref.id),
      route_count: own.routes.length + own.sockets.length + own.appRoutes.length,
    };
    if (!detailed) return base;
    return {
      ...base,
      routes: [
        ...own.routes.map((r) => ({
          method: r.method,
          path: `/api${r.path}`,
          operation_id: r.operationId,
          permission: r.permission ?? 'public',
          plan: !!r.spec.plan,
        })),
        ...own.sockets.map((s) => ({ method: 'GET', path: `/api${s.path}`, operation_id: s.operationId, permission: s.permission, websocket: true })),
        ...own.appRoutes.map((a) => ({ method: a.method, path: `/api/plugin/${a.plugin}${a.path}`, operation_id: a.operationId, permission: a.permission })),
      ],
      jobs: p.staged?.scheduler.list() ?? [],
      resources: d.catalog.list().filter((r) => r.plugin === p.name),
      deployable: def?.deployable ? { summary: def.deployable.summary, config: def.deployable.config } : null,
    };
  };

  return [
    {
      method: 'GET',
      path: '/health',
      public: true,
      tag: 'system',
      operationId: 'system.health',
      summary: 'Agent health (no authentication)',
      response: Type.Object({ status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')]), version: Type.String(), uptime: Type.String() }),
      handler: () => ({
        status: d.host.failed().length ? 'degraded' : 'ok',
        version: d.version,
        uptime: formatDuration((Date.now() - d.startedAt) / 1000),
      }),
    },
    {
      method: 'GET',
      path: '/openapi.json',
      permission: 'authenticated',
      tag: 'system',
      operationId: 'system.openapi',
      tenancy: 'catalogue',
      summary: 'The live OpenAPI 3.1 description of this agent (enabled plugins only)',
      produces: 'application/json',
      response: OpenApiDocument,
      handler: () => {
        openapi ??= JSON.stringify(
          buildOpenApi({
            version: d.version,
            registry: d.registry,
            resources: d.catalog.list(),
            plugins: d.host.running().map((p) => ({ name: p.name, description: p.description })),
          }),
        );
        return reply.stream(openapi, { contentType: 'application/json; charset=utf-8' });
      },
    },
    {
      method: 'GET',
      path: '/plans',
      permission: 'plans:read',
      tag: 'plans',
      operationId: 'plans.list',
      tenancy: 'own',
      summary: 'List plans (your own; every plan for an admin)',
      query: Type.Object({
        status: Type.Optional(Type.Union(['available', 'applying', 'applied', 'failed', 'obsolete', 'expired'].map((s) => Type.Literal(s)))),
      }),
      response: Type.Array(PlanView),
      handler: (req) => d.plans.list(req.principal, req.query as { status?: never }),
    },
    {
      method: 'GET',
      path: '/plans/:id',
      permission: 'plans:read',
      tag: 'plans',
      operationId: 'plans.get',
      tenancy: 'own',
      summary: 'One plan, sensitive values redacted',
      params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
      response: PlanView,
      handler: (req) => d.plans.view(d.plans.get((req.params as { id: string }).id, req.principal)),
    },
    {
      method: 'POST',
      path: '/plans/:id/apply',
      permission: 'plans:write',
      tag: 'plans',
      operationId: 'plans.apply',
      tenancy: 'own',
      summary: 'Run the reviewed change (409 PLAN_STALE when what it depends on changed, 410 PLAN_EXPIRED)',
      description: "Answers what the plan's operation answers, as the request it stands for would have.",
      params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
      // The plan as it ended, and what its operation answered (`data` of that answer, whatever its route describes).
      response: Type.Object({ plan: PlanView, result: Type.Unknown() }),
      successes: [201, 202, 204],
      errors: { 409: ['PLAN_STALE', 'PLAN_NOT_AVAILABLE', '*'], 410: ['PLAN_EXPIRED'], 400: ['*'], 413: ['*'], 429: ['*'], 502: ['*'], 503: ['*'], 504: ['*'] },
      handler: (req) =>
        d.plans.apply((req.params as { id: string }).id, req.principal, async (inv) => {
          // Answered once the record is durable, like the request the plan stands for.
          const record = (status: number, deployment: string | null, data?: unknown) =>
            d.audit.settle(
              routeAuditEvent({
                ...inv,
                status,
                deployment,
                created: createdName(inv.route.spec.creates, data, inv.body),
                ip: req.ip,
                detail: { plan: inv.planId, applied_by: req.principal.id },
              }),
            );
          let result;
          try {
            result = await execute({ ...inv, ip: req.ip, headers: {}, signal: () => req.signal, raw: req.raw, wantsPlan: false }, d.plans);
          } catch (err) {
            await record((err as { status?: number }).status ?? 500, null).catch(() => undefined);
            throw err;
          }
          const { reply: answer, deployment } = result;
          await record(answer.status, deployment, answer.body?.data);
          return answer;
        }),
    },
    {
      method: 'DELETE',
      path: '/plans/:id',
      permission: 'plans:write',
      tag: 'plans',
      operationId: 'plans.discard',
      tenancy: 'own',
      summary: 'Discard a plan',
      params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
      response: Type.Null(),
      handler: async (req) => {
        await d.plans.discard((req.params as { id: string }).id, req.principal);
        return reply.ok(null, 'plan discarded');
      },
    },
    {
      method: 'GET',
      path: '/plugins',
      permission: 'plugins:read',
      tag: 'plugins',
      operationId: 'plugins.list',
      tenancy: 'catalogue',
      summary: 'Plugins with version, status, route and job counts',
      response: Type.Array(PluginSummary),
      handler: () => d.host.plugins.map((p) => pluginView(p, false)),
    },
    {
      method: 'GET',
      path: '/plugins/:name',
      permission: 'plugins:read',
      tag: 'plugins',
      operationId: 'plugins.get',
      tenancy: 'catalogue',
      summary: 'One plugin with its routes, jobs and permission resources',
      params: Type.Object({ name: Type.String({ pattern: '^[@a-z0-9][a-z0-9./_-]*$', maxLength: 214 }) }),
      response: PluginDetails,
      handler: (req) => {
        const p = d.host.plugins.find((x) => x.name === (req.params as { name: string }).name);
        if (!p) throw errors.notFound(`plugin '${(req.params as { name: string }).name}' not found`);
        return pluginView(p, true);
      },
    },
  ];
}
