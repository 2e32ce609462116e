/**
 * The request listener: error envelope, CORS, the routes of the registry (auth → body → pipeline → audit per
 * route), the plugin proxy, and JSON 404/405 answers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import typeis from 'type-is';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { cjsExports, errors, HttpError, type Principal, type PrincipalDirectory } from '@agent/sdk';
import type { CoreConfig } from '../config/config.js';
import type { RootLogger } from '../log.js';
import type { RouteRegistry, RegisteredRoute } from '../openapi/registry.js';
import type { PlanEngine } from '../plans/engine.js';
import { createdName, routeAuditEvent, type AuditWriter } from '../audit.js';
import { authenticateHeader, bearerToken, readmit } from '../auth/checks.js';
import type { LiveConnections } from '../auth/live.js';
import { execute, type ExecuteResult } from './execute.js';
import { RouteTable } from './router.js';
import { bindStream, sendError, sendReply, toErrorAnswer, writable } from './respond.js';

export interface HttpDeps {
  config: CoreConfig;
  log: RootLogger;
  principals: PrincipalDirectory;
  registry: RouteRegistry;
  plans: PlanEngine;
  audit: AuditWriter;
  /** Streamed answers are tracked there while they stream: one whose rights are taken away is cut off. */
  live: LiveConnections;
  /**
   * Serves `/api/plugin/<name>/…`, given the client's address and the parsed query; resolves when the proxied answer
   * is complete.
   */
  proxy: (req: IncomingMessage, res: ServerResponse, ip: string, query: Record<string, unknown>) => Promise<void>;
  /** Development aid (tests): check `data` of successful answers against the route's response schema. */
  validateResponses: boolean;
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** `http://host:port` of a request target in absolute form (sent to proxies), which the path does not include. */
const AUTHORITY = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/** The path of a request target (still percent-encoded) and its query string without the `?`; no fragment. */
function splitTarget(url: string): [path: string, query: string] {
  let target = url;
  // Absolute form: the path is what follows the authority.
  const authority = url.charCodeAt(0) === 0x2f ? null : AUTHORITY.exec(url);
  if (authority) {
    target = url.slice(authority[0].length);
    if (target.charCodeAt(0) !== 0x2f) target = `/${target}`;
  }
  const hash = target.indexOf('#');
  if (hash >= 0) target = target.slice(0, hash);
  const q = target.indexOf('?');
  return q < 0 ? [target, ''] : [target.slice(0, q), target.slice(q + 1)];
}

/**
 * The client's address: behind a trusted proxy the first `X-Forwarded-For` entry (the client as the outermost
 * proxy saw it), else the peer of the connection; empty when neither is known.
 */
export function clientIp(req: IncomingMessage, trustProxy: boolean): string {
  // Node joins repeated X-Forwarded-For headers into one value.
  const forwarded = trustProxy ? (req.headers['x-forwarded-for'] as string | undefined) : undefined;
  if (forwarded) {
    const comma = forwarded.indexOf(',');
    const first = (comma < 0 ? forwarded : forwarded.slice(0, comma)).trim();
    if (first) return first;
  }
  return req.socket.remoteAddress ?? '';
}

/** Goes on with `next` at once when `value` is at hand, else once it resolves: the hot path awaits nothing. */
const then = <T, R>(value: T | Promise<T>, next: (value: T) => R | Promise<R>): R | Promise<R> => (value instanceof Promise ? value.then(next) : next(value));

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

export function createHttpApp(deps: HttpDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { config, log, principals, registry, plans, audit, live } = deps;
  const { trust_proxy: trustProxy, body_limit: bodyLimit } = config.api;
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
  // directly, and only for routes that take one. Loaded on first use.
  let readJson: Promise<typeof import('co-body').json> | null = null;
  const readBody = (req: IncomingMessage, route: RegisteredRoute): unknown => {
    if (!route.validate.body || route.spec.rawBody) return undefined;
    const length = Number(req.headers['content-length'] || 0);
    if ((length > 0 || req.headers['transfer-encoding']) && !typeis(req, ['json'])) {
      throw errors.badRequest('the body must be JSON (Content-Type: application/json)', 'UNSUPPORTED_MEDIA_TYPE');
    }
    if (length > bodyLimit) throw errors.tooLarge(`request body larger than ${bodyLimit} bytes`);
    readJson ??= import('co-body').then(cjsExports).then((m) => m.json);
    return readJson.then((json) => json(req, { limit: bodyLimit, strict: true }));
  };

  /**
   * One request on one route: authenticate → body → pipeline → audit record → answer. Each step goes on
   * synchronously when it can; only a step that really waits (a token's first use, a request body, an async
   * handler, the audit record of a mutation) makes the call asynchronous. `params` are as decoded from the path.
   */
  const callRoute = (req: IncomingMessage, res: ServerResponse, route: RegisteredRoute, params: Record<string, string>, path: string, query: string) => {
    const ip = clientIp(req, trustProxy);
    let principal: Principal | null = null;
    let body: unknown = undefined;
    let wantsPlan = false;
    let result: ExecuteResult | null = null;
    /** The reply's body serialized (once the handler answered with data rather than a stream). */
    let json: string | null = null;

    const run = (): void | Promise<void> => {
      // Without a query string (the usual case) a fresh empty object; `plan` is taken out of a copy.
      let parsed = (query ? parseQuery(query) : {}) as Record<string, unknown>;
      if ('plan' in parsed) {
        parsed = { ...parsed };
        if (parsed.plan !== 'true' && parsed.plan !== 'false') throw errors.badRequest('query.plan: must be true or false');
        wantsPlan = parsed.plan === 'true';
        delete parsed.plan;
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
      // A copy of the params: validation coerces them in place (`'2'` → `2`), the audit record keeps the raw path values.
      const inv = { route, principal, params: { ...params }, query: parsed, body, ip, path, headers: req.headers, signal, raw: { req, res }, wantsPlan };
      return then(execute(inv, plans, validateResponse), (done) => {
        result = done;
        const { reply } = done;
        // The reply is sent once the audit record (if any) is durable; a stream that fails before its first byte
        // is answered as an error without the headers set for it, a later failure cuts the answer off.
        const streamFailed = (err: Error) => {
          if (!res.headersSent) for (const k in reply.headers) res.removeHeader(k);
          answerError(req, res, path, err);
        };
        if (reply.stream !== undefined) {
          bindStream(reply.stream, res, streamFailed);
          // A streamed answer (an export, a download) may last long after its checks: until it ends, losing the
          // rights it needs ends it (see LiveConnections).
          if (principal && typeof (reply.stream as { pipe?: unknown }).pipe === 'function' && !res.destroyed) {
            const untrack = live.track(principal, {
              bearer: bearerToken(req.headers.authorization),
              ip,
              admit: (now) => readmit(route, now, inv.params, inv.query, done.deployment),
              end: (why) => answerError(req, res, path, why),
            });
            res.once('close', untrack);
          }
        } else if (reply.body) json = JSON.stringify(reply.body);
      });
    };

    /**
     * The audit record of a mutating request, whatever its outcome; the answer waits until it is durable. Reads
     * are not recorded and stay synchronous.
     */
    const record = (status: number): void | Promise<void> => {
      if (!principal || !MUTATING.has(route.method) || route.spec.audit === false) return;
      return audit.settle(
        routeAuditEvent({
          route,
          principal,
          params,
          status,
          deployment: result?.deployment ?? null,
          // A plan's answer is the plan, not the resource.
          created: createdName(route.spec.creates, wantsPlan ? undefined : result?.reply.body?.data, body),
          ip,
          action: wantsPlan ? `${route.operationId}.plan` : undefined,
          detail: wantsPlan ? { plan: true } : null,
        }),
      );
    };

    const finish = (): void | Promise<void> => {
      const reply = result!.reply;
      return then(record(reply.status), () => sendReply(res, reply, json, req.method === 'HEAD'));
    };

    /** Answers the error once the failure's audit record is durable (a failed mutation is recorded too). */
    const failed = (err: unknown): never | Promise<never> => {
      const rethrow = (): never => {
        throw err;
      };
      const recorded = record(toErrorAnswer(err).status);
      return recorded ? recorded.then(rethrow, rethrow) : rethrow();
    };

    let pending: void | Promise<void>;
    try {
      const authenticated = route.permission === null ? null : authenticateHeader(req.headers.authorization, ip, principals);
      pending = then(authenticated, (found) => {
        principal = found;
        return then(readBody(req, route), (read) => {
          body = read;
          return run();
        });
      });
    } catch (err) {
      return failed(err);
    }
    return pending ? pending.then(finish, failed) : finish();
  };

  const routes = new RouteTable<RegisteredRoute>('/api');
  for (const route of registry.routes) routes.add(route.path, route.method, route);

  /** Finds the route of a request and runs it; throws 404 when nothing matched, 405 for a path without the method. */
  const dispatch = (req: IncomingMessage, res: ServerResponse, path: string, query: string): void | Promise<void> => {
    const method = req.method!;
    if (!path.startsWith('/api/')) throw errors.notFound(`no route ${method} ${path}`);
    if (path.startsWith('/api/plugin/')) {
      // Until the app answers: a mutation the client gave up on before that is audited with this status.
      res.statusCode = 404;
      return deps.proxy(req, res, clientIp(req, trustProxy), parseQuery(query));
    }
    const found = routes.find(method, path);
    if (found === null) throw errors.notFound(`no route ${method} ${path}`);
    if (!Array.isArray(found)) return callRoute(req, res, found.value, found.params, path, query);
    res.setHeader('Allow', found.join(', '));
    if (method !== 'OPTIONS') throw new HttpError(405, 'METHOD_NOT_ALLOWED', `method ${method} is not allowed on ${path}`);
    res.statusCode = 204;
    res.end();
  };

  // CORS, the route, the error envelope. A route that answers synchronously (most do) costs no promise here.
  return (req, res) => {
    const [path, query] = splitTarget(req.url!);
    let pending: void | Promise<void>;
    try {
      if (cors?.(req, res)) return;
      pending = dispatch(req, res, path, query);
    } catch (err) {
      answerError(req, res, path, err);
      return;
    }
    if (pending) pending.then(undefined, (err: unknown) => answerError(req, res, path, err));
  };
}
