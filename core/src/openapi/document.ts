/** `/api/openapi.json`: an OpenAPI 3.1 document generated from the registry (enabled plugins only). */
import { compareText } from '@agent/sdk';
import type { RouteRegistry, RegisteredAppRoute, RegisteredRoute, RegisteredSocket } from './registry.js';
import { closeObjects } from './validation.js';
import { neededLevel } from '../http/execute.js';
import type { ResourcePolicy } from '@agent/sdk';

type Json = Record<string, unknown>;

const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');

const errorRef = { $ref: '#/components/schemas/Error' };
const errorResponse = (description: string) => ({ description, content: { 'application/json': { schema: errorRef } } });

function parameters(params: Json, query: Json): Json[] {
  const out: Json[] = [];
  const add = (where: 'path' | 'query', schema: Json) => {
    const props = (schema.properties ?? {}) as Record<string, Json>;
    const required = new Set((schema.required ?? []) as string[]);
    for (const [name, s] of Object.entries(props)) {
      const { description, ...rest } = s;
      out.push({ name, in: where, required: where === 'path' ? true : required.has(name), ...(description ? { description } : {}), schema: rest });
    }
  };
  add('path', params);
  add('query', query);
  return out;
}

function envelope(data: Json | undefined, paginated: boolean): Json {
  const props: Json = { data: data ?? {}, message: { type: 'string' } };
  if (paginated) props.meta = { $ref: '#/components/schemas/PageMeta' };
  return { type: 'object', properties: props, required: ['data'] };
}

function successStatus(route: RegisteredRoute | RegisteredAppRoute): string {
  return String(route.spec.status ?? (route.method === 'POST' && /(create|Create)$/.test(route.operationId) ? 201 : 200));
}

function httpOperation(route: RegisteredRoute, plans: boolean): Json {
  const spec = route.spec;
  const response = spec.response ? closeObjects(spec.response) : undefined;
  const paginated = !!(response && response.type === 'array' && (route.validate.query.schema.properties as Json | undefined)?.offset);
  const status = successStatus(route);
  const responses: Json = {};
  responses[status] = spec.produces
    ? { description: 'success', content: { [spec.produces]: { schema: { type: 'string', format: 'binary' } } } }
    : { description: 'success', content: { 'application/json': { schema: envelope(response, paginated) } } };
  if (spec.plan) {
    responses['201'] = responses['201'] ?? {
      description: 'with `plan=true`: the plan that would be applied (nothing changed)',
      content: { 'application/json': { schema: { type: 'object', properties: { data: { $ref: '#/components/schemas/Plan' } } } } },
    };
  }
  responses['400'] = errorResponse('invalid parameters (the message names the field)');
  if (route.permission !== null) {
    responses['401'] = errorResponse('missing or invalid token');
    responses['403'] = errorResponse('the principal lacks the permission or deployment access');
  }
  responses['404'] = errorResponse('not found');
  responses['500'] = errorResponse('internal error');
  const params = parameters(route.validate.params.schema, route.validate.query.schema);
  if (spec.plan) {
    params.push({ name: 'plan', in: 'query', required: false, description: 'preview the change as a plan instead of running it', schema: { type: 'boolean' } });
  }
  const op: Json = {
    operationId: route.operationId,
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    tags: [route.tag],
    'x-permission': route.permission ?? 'public',
    'x-plan': !!spec.plan,
    'x-plugin': route.plugin,
    ...(spec.deployment ? { 'x-deployment-scoped': true } : {}),
    ...(typeof spec.deployment === 'string' ? { 'x-deployment-param': spec.deployment } : {}),
    ...(spec.deployment ? { 'x-deployment-level': neededLevel(route.permission, spec.deploymentLevel) } : {}),
    ...(route.permission !== null ? { 'x-tenancy': spec.tenancy ?? 'global' } : {}),
    parameters: params,
    responses,
  };
  if (route.validate.body) {
    // Read from the spec when the document is built (not at registration), like `response`: a plugin may
    // complete the documented schema in `start`, once every plugin is set up (the settings of all plugins).
    op.requestBody = { required: true, content: { 'application/json': { schema: closeObjects(spec.body) } } };
  } else if (spec.rawBody) {
    op.requestBody = { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } };
  }
  if (route.permission === null) op.security = [];
  return op;
}

function socketOperation(s: RegisteredSocket): Json {
  return {
    operationId: s.operationId,
    summary: s.spec.summary,
    description: `${s.spec.description ? s.spec.description + '\n\n' : ''}WebSocket: upgrade this path, then send the access token (JWT or API key) as the first text message. Messages are JSON objects.`,
    tags: [s.tag],
    'x-permission': s.permission,
    'x-plan': false,
    'x-plugin': s.plugin,
    'x-websocket': true,
    ...(s.spec.deployment ? { 'x-deployment-scoped': true } : {}),
    ...(typeof s.spec.deployment === 'string' ? { 'x-deployment-param': s.spec.deployment } : {}),
    ...(s.spec.deployment ? { 'x-deployment-level': neededLevel(s.permission, s.spec.deploymentLevel) } : {}),
    'x-tenancy': s.spec.tenancy ?? 'global',
    parameters: parameters(s.validate.params.schema, s.validate.query.schema),
    responses: { '101': { description: 'switching protocols' }, '401': errorResponse('bad token (closes with 1008)') },
  };
}

function appOperation(a: RegisteredAppRoute): Json {
  const spec = a.spec;
  const status = successStatus(a);
  const responses: Json = {
    [status]: spec.produces
      ? { description: 'success', content: { [spec.produces]: { schema: { type: 'string' } } } }
      : { description: 'success', content: { 'application/json': { schema: envelope(spec.response ? closeObjects(spec.response) : undefined, false) } } },
    '400': errorResponse('invalid parameters'),
    '401': errorResponse('missing or invalid token'),
    '403': errorResponse('not allowed'),
    '502': errorResponse('the app is not running (PLUGIN_UNAVAILABLE)'),
  };
  const op: Json = {
    operationId: a.operationId,
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    tags: [a.tag],
    'x-permission': a.permission,
    'x-plan': false,
    'x-plugin': a.plugin,
    'x-app': true,
    'x-tenancy': spec.tenancy ?? 'global',
    parameters: parameters(a.validate.params.schema, a.validate.query.schema),
    responses,
  };
  if (spec.body) op.requestBody = { required: true, content: { 'application/json': { schema: closeObjects(spec.body) } } };
  return op;
}

export interface DocumentInput {
  version: string;
  registry: RouteRegistry;
  resources: readonly ResourcePolicy[];
  plugins: { name: string; description?: string }[];
}

export function buildOpenApi({ version, registry, resources, plugins }: DocumentInput): Json {
  const paths: Record<string, Json> = {};
  const at = (path: string): Json => (paths[path] ??= {});
  for (const r of registry.routes) at(toOpenApiPath(`/api${r.path}`))[r.method.toLowerCase()] = httpOperation(r, true);
  for (const s of registry.sockets) at(toOpenApiPath(`/api${s.path}`)).get = socketOperation(s);
  for (const a of registry.appRoutes) at(toOpenApiPath(`/api/plugin/${a.plugin}${a.path}`))[a.method.toLowerCase()] = appOperation(a);
  const tags = new Map<string, string | undefined>();
  for (const p of plugins) tags.set(p.name, p.description);
  for (const r of [...registry.routes, ...registry.sockets, ...registry.appRoutes]) if (!tags.has(r.tag)) tags.set(r.tag, undefined);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Host deployment agent API',
      version,
      description:
        'The live description of this agent: only enabled plugins appear. `x-permission` is the permission an operation needs, `x-plan` whether it accepts `?plan=true`, `x-tenancy` what a principal limited to some deployments may do with it when the request names no deployment (`global`: nothing; `filtered`: only what it reaches; `own`: about itself; `catalogue`: read; `create`: a scoped user may create a deployment).',
    },
    servers: [{ url: '/' }],
    security: [{ bearerAuth: [] }],
    tags: [...tags].sort(([a], [b]) => compareText(a, b)).map(([name, description]) => ({ name, ...(description ? { description } : {}) })),
    paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => compareText(a, b))),
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'A JWT from POST /api/auth/login, or an API key.' },
      },
      schemas: {
        Error: { type: 'object', properties: { error: { type: 'string' }, code: { type: 'string' } }, required: ['error', 'code'] },
        PageMeta: {
          type: 'object',
          properties: { total: { type: 'integer' }, limit: { type: 'integer' }, offset: { type: 'integer' } },
          required: ['total', 'limit', 'offset'],
        },
        Plan: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            action: { type: 'string' },
            status: { enum: ['available', 'applying', 'applied', 'failed', 'obsolete', 'expired'] },
            resource: { type: 'object', properties: { type: { type: 'string' }, id: { type: 'string' } } },
            changes: { type: 'array', items: { type: 'object' } },
            summary: { type: 'string' },
            expires_at: { type: 'string', format: 'date-time' },
          },
        },
      },
    },
    'x-permissions': resources.map((r) => ({ resource: r.name, description: r.description, operator: r.operator, viewer: r.viewer, owner: r.owner })),
  };
}
