/**
 * The HTTP application: koa, with the kernel's pipeline as koa middleware. In order: the `{error, code}` envelope
 * (koa's `onerror`, below), CORS, then by path: the plugin proxy for `/api/plugin/<name>/…`, one @koa/router router
 * per plugin for `/api` (only those with a route under the path's first segment), a plugin's static site for the
 * other paths (`ctx.site`, ./site.ts); each route one middleware (authenticate → body (koa-body) → the plugin's own
 * middleware → pipeline → audit → answer), and last the JSON 404/405 answers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { parse as parseQuery } from 'node:querystring';
import Koa, { type Context, type Middleware, type Next } from 'koa';
import Router from '@koa/router';
import { HttpMethodEnum, koaBody } from 'koa-body';
import typeis from 'type-is';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { errors, HttpError, type Principal, type PrincipalDirectory } from '@agent/sdk';
import type { CoreConfig } from '../config/config.js';
import type { RootLogger } from '../log.js';
import type { RouteRegistry, RegisteredRoute } from '../openapi/registry.js';
import type { PlanEngine } from '../plans/engine.js';
import { createdName, routeAuditEvent, type AuditWriter } from '../audit.js';
import { authenticateHeader, bearerToken, checkPermission, readmit } from '../auth/checks.js';
import type { LiveConnections } from '../auth/live.js';
import { execute, type ExecuteResult } from './execute.js';
import { multipartBody, uploadsFolder, type MultipartState } from './multipart.js';
import { sendError, toErrorAnswer } from './respond.js';
import { siteMiddleware } from './site.js';

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
const JSON_TYPE = 'application/json; charset=utf-8';
/** Statuses whose answers never carry a body. */
const EMPTY = new Set([204, 205, 304]);

/**
 * The client's address: behind a trusted proxy the first `X-Forwarded-For` entry (the client as the outermost
 * proxy saw it), else the peer of the connection; empty when neither is known. Koa's `ctx.ip` is the same rule
 * (`proxy` set from `api.trust_proxy`); websocket upgrades, which koa never sees, use this.
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

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

function makeResponseValidator(log: RootLogger) {
  // The formats the schemas use (date-time, uuid, …) are checked too, not reported as unknown on stderr.
  const ajv = addFormats(new Ajv2020({ strict: false, allErrors: false }));
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

/** What the route stack keeps for one request between its middleware (koa's `ctx.state`). */
interface RouteState extends MultipartState {
  principal: Principal | null;
  body: unknown;
  result: ExecuteResult | null;
  wantsPlan: boolean;
  /** Headers the reply set: taken back when it fails before its first byte (CORS and `Allow` stay). */
  replyHeaders: string[];
  /** The audit record was written (once per request, whatever failed where). */
  recorded: boolean;
}

const stateOf = (ctx: Context): RouteState => ctx.state as RouteState;

const isReadable = (body: unknown): body is Readable => typeof (body as Readable | null)?.pipe === 'function';

/** Resolves once a stream has its first bytes (or ended empty); rejects when it fails before. Reads nothing. */
function firstBytes(stream: Readable): Promise<void> {
  if (stream.readableLength > 0 || stream.readableEnded) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      stream.off('readable', ready).off('end', ready).off('error', done).off('close', ready);
      if (err) reject(err);
      else resolve();
    };
    const ready = () => done();
    stream.once('readable', ready).once('end', ready).once('error', done).once('close', ready);
  });
}

/** A path param as the client meant it: `+` read as a space; a value that does not decode is kept as sent. */
function decodeParam(text: string): string {
  if (!text.includes('%') && !text.includes('+')) return text;
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/**
 * The path params of the matched route, decoded the way the kernel always has (from the router's raw captures:
 * its own decoding keeps `+` and cannot tell it from `%2B`).
 */
function paramsOf(ctx: Context): Record<string, string> {
  const names = Object.keys((ctx.params ?? {}) as Record<string, string>);
  const captures = (ctx as { captures?: string[] }).captures ?? [];
  const out: Record<string, string> = {};
  names.forEach((name, i) => {
    const raw = captures[i];
    if (raw !== undefined && raw !== '') out[name] = decodeParam(raw);
  });
  return out;
}

/**
 * The first segment of an `/api/…` path, lower-cased (routes match regardless of case); `''` for `/api` itself; null
 * for a path whose first segment is a route parameter (or a pattern) and for paths outside `/api`.
 */
function firstSegment(path: string): string | null {
  if (path !== '/api' && !path.startsWith('/api/')) return null;
  const end = path.indexOf('/', 5);
  const segment = path.slice(5, end < 0 ? undefined : end).toLowerCase();
  return /[:*(]/.test(segment) ? null : segment;
}

/** Middleware run one after the other, each one's `next` the following one's call (koa's own composition). */
function chain(list: Middleware[]): Middleware {
  return list.reduceRight<Middleware>(
    (after, mw) => (ctx, next) => mw(ctx, () => after(ctx, next)),
    (_ctx, next) => next(),
  );
}

export function createHttpApp(deps: HttpDeps): Koa {
  const { config, log, principals, registry, plans, audit, live } = deps;
  const { trust_proxy: trustProxy, body_limit: bodyLimit } = config.api;
  const validateResponse = deps.validateResponses ? makeResponseValidator(log) : undefined;
  const allowedOrigins = new Set(config.api.allowed_origins);

  const app = new Koa({ proxy: trustProxy, proxyIpHeader: 'X-Forwarded-For' });

  /**
   * Every failure, thrown by a middleware or by a streamed body, becomes `{error, code}` with the right status;
   * once the answer has begun, the connection is cut so the client sees it broke off. Replaces koa's text answer.
   */
  app.context.onerror = function onerror(this: Context, err: unknown): void {
    if (err === null || err === undefined) return;
    const answer = toErrorAnswer(err);
    if (answer.internal) log.error({ err, method: this.method, path: this.path }, 'request failed');
    const res = this.res;
    if (res.writableEnded || res.destroyed) return;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    for (const name of (this.state as Partial<RouteState>).replyHeaders ?? []) res.removeHeader(name);
    sendError(res, answer);
  };

  if (config.api.enable_cors) {
    app.use(async (ctx, next) => {
      const origin = ctx.get('Origin');
      if (!origin) return next();
      const allowed = allowedOrigins.has(origin);
      ctx.set('Vary', 'Origin');
      if (ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method')) {
        if (!allowed) throw errors.forbidden(`origin ${origin} is not allowed`, 'CORS_ORIGIN_DENIED');
        ctx.set('Access-Control-Allow-Origin', origin);
        ctx.set('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE');
        ctx.set('Access-Control-Allow-Headers', ctx.get('Access-Control-Request-Headers') || 'Authorization, Content-Type');
        ctx.set('Access-Control-Max-Age', '600');
        ctx.status = 204;
        return;
      }
      if (allowed) {
        ctx.set('Access-Control-Allow-Origin', origin);
        ctx.set('Access-Control-Expose-Headers', 'Content-Disposition, Retry-After');
      }
      return next();
    });
  }

  // The plugin proxy answers on node's response itself (koa stands aside).
  const proxied = async (ctx: Context): Promise<void> => {
    ctx.respond = false;
    // Until the app answers: a mutation the client gave up on before that is audited with this status.
    ctx.res.statusCode = 404;
    await deps.proxy(ctx.req, ctx.res, ctx.ip, parseQuery(ctx.querystring));
  };

  // A plugin's static site (`ctx.site`: the web console) answers GET/HEAD outside /api, with its security headers.
  const site = registry.site ? siteMiddleware(registry.site.spec) : null;

  // JSON bodies (koa-body over co-body: size limit, strict JSON, charset and content-encoding), read only for
  // routes that take one; anything but JSON is 415 rather than an empty body.
  const json = koaBody({
    json: true,
    text: false,
    urlencoded: false,
    multipart: false,
    jsonLimit: bodyLimit,
    jsonStrict: true,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
    onError: (err) => {
      throw err;
    },
  });
  const readBody =
    (route: RegisteredRoute): Middleware =>
    async (ctx, next) => {
      // The permission first: a principal without it has no body read for it (the pipeline checks the rest later).
      checkPermission(route.permission, stateOf(ctx).principal);
      const length = Number(ctx.get('Content-Length') || 0);
      if ((length > 0 || ctx.get('Transfer-Encoding')) && !typeis(ctx.req, ['json'])) {
        throw errors.badRequest('the body must be JSON (Content-Type: application/json)', 'UNSUPPORTED_MEDIA_TYPE');
      }
      if (length > bodyLimit) throw errors.tooLarge(`request body larger than ${bodyLimit} bytes`);
      await json(ctx, async () => {
        stateOf(ctx).body = (ctx.request as { body?: unknown }).body;
      });
      return next();
    };

  /**
   * The audit record of a mutating request, whatever its outcome; the answer waits until it is durable. Reads are
   * not recorded.
   */
  const record = (ctx: Context, route: RegisteredRoute, status: number): void | Promise<void> => {
    const state = stateOf(ctx);
    if (state.recorded || !state.principal || !MUTATING.has(route.method) || route.spec.audit === false) return;
    state.recorded = true;
    const { result, wantsPlan } = state;
    return audit.settle(
      routeAuditEvent({
        route,
        principal: state.principal,
        params: paramsOf(ctx),
        status,
        deployment: result?.deployment ?? null,
        // A plan's answer is the plan, not the resource.
        created: createdName(route.spec.creates, wantsPlan ? undefined : result?.reply.body?.data, state.body),
        ip: ctx.ip,
        action: wantsPlan ? `${route.operationId}.plan` : undefined,
        detail: wantsPlan ? { plan: true } : null,
      }),
    );
  };

  /** The pipeline (`execute`, shared with plan apply), the audit record, then the answer koa writes. */
  const handle =
    (route: RegisteredRoute): Middleware =>
    async (ctx) => {
      const state = stateOf(ctx);
      let query = parseQuery(ctx.querystring) as Record<string, unknown>;
      if ('plan' in query) {
        query = { ...query };
        if (query.plan !== 'true' && query.plan !== 'false') throw errors.badRequest('query.plan: must be true or false');
        state.wantsPlan = query.plan === 'true';
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
      // Params of their own (validation coerces them in place, `'2'` → `2`): the audit record reads the raw values again.
      const inv = {
        route,
        principal: state.principal,
        params: paramsOf(ctx),
        query,
        body: state.body,
        ip: ctx.ip,
        path: ctx.path,
        headers: ctx.headers,
        signal,
        raw: { req: ctx.req, res: ctx.res },
        files: state.files,
        wantsPlan: state.wantsPlan,
      };
      // Most handlers answer synchronously and reads are not recorded: nothing is awaited for them.
      const executed = execute(inv, plans, validateResponse);
      const done = (state.result = executed instanceof Promise ? await executed : executed);
      const { reply } = done;
      const recorded = record(ctx, route, reply.status);
      if (recorded) await recorded;
      for (const [k, v] of Object.entries(reply.headers)) {
        ctx.set(k, v);
        state.replyHeaders.push(k);
      }
      if (reply.stream !== undefined) {
        const status = reply.status;
        // Koa pipes a stream with `pipeline`, which cuts the connection when the stream fails: one that fails
        // before its first byte (a missing file) is answered with the error envelope instead.
        if (isReadable(reply.stream) && ctx.method !== 'HEAD') await firstBytes(reply.stream);
        ctx.body = reply.stream;
        ctx.status = status;
        // A streamed answer (an export, a download) may last long after its checks: until it ends, losing the
        // rights it needs ends it (see LiveConnections).
        if (state.principal && typeof (reply.stream as { pipe?: unknown }).pipe === 'function' && !ctx.res.destroyed) {
          const untrack = live.track(state.principal, {
            bearer: bearerToken(ctx.get('Authorization') || undefined),
            ip: ctx.ip,
            admit: (now) => readmit(route, now, inv.params, inv.query, done.deployment),
            end: (why) => ctx.onerror(why),
          });
          ctx.res.once('close', untrack);
        }
      } else if (reply.body && !EMPTY.has(reply.status)) {
        ctx.status = reply.status;
        // A full media type: set as it is (koa's `type` would look it up first).
        if (!reply.headers['content-type']) ctx.set('Content-Type', JSON_TYPE);
        ctx.body = JSON.stringify(reply.body);
      } else {
        ctx.status = EMPTY.has(reply.status) ? reply.status : 204;
        ctx.body = null;
      }
    };

  /**
   * A route's stack as one middleware: the principal (401 without one, for every route that is not public), then
   * its body (JSON or multipart), the plugin's own middleware and the answer. A failed mutation is recorded too,
   * wherever it failed; the error is answered once its record is durable.
   */
  const routeMiddleware = (route: RegisteredRoute, body: Middleware | null, own: Middleware[]): Middleware => {
    const answer = handle(route);
    const rest = body || own.length ? chain([...(body ? [body] : []), ...own, answer]) : answer;
    return async (ctx, next) => {
      const state: RouteState = { principal: null, body: undefined, result: null, wantsPlan: false, replyHeaders: [], recorded: false };
      ctx.state = state;
      try {
        if (route.permission !== null) {
          // Synchronous for a token seen before: nothing awaited then.
          const found = authenticateHeader(ctx.get('Authorization') || undefined, ctx.ip, principals);
          state.principal = found instanceof Promise ? await found : found;
        }
        await rest(ctx, next);
      } catch (err) {
        await record(ctx, route, toErrorAnswer(err).status);
        throw err;
      }
    };
  };

  // Uploads (routes declaring `multipart`) go below the data folder, never to a /tmp shared with others.
  const uploads = config.data_dir ? uploadsFolder(config.data_dir) : '';

  // Each plugin's routes on @koa/router routers of its own, one per first segment of their paths: a router tests
  // every pattern it holds (and reads the host) on each request it sees, so a request meets only the routes that
  // share its first segment. A plugin's own middleware (`ctx.use`) runs for its routes only.
  const routers: Router[] = [];
  const groups = new Map<string, { plugin: string; segment: string | null; routes: RegisteredRoute[] }>();
  for (const route of registry.routes) {
    const segment = firstSegment(route.path === '/' ? '/api' : `/api${route.path}`);
    const key = `${route.plugin}\0${segment ?? '\0'}`;
    const group = groups.get(key) ?? { plugin: route.plugin, segment, routes: [] };
    group.routes.push(route);
    groups.set(key, group);
  }
  // Which routers may answer a path, by its first segment after `/api/` (routes whose first segment is a parameter
  // may answer any path).
  const bySegment = new Map<string, { routed: Middleware; shared: Middleware }[]>();
  const anySegment: Middleware[] = [];
  for (const { plugin, segment, routes } of groups.values()) {
    const router = new Router({ prefix: '/api', sensitive: false, strict: false });
    const own = registry.middleware.get(plugin) ?? [];
    for (const route of routes) {
      const path = route.path === '/' ? '' : route.path;
      const body = route.spec.multipart
        ? multipartBody(route, { uploads, fieldsLimit: bodyLimit, state: stateOf })
        : route.validate.body && !route.spec.rawBody
          ? readBody(route)
          : null;
      router.register(path, [route.method], [routeMiddleware(route, body, own)] as never, { name: route.operationId });
    }
    routers.push(router);
    const routed = router.routes() as Middleware;
    // Where several plugins have routes under one segment (`/api/deployments/…`), a router whose patterns cannot
    // match the path is passed over with one test of all its patterns at once.
    const any = new RegExp(router.stack.map((layer) => `(?:${layer.regexp.source})`).join('|'), 'i');
    const shared: Middleware = (ctx, next) => (any.test(ctx.path) ? routed(ctx, next) : next());
    if (segment === null) anySegment.push(shared);
    else bySegment.set(segment, [...(bySegment.get(segment) ?? []), { routed, shared }]);
  }
  const chains = new Map<string, Middleware>();
  for (const [segment, list] of bySegment) {
    // A segment served by one router alone (most are) goes to it directly: it passes on a path it cannot match.
    const sole = list.length === 1 && !anySegment.length;
    chains.set(segment, sole ? list[0]!.routed : chain([...list.map((r) => r.shared), ...anySegment]));
  }
  const otherwise = chain(anySegment);
  // The plugin proxy, the routers of the path's first segment, or the site: the one that may answer a path.
  app.use((ctx, next) => {
    const path = ctx.path;
    if (path.startsWith('/api/plugin/')) return proxied(ctx);
    if (path === '/api' || path.startsWith('/api/')) return (chains.get(firstSegment(path)!) ?? otherwise)(ctx, next);
    return site ? site(ctx, next) : next();
  });

  // Nothing answered: 405 with `Allow` when other methods exist at that path, else 404.
  app.use(async (ctx: Context, next: Next) => {
    await next();
    if (ctx.body !== undefined || ctx.status !== 404 || ctx.respond === false) return;
    if (!ctx.path.startsWith('/api/')) throw errors.notFound(`no route ${ctx.method} ${ctx.path}`);
    const allowed = new Set<string>();
    for (const router of routers) for (const layer of router.match(ctx.path, ctx.method).path) for (const m of layer.methods) allowed.add(m);
    if (!allowed.size) throw errors.notFound(`no route ${ctx.method} ${ctx.path}`);
    ctx.set('Allow', [...allowed].join(', '));
    if (ctx.method !== 'OPTIONS') throw new HttpError(405, 'METHOD_NOT_ALLOWED', `method ${ctx.method} is not allowed on ${ctx.path}`);
    ctx.status = 204;
  });
  return app;
}
