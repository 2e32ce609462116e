/**
 * The request listener: error envelope, CORS, the routes of the registry (auth → body → pipeline → audit per
 * route), the plugin proxy, and JSON 404/405 answers.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import typeis from 'type-is';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { cjsExports, errors, HttpError, type AuditEventInput, type Principal, type PrincipalDirectory, type Reply } from '@agent/sdk';
import type { CoreConfig } from '../config/config.js';
import type { RootLogger } from '../log.js';
import type { RouteRegistry, RegisteredRoute } from '../openapi/registry.js';
import type { PlanEngine } from '../plans/engine.js';
import type { AuditWriter } from '../audit.js';
import { execute, type ExecuteResult } from './execute.js';
import { toErrorAnswer } from './errors.js';
import { RouteTable } from './router.js';
import { bindStream, sendError, sendReply, unsetHeaders, writable } from './respond.js';
import { clientIp, pathOf, queryOf } from './target.js';

export interface HttpDeps {
  config: CoreConfig;
  log: RootLogger;
  principals: PrincipalDirectory;
  registry: RouteRegistry;
  plans: PlanEngine;
  audit: AuditWriter;
  /**
   * Serves `/api/plugin/<name>/…`, given the client's address and the parsed query; resolves when the proxied answer
   * is complete.
   */
  proxy: (req: IncomingMessage, res: ServerResponse, ip: string, query: Record<string, unknown>) => Promise<void>;
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

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

export function createHttpApp(deps: HttpDeps): RequestListener {
  const { config, log, principals, registry, plans, audit } = deps;
  const trustProxy = config.api.trust_proxy;
  const validateResponse = deps.validateResponses ? makeResponseValidator(log) : undefined;
  const allowedOrigins = new Set(config.api.allowed_origins);

  /** The `{error, code}` answer; once the answer has begun, the connection is cut so the client sees it broke off. */
  const answerError = (req: IncomingMessage, res: ServerResponse, path: string, err: unknown): void => {
    const answer = toErrorAnswer(err);
    if (answer.internal) log.error({ err, method: req.method, path }, 'request failed');
    if (!writable(res)) return;
    if (res.headersSent) res.destroy();
    else sendError(res, answer);
  };

  /** CORS headers; true when it answered the request itself (a preflight). Throws 403 for a denied preflight. */
  const cors = config.api.enable_cors
    ? (req: IncomingMessage, res: ServerResponse): boolean => {
        const { origin } = req.headers;
        if (!origin) return false;
        const allowed = allowedOrigins.has(origin);
        // Set, not appended: nothing has touched this answer's headers yet.
        res.setHeader('Vary', 'Origin');
        if (req.method === 'OPTIONS' && req.headers['access-control-request-method']) {
          if (!allowed) throw errors.forbidden(`origin ${origin} is not allowed`, 'CORS_ORIGIN_DENIED');
          res.setHeader('Access-Control-Allow-Origin', origin);
          res.setHeader('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE');
          res.setHeader('Access-Control-Allow-Headers', req.headers['access-control-request-headers'] || 'Authorization, Content-Type');
          res.setHeader('Access-Control-Max-Age', '600');
          res.statusCode = 204;
          res.end();
          return true;
        }
        if (allowed) {
          res.setHeader('Access-Control-Allow-Origin', origin);
          res.setHeader('Access-Control-Expose-Headers', 'Content-Disposition, Retry-After');
        }
        return false;
      }
    : null;

  // The JSON body is read and parsed by co-body (size limit, strict JSON, charset and content-encoding), called
  // directly: the pipeline reads a body only for routes that take one, after authentication. Loaded on first use.
  let readJson: Promise<typeof import('co-body').json> | null = null;
  const parseBody = async (req: IncomingMessage): Promise<unknown> => {
    readJson ??= import('co-body').then(cjsExports).then((m) => m.json);
    return (await readJson)(req, { limit: config.api.body_limit, strict: true });
  };

  /**
   * One request on one route: authenticate → body → pipeline → audit record → answer. Each step goes on
   * synchronously when it can; only a step that really waits (a token's first use, a request body, an async
   * handler, the audit record of a mutation) makes the call asynchronous.
   */
  class RouteCall {
    private principal: Principal | null = null;
    private status = 500;
    private deployment: string | null = null;
    private created: string | null = null;
    private wantsPlan = false;
    private body: unknown = undefined;
    private reply: Reply | null = null;
    /** The reply's body serialized (once the handler answered with data rather than a stream). */
    private json: string | null = null;
    private readonly ip: string;
    private readonly headers: IncomingHttpHeaders;

    constructor(
      private readonly req: IncomingMessage,
      private readonly res: ServerResponse,
      private readonly route: RegisteredRoute,
      /** As decoded from the path; the pipeline gets a copy. */
      private readonly params: Record<string, string>,
      private readonly path: string,
    ) {
      this.ip = clientIp(req, trustProxy);
      this.headers = req.headers;
    }

    run(): void | Promise<void> {
      let pending: void | Promise<void>;
      try {
        pending = this.authenticate();
      } catch (err) {
        return this.failed(err);
      }
      if (!pending) return this.finish();
      return pending.then(
        () => this.finish(),
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
      if ((length > 0 || headers['transfer-encoding']) && !typeis(this.req, ['json'])) {
        throw errors.badRequest('the body must be JSON (Content-Type: application/json)', 'UNSUPPORTED_MEDIA_TYPE');
      }
      if (length > config.api.body_limit) throw errors.tooLarge(`request body larger than ${config.api.body_limit} bytes`);
      return parseBody(this.req).then((body) => {
        this.body = body;
        return this.execute();
      });
    }

    private execute(): void | Promise<void> {
      const { req, res } = this;
      const url = req.url!;
      // Without a query string (the usual case) a fresh empty object; the query is only copied when `plan` has to
      // be taken out.
      let query = (url.includes('?') ? parseQuery(queryOf(url)) : {}) as Record<string, unknown>;
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
          res.once('close', () => {
            if (!res.writableFinished) c.abort();
          });
        }
        return controller.signal;
      };
      const result = execute(
        {
          // A copy: validation coerces params in place (`'2'` → `2`), the audit record keeps the raw path values.
          route: this.route,
          principal: this.principal,
          params: { ...this.params },
          query,
          body: this.body,
          ip: this.ip,
          path: this.path,
          headers: this.headers,
          signal,
          raw: { req, res },
          wantsPlan: this.wantsPlan,
        },
        plans,
        validateResponse,
      );
      if (result instanceof Promise) return result.then((r) => this.answer(r));
      this.answer(result);
    }

    /** Takes the handler's reply; it is sent once the audit record (if any) is durable. */
    private answer({ reply, deployment }: ExecuteResult): void {
      this.deployment = deployment;
      // A plan's answer is the plan, not the resource.
      if (!this.wantsPlan) this.created = createdName(this.route.spec.creates, reply.body?.data);
      this.status = reply.status;
      this.reply = reply;
      if (reply.stream !== undefined) bindStream(reply.stream, this.res, (err) => this.streamFailed(err));
      else if (reply.body) this.json = JSON.stringify(reply.body);
    }

    private finish(): void | Promise<void> {
      const recorded = this.record();
      if (!recorded) return this.send();
      return recorded.then(() => this.send());
    }

    private send(): void {
      sendReply(this.res, this.reply!, this.json, this.req.method === 'HEAD');
    }

    /** A streamed body failed: answered as an error when nothing was sent yet, else the answer is cut off. */
    private streamFailed(err: Error): void {
      if (!this.res.headersSent) unsetHeaders(this.res, this.reply!.headers);
      answerError(this.req, this.res, this.path, err);
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
            params: this.params,
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

  const routes = new RouteTable<RegisteredRoute>('/api');
  for (const route of registry.routes) routes.add(route.path, route.method, route);

  /** Finds the route of a request and runs it; throws 404 when nothing matched, 405 for a path without the method. */
  const dispatch = (req: IncomingMessage, res: ServerResponse, url: string, path: string): void | Promise<void> => {
    const method = req.method!;
    if (!path.startsWith('/api/')) throw errors.notFound(`no route ${method} ${path}`);
    if (path.startsWith('/api/plugin/')) {
      // Until the app answers: a mutation the client gave up on before that is audited with this status.
      res.statusCode = 404;
      return deps.proxy(req, res, clientIp(req, trustProxy), parseQuery(queryOf(url)));
    }
    const found = routes.find(method, path);
    if (found === null) throw errors.notFound(`no route ${method} ${path}`);
    if (!Array.isArray(found)) return new RouteCall(req, res, found.value, found.params, path).run();
    res.setHeader('Allow', found.join(', '));
    if (method === 'OPTIONS') {
      res.statusCode = 204;
      res.end();
      return;
    }
    throw new HttpError(405, 'METHOD_NOT_ALLOWED', `method ${method} is not allowed on ${path}`);
  };

  // CORS, the route, the error envelope. A route that answers synchronously (most do) costs no promise here.
  return (req, res) => {
    const url = req.url!;
    const path = pathOf(url);
    let pending: void | Promise<void>;
    try {
      if (cors?.(req, res)) return;
      pending = dispatch(req, res, url, path);
    } catch (err) {
      answerError(req, res, path, err);
      return;
    }
    if (pending) pending.then(undefined, (err: unknown) => answerError(req, res, path, err));
  };
}
