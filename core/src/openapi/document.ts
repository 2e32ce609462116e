/** `/api/openapi.json`: an OpenAPI 3.1 document generated from the registry (enabled plugins only). */
import { compareText, type ErrorCodes, type ResourcePolicy } from '@agent/sdk';
import type { RouteRegistry, RegisteredAppRoute, RegisteredRoute, RegisteredSocket } from './registry.js';
import { closeObjects } from './validation.js';
import { PlanView } from '../plans/schema.js';
import { neededLevel } from '../auth/checks.js';

type Json = Record<string, unknown>;

const errorResponse = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });
const jsonBody = (schema: unknown) => ({ required: true, content: { 'application/json': { schema: closeObjects(schema) } } });
/** A multipart form: the body's fields and one binary part per declared file. */
function multipartBody(fields: unknown, files: string[]): Json {
  const schema = (fields ? closeObjects(fields) : { type: 'object', properties: {} }) as Json;
  const properties = { ...(schema.properties as Json), ...Object.fromEntries(files.map((f) => [f, { type: 'string', format: 'binary' }])) };
  const required = [...((schema.required as string[] | undefined) ?? []), ...files];
  return { required: true, content: { 'multipart/form-data': { schema: { ...schema, type: 'object', properties, required } } } };
}

/** The path params, then the query params, as OpenAPI parameters (a property's description moves up). */
function parameters(e: RegisteredRoute | RegisteredSocket | RegisteredAppRoute): Json[] {
  return (['path', 'query'] as const).flatMap((where) => {
    const schema = e.validate[where === 'path' ? 'params' : 'query'].schema;
    const required = (schema.required ?? []) as string[];
    return Object.entries((schema.properties ?? {}) as Record<string, Json>).map(([name, { description, ...rest }]) => ({
      name,
      in: where,
      required: where === 'path' || required.includes(name),
      ...(description ? { description } : {}),
      schema: rest,
    }));
  });
}

/** What every operation says: identity, permission, deployment scoping, tenancy and parameters (`marks`: its kind). */
function operation(e: RegisteredRoute | RegisteredSocket | RegisteredAppRoute, description: string | undefined, responses: Json, marks: Json = {}): Json {
  const { spec, permission } = e;
  const deployment = 'deployment' in spec ? spec.deployment : undefined;
  return {
    operationId: e.operationId,
    summary: spec.summary,
    ...(description ? { description } : {}),
    tags: [e.tag],
    'x-permission': permission ?? 'public',
    'x-plan': e.kind === 'http' && !!e.spec.plan,
    'x-plugin': e.plugin,
    ...marks,
    ...(deployment ? { 'x-deployment-scoped': true } : {}),
    ...(typeof deployment === 'string' ? { 'x-deployment-param': deployment } : {}),
    ...(deployment ? { 'x-deployment-level': neededLevel(permission, 'deploymentLevel' in spec ? spec.deploymentLevel : undefined) } : {}),
    ...(permission !== null ? { 'x-tenancy': spec.tenancy ?? 'global' } : {}),
    parameters: parameters(e),
    responses,
  };
}

/** The success answer of a route or app route: its declared content type (`raw`), else the JSON envelope. */
function success(e: RegisteredRoute | RegisteredAppRoute, raw: Json, paginated: boolean): Json {
  const { spec } = e;
  const status = String(spec.status ?? (e.method === 'POST' && /(create|Create)$/.test(e.operationId) ? 201 : 200));
  if (spec.produces) {
    // A JSON download (the live description itself, an export as JSON) is described by its `response`; other content as what it is.
    const types: readonly string[] = typeof spec.produces === 'string' ? [spec.produces] : spec.produces;
    const content = Object.fromEntries(types.map((t) => [t, { schema: spec.response && /[/+]json\b/.test(t) ? closeObjects(spec.response) : raw }]));
    return { [status]: { description: 'success', content } };
  }
  const data = spec.response ? closeObjects(spec.response) : {};
  const envelope: Json = { data, message: { type: 'string' }, ...(paginated ? { meta: { $ref: '#/components/schemas/PageMeta' } } : {}) };
  return { [status]: { description: 'success', content: { 'application/json': { schema: { type: 'object', properties: envelope, required: ['data'] } } } } };
}

/** What each status means, for the description of an answer. */
const MEANING: Record<string, string> = {
  '400': 'invalid parameters (the message names the field)',
  '401': 'missing or invalid token',
  '403': 'the principal lacks the permission or deployment access',
  '404': 'not found',
  '409': 'conflict with the current state',
  '410': 'gone',
  '413': 'body too large',
  '415': 'unsupported body type',
  '422': 'not processable',
  '423': 'locked',
  '424': 'a server the request names cannot be reached',
  '429': 'too many requests (see Retry-After)',
  '500': 'internal error',
  '502': 'a component the agent drives failed',
  '503': 'a component the agent needs is unavailable',
  '504': 'a component the agent drives did not answer in time',
};

/** The `{error, code}` answer of a status; `codes`, when known completely, make `code` an enum. */
function errorAnswer(status: string, codes: readonly string[] | null): Json {
  if (!codes || codes.includes('*')) {
    const known = (codes ?? []).filter((c) => c !== '*');
    return errorResponse(`${MEANING[status] ?? 'error'}${known.length ? ` (among others: ${[...new Set(known)].sort().join(', ')})` : ''}`);
  }
  const schema = {
    type: 'object',
    properties: { error: { type: 'string' }, code: { enum: [...new Set(codes)].sort() } },
    required: ['error', 'code'],
  };
  return { description: MEANING[status] ?? 'error', content: { 'application/json': { schema } } };
}

/**
 * The codes the kernel itself answers a route with, by status: authentication, the permission and tenancy checks,
 * validation, bodies, the audit record. A route's `errors` add to them (and a status it lists is then complete).
 */
function kernelCodes(route: RegisteredRoute): Record<string, string[]> {
  const { spec, permission } = route;
  const codes: Record<string, string[]> = {
    '400': ['VALIDATION_FAILED', ...(spec.plan ? [] : ['PLAN_NOT_SUPPORTED'])],
    '404': ['NOT_FOUND'],
    '500': ['INTERNAL_ERROR', ...(route.method !== 'GET' && spec.audit !== false ? ['AUDIT_FAILED'] : [])],
  };
  if (permission !== null) {
    codes['401'] = ['UNAUTHORIZED', 'INVALID_TOKEN'];
    codes['403'] = ['FORBIDDEN', 'GLOBAL_SCOPE_REQUIRED'];
  }
  if (route.validate.body || spec.multipart) {
    codes['400']!.push('INVALID_JSON', 'BAD_REQUEST', 'UNSUPPORTED_MEDIA_TYPE', 'REQUEST_ABORTED');
    codes['413'] = ['PAYLOAD_TOO_LARGE'];
    codes['415'] = ['UNSUPPORTED_MEDIA_TYPE'];
  }
  // A form formidable cannot read (multipart.ts).
  if (spec.multipart) codes['400']!.push('INVALID_MULTIPART');
  // A body the handler streams itself: a client that leaves midway is its own error (respond.ts).
  if (spec.rawBody) codes['400']!.push('REQUEST_ABORTED');
  // A streamed answer is ended when the principal loses what it needs (LiveConnections): before its first byte,
  // with the reason.
  if (spec.produces && permission !== null) {
    codes['401']!.push('TOKEN_REVOKED');
    codes['403']!.push('ACCESS_REVOKED');
  }
  return codes;
}

/**
 * What the plugin proxy answers an app route with itself (plugins/proxy.ts): the checks of the kernel, the audit
 * record of a mutation, a read ended when its principal loses its rights, and the app not running. The app adds its
 * own (`errors` of the route).
 */
function appKernelCodes(a: RegisteredAppRoute): Record<string, string[]> {
  const read = a.method === 'GET';
  return {
    '400': ['VALIDATION_FAILED', 'INVALID_PATH'],
    '401': ['UNAUTHORIZED', 'INVALID_TOKEN', ...(read ? ['TOKEN_REVOKED'] : [])],
    '403': ['FORBIDDEN', 'GLOBAL_SCOPE_REQUIRED', ...(read ? ['ACCESS_REVOKED'] : [])],
    '404': ['NOT_FOUND'],
    '500': ['INTERNAL_ERROR', ...(read ? [] : ['AUDIT_FAILED'])],
    '502': ['PLUGIN_UNAVAILABLE'],
  };
}

/** The error answers of a route: the kernel's statuses and the declared ones, `code` an enum where declared. */
function errorAnswers(kernel: Record<string, string[]>, declared: ErrorCodes): Json {
  const out: Json = {};
  for (const status of [...new Set([...Object.keys(kernel), ...Object.keys(declared)])].sort()) {
    const codes = (declared as Record<string, readonly string[] | undefined>)[status];
    out[status] = errorAnswer(status, codes ? [...(kernel[status] ?? []), ...codes] : null);
  }
  return out;
}

function httpOperation(route: RegisteredRoute): Json {
  const { spec, permission } = route;
  const paginated = (spec.response as Json | undefined)?.type === 'array' && !!(route.validate.query.schema.properties as Json | undefined)?.offset;
  const responses = success(route, { type: 'string', format: 'binary' }, paginated);
  const main = Object.values(responses)[0] as Json;
  for (const status of spec.successes ?? []) responses[String(status)] ??= main;
  if (spec.plan) {
    const plan = { type: 'object', properties: { data: { $ref: '#/components/schemas/Plan' }, message: { type: 'string' } }, required: ['data'] };
    const created = responses['201'] as Json | undefined;
    // A create answers 201 too: with `plan=true` it is the plan instead of the resource.
    const resource = (created?.content as Json | undefined)?.['application/json'] as Json | undefined;
    responses['201'] = {
      description: created
        ? 'created; with `plan=true`: the plan that would be applied (nothing changed)'
        : 'with `plan=true`: the plan that would be applied (nothing changed)',
      content: { 'application/json': { schema: resource ? { oneOf: [resource.schema, plan] } : plan } },
    };
  }
  Object.assign(responses, errorAnswers(kernelCodes(route), route.errors));
  const op = operation(route, spec.description, responses);
  if (spec.plan) {
    (op.parameters as Json[]).push({
      name: 'plan',
      in: 'query',
      required: false,
      description: 'preview the change as a plan instead of running it',
      schema: { type: 'boolean' },
    });
  }
  if (spec.multipart) {
    op.requestBody = multipartBody(spec.body, spec.multipart.files);
    responses['413'] = errorAnswer('413', ['PAYLOAD_TOO_LARGE', ...((route.errors as Record<string, string[] | undefined>)['413'] ?? [])]);
    (responses['413'] as Json).description = `a file larger than ${spec.multipart.maxFileSize} bytes`;
    (responses['415'] as Json).description = 'a body other than multipart/form-data';
  } else if (route.validate.body) {
    // Read from the spec when the document is built (not at registration), like `response`: a plugin may
    // complete the documented schema in `start`, once every plugin is set up (the settings of all plugins).
    op.requestBody = jsonBody(spec.body);
  } else if (spec.rawBody) {
    op.requestBody = { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } };
  }
  if (permission === null) op.security = [];
  return op;
}

function socketOperation(s: RegisteredSocket): Json {
  const description = `${s.spec.description ? s.spec.description + '\n\n' : ''}WebSocket: upgrade this path, then send the access token (JWT or API key) as the first text message. Messages are JSON objects.`;
  return operation(
    s,
    description,
    { '101': { description: 'switching protocols' }, '401': errorResponse('bad token (closes with 1008)') },
    { 'x-websocket': true },
  );
}

function appOperation(a: RegisteredAppRoute): Json {
  const responses = { ...success(a, { type: 'string' }, false), ...errorAnswers(appKernelCodes(a), a.spec.errors ?? {}) };
  const op = operation(a, a.spec.description, responses, { 'x-app': true });
  if (a.spec.body) op.requestBody = jsonBody(a.spec.body);
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
  const at = (path: string): Json => (paths[path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}')] ??= {});
  for (const r of registry.routes) at(`/api${r.path}`)[r.method.toLowerCase()] = httpOperation(r);
  for (const s of registry.sockets) at(`/api${s.path}`).get = socketOperation(s);
  for (const a of registry.appRoutes) at(`/api/plugin/${a.plugin}${a.path}`)[a.method.toLowerCase()] = appOperation(a);
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
        Plan: closeObjects(PlanView),
      },
    },
    'x-permissions': resources.map((r) => ({ resource: r.name, description: r.description, operator: r.operator, viewer: r.viewer, owner: r.owner })),
  };
}
