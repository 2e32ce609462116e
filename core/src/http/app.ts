/**
 * The koa application: error envelope, CORS, the router built from the registry (auth → body → pipeline →
 * audit per route), the plugin proxy, and JSON 404/405 answers.
 */
import type { IncomingHttpHeaders } from 'node:http';
import Koa from 'koa';
import Router from '@koa/router';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { cjsExports, errors, HttpError, type AuditEventInput, type Principal, type PrincipalDirectory } from '@agent/sdk';
import type { CoreConfig } from '../config/config.js';
import type { RootLogger } from '../log.js';
import type { RouteRegistry, RegisteredRoute } from '../openapi/registry.js';
import type { PlanEngine } from '../plans/engine.js';
import type { AuditWriter } from '../audit.js';
import { execute, type ExecuteResult } from './execute.js';
import { toErrorAnswer } from './errors.js';

export interface HttpDeps {
  config: CoreConfig;
  log: RootLogger;
  principals: PrincipalDirectory;
  registry: RouteRegistry;
  plans: PlanEngine;
  audit: AuditWriter;
  /** Serves `/api/plugin/<name>/…`; resolves when the proxied answer is complete. */
  proxy: (ctx: Koa.Context) => Promise<void>;
  /** Development aid (tests): check `data` of successful answers against the route's response schema. */
  validateResponses: boolean;
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const checked = (principal: Principal | null): Principal => {
  if (!principal) throw errors.unauthorized('invalid, expired or revoked token', 'INVALID_TOKEN');
  return principal;
};

/**
 * The principal behind an `Authorization: Bearer …` header; throws 401. Synchronous when the directory answers
 * from its caches (every request but a token's first), so the hot path awaits nothing.
 */
export function authenticateHeader(header: string | undefined, ip: string, principals: PrincipalDirectory): Principal | Promise<Principal> {
  if (!header) throw errors.unauthorized('missing bearer token');
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw errors.unauthorized('the Authorization header must be "Bearer <token>"');
  const principal = principals.authenticate(m[1]!, ip);
  return principal instanceof Promise ? principal.then(checked) : checked(principal);
}

/** The first literal path segment names the resource type in audit records. */
export const resourceTypeOf = (path: string): string => path.split('/').find((s) => s && !s.startsWith(':')) ?? 'api';

/**
 * The name of what a route with `creates` made: that property of the answer's data, else of the request body
 * (a failed create still names what it tried). Null without `creates` or a usable value.
 */
export function createdName(property: string | undefined, ...sources: unknown[]): string | null {
  if (!property) return null;
  for (const source of sources) {
    const value = source !== null && typeof source === 'object' ? (source as Record<string, unknown>)[property] : undefined;
    if ((typeof value === 'string' && value !== '') || typeof value === 'number') return String(value);
  }
  return null;
}

/** The error of a mutation whose audit record could not be written: it was made, but is not answered as a success. */
export const auditFailed = () => errors.internal('the change was made but its audit record could not be written', 'AUDIT_FAILED');

export function auditActor(principal: Principal): { actor_type: 'user' | 'api_key' | 'system'; actor_id: string; actor_name: string } {
  return { actor_type: principal.type, actor_id: principal.id, actor_name: principal.name };
}

/**
 * The audit record of one call of a route, made by a request or by a plan applied: what it acted on (the first
 * path param, else what it created; for a route that creates a deployment, that deployment) and how it ended.
 */
export function routeAuditEvent(call: {
  route: RegisteredRoute;
  principal: Principal;
  params: Record<string, string>;
  status: number;
  deployment: string | null;
  created: string | null;
  ip: string;
  action?: string;
  detail: Record<string, unknown> | null;
}): AuditEventInput {
  const { route, created, status } = call;
  return {
    ...auditActor(call.principal),
    action: call.action ?? route.operationId,
    resource_type: resourceTypeOf(route.path),
    resource_id: Object.values(call.params)[0] ?? created,
    deployment: call.deployment ?? (route.spec.tenancy === 'create' ? created : null),
    success: status < 400,
    status,
    client_ip: call.ip,
    detail: call.detail,
  };
}

function makeResponseValidator(log: RootLogger) {
  const ajv = new Ajv2020({ strict: false, allErrors: false });
  const cache = new Map<RegisteredRoute, ReturnType<Ajv2020['compile']>>();
  return (route: RegisteredRoute, data: unknown) => {
    let fn = cache.get(route);
    if (!fn) {
      // Responses may carry more fields than documented; only the documented ones are checked.
      fn = ajv.compile(JSON.parse(JSON.stringify(route.spec.response)));
      cache.set(route, fn);
    }
    if (!fn(data)) {
      const first = fn.errors![0]!;
      log.error({ operation: route.operationId, error: first }, 'response does not match its schema');
      throw errors.internal(`response of ${route.operationId} does not match its schema at '${first.instancePath}': ${first.message}`, 'RESPONSE_INVALID');
    }
  };
}

export function createHttpApp(deps: HttpDeps): Koa {
  const { config, log, principals, registry, plans, audit } = deps;
  const app = new Koa({ proxy: config.api.trust_proxy });
  app.silent = true;
  const validateResponse = deps.validateResponses ? makeResponseValidator(log) : undefined;
  const allowedOrigins = new Set(config.api.allowed_origins);

  const answerError = (ctx: Koa.Context, err: unknown) => {
    const answer = toErrorAnswer(err);
    if (answer.internal) log.error({ err, method: ctx.method, path: ctx.path }, 'request failed');
    if (ctx.headerSent || !ctx.writable) return;
    ctx.status = answer.status;
    for (const [k, v] of Object.entries(answer.headers ?? {})) ctx.set(k, v);
    ctx.body = answer.body;
  };
  /** A request nothing answered (no route, nothing set a body) gets the JSON 404. */
  const answerUnhandled = (ctx: Koa.Context) => {
    const response = ctx.response;
    if (response.status === 404 && response.body === undefined && ctx.respond !== false)
      answerError(ctx, errors.notFound(`no route ${ctx.method} ${ctx.path}`));
  };

  /** CORS headers; true when it answered the request itself (a preflight). Throws 403 for a denied preflight. */
  const cors = config.api.enable_cors
    ? (ctx: Koa.Context): boolean => {
        const origin = ctx.get('origin');
        if (!origin) return false;
        const allowed = allowedOrigins.has(origin);
        ctx.vary('Origin');
        if (ctx.method === 'OPTIONS' && ctx.get('access-control-request-method')) {
          if (!allowed) throw errors.forbidden(`origin ${origin} is not allowed`, 'CORS_ORIGIN_DENIED');
          ctx.set('Access-Control-Allow-Origin', origin);
          ctx.set('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE');
          ctx.set('Access-Control-Allow-Headers', ctx.get('access-control-request-headers') || 'Authorization, Content-Type');
          ctx.set('Access-Control-Max-Age', '600');
          ctx.status = 204;
          return true;
        }
        if (allowed) {
          ctx.set('Access-Control-Allow-Origin', origin);
          ctx.set('Access-Control-Expose-Headers', 'Content-Disposition, Retry-After');
        }
        return false;
      }
    : null;

  // The JSON body is read and parsed by co-body (size limit, strict JSON, charset and content-encoding), called
  // directly: the pipeline reads a body only for routes that take one, after authentication. Loaded on first use.
  let readJson: Promise<typeof import('co-body').json> | null = null;
  const parseBody = async (ctx: Koa.Context): Promise<unknown> => {
    readJson ??= import('co-body').then(cjsExports).then((m) => m.json);
    return (await readJson)(ctx.req, { limit: config.api.body_limit, strict: true });
  };

  /**
   * One request on one route: authenticate → body → pipeline → answer, then the audit record of a mutation. Each
   * step goes on synchronously when it can; only a step that really waits (a token's first use, a request body, an
   * async handler) makes the call asynchronous.
   */
  class RouteCall {
    private principal: Principal | null = null;
    private status = 500;
    private deployment: string | null = null;
    private created: string | null = null;
    private wantsPlan = false;
    private body: unknown = undefined;
    private readonly ip: string;
    private readonly headers: IncomingHttpHeaders;

    constructor(
      private readonly ctx: Koa.Context,
      private readonly route: RegisteredRoute,
    ) {
      // ctx.request / ctx.req / ctx.response rather than koa's ctx delegates (megamorphic accessors).
      this.ip = ctx.request.ip;
      this.headers = ctx.req.headers;
    }

    run(): void | Promise<void> {
      let pending: void | Promise<void>;
      try {
        pending = this.authenticate();
      } catch (err) {
        return this.failed(err);
      }
      if (!pending) return this.record();
      return pending.then(
        () => this.record(),
        (err: unknown) => this.failed(err),
      );
    }

    private authenticate(): void | Promise<void> {
      if (this.route.permission !== null) {
        const found = authenticateHeader(this.headers.authorization, this.ip, principals);
        if (found instanceof Promise) {
          return found.then((principal) => {
            this.principal = principal;
            return this.readBody();
          });
        }
        this.principal = found;
      }
      return this.readBody();
    }

    private readBody(): void | Promise<void> {
      const { route, headers } = this;
      if (!route.validate.body || route.spec.rawBody) return this.execute();
      const length = Number(headers['content-length'] || 0);
      if ((length > 0 || headers['transfer-encoding']) && !this.ctx.request.is('json')) {
        throw errors.badRequest('the body must be JSON (Content-Type: application/json)', 'UNSUPPORTED_MEDIA_TYPE');
      }
      if (length > config.api.body_limit) throw errors.tooLarge(`request body larger than ${config.api.body_limit} bytes`);
      return parseBody(this.ctx).then((body) => {
        this.body = body;
        return this.execute();
      });
    }

    private execute(): void | Promise<void> {
      const { ctx } = this;
      const request = ctx.request;
      // Without a query string (the usual case) a fresh empty object, not koa's parse; the query is only copied
      // when `plan` has to be taken out.
      let query = (ctx.req.url!.includes('?') ? request.query : {}) as Record<string, unknown>;
      if ('plan' in query) {
        query = { ...query };
        if (query.plan !== 'true' && query.plan !== 'false') throw errors.badRequest('query.plan: must be true or false');
        this.wantsPlan = query.plan === 'true';
        delete query.plan;
      }
      // Most handlers never look at the signal: it is created (and the close listener added) on first use.
      let controller: AbortController | null = null;
      const signal = () => {
        if (!controller) {
          const c = (controller = new AbortController());
          ctx.res.once('close', () => {
            if (!ctx.res.writableFinished) c.abort();
          });
        }
        return controller.signal;
      };
      const result = execute(
        {
          // A copy: validation coerces params in place (`'2'` → `2`), the audit record keeps the raw path values.
          route: this.route,
          principal: this.principal,
          params: { ...ctx.params },
          query,
          body: this.body,
          ip: this.ip,
          path: request.path,
          headers: this.headers,
          signal,
          raw: { req: ctx.req, res: ctx.res },
          wantsPlan: this.wantsPlan,
        },
        plans,
        validateResponse,
      );
      if (result instanceof Promise) return result.then((r) => this.answer(r));
      this.answer(result);
    }

    private answer({ reply, deployment }: ExecuteResult): void {
      const { res } = this.ctx;
      const response = this.ctx.response;
      this.deployment = deployment;
      // A plan's answer is the plan, not the resource.
      if (!this.wantsPlan) this.created = createdName(this.route.spec.creates, reply.body?.data);
      this.status = reply.status;
      for (const k in reply.headers) response.set(k, reply.headers[k]!);
      response.status = reply.status;
      if (reply.stream !== undefined) response.body = reply.stream;
      else if (reply.body) {
        // Serialized here, with the type set directly: given an object, koa looks the JSON type up again and takes
        // its generic path on every answer.
        if (!res.hasHeader('content-type')) res.setHeader('Content-Type', 'application/json; charset=utf-8');
        response.body = JSON.stringify(reply.body);
      } else response.body = null;
    }

    /** Answers the error once the failure's audit record is durable (a failed mutation is recorded too). */
    private failed(err: unknown): never | Promise<never> {
      this.status = toErrorAnswer(err).status;
      const recorded = this.record();
      if (!recorded) throw err;
      const rethrow = (): never => {
        throw err;
      };
      return recorded.then(rethrow, rethrow);
    }

    /**
     * The audit record of a mutating request, whatever its outcome; the answer waits until it is durable. Reads
     * are not recorded and stay synchronous.
     */
    private record(): void | Promise<void> {
      const { principal, route, status, wantsPlan } = this;
      if (!principal || !MUTATING.has(route.method) || route.spec.audit === false) return;
      const created = this.created ?? createdName(route.spec.creates, this.body);
      return audit
        .record(
          routeAuditEvent({
            route,
            principal,
            params: (this.ctx.params ?? {}) as Record<string, string>,
            status,
            deployment: this.deployment,
            created,
            ip: this.ip,
            action: wantsPlan ? `${route.operationId}.plan` : undefined,
            detail: wantsPlan ? { plan: true } : null,
          }),
        )
        .catch(() => {
          if (status < 400) throw auditFailed();
        });
    }
  }

  // Routes are grouped by their first path segment, so a request only tests the few routes of its group. Paths are
  // compiled by @koa/router (its path syntax and decoding); the matched handler is called directly rather than
  // through the router's middleware, which composes a fresh chain on every request.
  interface Entry {
    layer: Router.Layer;
    methods: Set<string>;
    handler: (ctx: Koa.Context) => void | Promise<void>;
  }
  const compiler = new Router({ prefix: '/api' });
  const groups = new Map<string, Entry[]>();
  const add = (path: string, method: string, handler: Entry['handler']) => {
    const first = path.split('/')[1] ?? '';
    const key = first.startsWith(':') ? '*' : first;
    const layer = compiler.register(path, [method], handler as never) as unknown as Router.Layer;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push({ layer, methods: new Set(layer.methods), handler });
  };
  for (const route of registry.routes) {
    add(route.path, route.method, (ctx) => new RouteCall(ctx, route).run());
  }
  const fallback = groups.get('*') ?? [];
  /** Finds the route of a request and runs it; undefined when nothing matched (the 404 follows). */
  const dispatch = (ctx: Koa.Context): void | Promise<void> => {
    const path = ctx.request.path;
    if (!path.startsWith('/api/')) return;
    if (path.startsWith('/api/plugin/')) return deps.proxy(ctx);
    const end = path.indexOf('/', 5);
    const list = groups.get(path.slice(5, end < 0 ? undefined : end)) ?? fallback;
    const method = ctx.req.method!;
    let allowed: string[] | null = null;
    for (const entry of list) {
      const match = entry.layer.regexp.exec(path);
      if (!match) continue;
      if (entry.methods.has(method)) {
        // The captures of the one match (Layer#captures would run the expression again).
        ctx.params = entry.layer.params(path, match.slice(1), {});
        return entry.handler(ctx);
      }
      (allowed ??= []).push(...entry.methods);
    }
    if (!allowed) return;
    ctx.set('Allow', [...new Set(allowed)].join(', '));
    if (method === 'OPTIONS') {
      ctx.status = 204;
      return;
    }
    throw new HttpError(405, 'METHOD_NOT_ALLOWED', `method ${method} is not allowed on ${path}`);
  };

  // The only koa middleware: CORS, the route, the error envelope. A route that answers synchronously (most do)
  // costs no promise here; koa wraps the result once.
  app.use((ctx) => {
    let pending: void | Promise<void>;
    try {
      if (cors?.(ctx)) return;
      pending = dispatch(ctx);
    } catch (err) {
      answerError(ctx, err);
      return;
    }
    if (pending)
      return pending.then(
        () => answerUnhandled(ctx),
        (err: unknown) => answerError(ctx, err),
      );
    answerUnhandled(ctx);
  });
  return app;
}
