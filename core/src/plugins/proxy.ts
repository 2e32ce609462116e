/**
 * The plugin proxy: `/api/plugin/<name>/<path>` → the app plugin's own server. The core normalises the path,
 * forwards only routes the app declared, authenticates, checks the declared permission, then forwards with the
 * principal in a signed `x-agent-principal` header (the caller's token is not passed on). Websockets included.
 * Reads and websockets are ended, on both sides, when the caller's rights are taken away (`LiveConnections`) or
 * the caller leaves; a mutation runs to its audited answer.
 */
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import httpProxy from 'http-proxy';
import { errors, HttpError, type AppDirectory, type AuditEventInput, type Principal, type PrincipalDirectory } from '@agent/sdk';
import { PRINCIPAL_HEADER } from '@agent/sdk/app';
import { auditActor, type AuditWriter } from '../audit.js';
import type { RouteRegistry } from '../openapi/registry.js';
import { admit, authenticateBearer, bearerToken, lostRights, readmit } from '../auth/checks.js';
import type { LiveConnections } from '../auth/live.js';
import { refuseUpgrade, sendError, toErrorAnswer } from '../http/respond.js';
import type { RootLogger } from '../log.js';

const PREFIX = '/api/plugin/';

/** Rejects encoded separators/dots, dot segments, empty segments and backslashes in the raw path. */
function unsafePath(rawPath: string): boolean {
  if (/%2e|%2f|%5c|%00/i.test(rawPath) || rawPath.includes('\\')) return true;
  return rawPath
    .split('/')
    .slice(1)
    .some((seg, i, all) => seg === '.' || seg === '..' || (seg === '' && i < all.length - 1));
}

export function createPluginProxy(deps: {
  registry: RouteRegistry;
  principals: PrincipalDirectory;
  apps: AppDirectory;
  audit: AuditWriter;
  live: LiveConnections;
  log: RootLogger;
}) {
  const proxy = httpProxy.createProxyServer({ xfwd: false, ws: true, proxyTimeout: 120_000 });
  // Mutations: the app's answer is held until its audit record is durable (see `http`), then passed on.
  const holding = httpProxy.createProxyServer({ xfwd: false, proxyTimeout: 120_000, selfHandleResponse: true });
  const held = new WeakMap<IncomingMessage, (answer: IncomingMessage) => void>();
  holding.on('proxyRes', (answer, req) => held.get(req)?.(answer));
  // The app's side of each read and websocket (its request, then its socket once upgraded), ended with the client's
  // side: node does not abort the app's answer to a GET whose client left.
  const upstream = new WeakMap<IncomingMessage, { destroy(): void }>();
  proxy.on('proxyReq', (toApp, req) => upstream.set(req, toApp));
  proxy.on('proxyReqWs', (toApp, req) => {
    upstream.set(req, toApp);
    toApp.once('upgrade', (_answer, appSocket) => upstream.set(req, appSocket));
  });
  /** Requests ended on purpose (client gone, rights taken away): the app side's errors that follow are expected. */
  const ended = new WeakSet<IncomingMessage>();
  const endUpstream = (req: IncomingMessage) => {
    ended.add(req);
    upstream.get(req)?.destroy();
  };
  const onError = (err: Error, req: IncomingMessage, res: ServerResponse | Duplex) => {
    if (ended.has(req)) return;
    deps.log.warn({ error: String(err) }, 'plugin proxy error');
    if (res instanceof ServerResponse && !res.headersSent) {
      sendError(res, toErrorAnswer(new HttpError(502, 'PLUGIN_UNAVAILABLE', 'the app plugin did not answer')));
    } else res.destroy();
  };
  proxy.on('error', onError);
  holding.on('error', onError);

  const resolve = (method: string, url: string) => {
    const q = url.indexOf('?');
    const rawPath = q >= 0 ? url.slice(0, q) : url;
    const search = q >= 0 ? url.slice(q) : '';
    if (unsafePath(rawPath)) throw errors.badRequest('path contains dot segments or encoded separators', 'INVALID_PATH');
    const after = rawPath.slice(PREFIX.length);
    const slash = after.indexOf('/');
    const name = slash >= 0 ? after.slice(0, slash) : after;
    const rest = slash >= 0 ? after.slice(slash) : '/';
    const candidates = deps.registry.appRoutes.filter((a) => a.plugin === name);
    if (candidates.length === 0) throw errors.notFound(`no app plugin '${name}'`);
    let pathMatched = false;
    for (const route of candidates) {
      const params = route.match(rest);
      if (!params) continue;
      pathMatched = true;
      if (route.method !== method) continue;
      const state = deps.apps.state(name);
      if (!state || state.status !== 'running' || !state.port) {
        throw new HttpError(502, 'PLUGIN_UNAVAILABLE', `app plugin '${name}' is ${state?.status ?? 'not running'}`);
      }
      return { name, route, params, rest, search, target: `http://127.0.0.1:${state.port}`, secret: state.secret };
    }
    if (pathMatched) throw new HttpError(405, 'METHOD_NOT_ALLOWED', `method ${method} is not allowed on ${rawPath}`);
    throw errors.notFound(`app plugin '${name}' has no route ${method} ${rest}`);
  };

  type Resolved = ReturnType<typeof resolve>;

  /**
   * Authenticates and authorizes the request, then rewrites it for the app: signed principal, no token, its own
   * path. Returns the principal and the credential it authenticated with.
   */
  const prepare = async (req: IncomingMessage, ip: string, r: Resolved, query: Record<string, unknown>): Promise<{ principal: Principal; bearer: string }> => {
    const header = req.headers.authorization;
    const bearer = bearerToken(Array.isArray(header) ? header[0] : header);
    const principal = await authenticateBearer(bearer, ip, deps.principals);
    admit(r.route, principal, r.params, query);
    req.headers[PRINCIPAL_HEADER] = await new (await import('jose')).SignJWT({ principal: principal.toJSON() })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('agent')
      .setAudience(`app:${r.name}`)
      .setIssuedAt()
      .setExpirationTime('60s')
      .sign(new TextEncoder().encode(r.secret));
    delete req.headers.authorization;
    req.headers['x-forwarded-for'] = ip;
    req.url = r.rest + r.search;
    return { principal, bearer };
  };

  /**
   * Tracks a read or websocket while it is open; `end` ends it when the route's checks fail now, and also when the
   * principal lost any right it had: the app filters by the principal it was given, which would then show too much.
   */
  const track = (principal: Principal, bearer: string, ip: string, r: Resolved, query: Record<string, unknown>, end: (why: HttpError) => void) =>
    deps.live.track(principal, {
      bearer,
      ip,
      admit: (now) => {
        readmit(r.route, now, r.params, query, undefined);
        if (lostRights(principal, now)) throw errors.forbidden('the app was given rights this principal no longer has');
      },
      end,
    });

  return {
    /** Serves one request under `/api/plugin/`; `ip` is the client's address, `query` its parsed query string. */
    async http(req: IncomingMessage, res: ServerResponse, ip: string, query: Record<string, unknown>): Promise<void> {
      const r = resolve(req.method!, req.url!);
      const checkedQuery = { ...query };
      const { principal, bearer } = await prepare(req, ip, r, checkedQuery);
      const event = (status: number): AuditEventInput => ({
        ...auditActor(principal),
        action: r.route.operationId,
        resource_type: r.name,
        resource_id: Object.values(r.params)[0] ?? null,
        success: status < 400,
        status,
        client_ip: ip,
      });
      const get = req.method === 'GET';
      let answered = false;
      await new Promise<void>((done) => {
        if (get) {
          // The client left while it was checked.
          if (res.destroyed) return done();
          // A read may stream for long: it ends when the caller's rights are taken away, or the caller leaves.
          const untrack = track(principal, bearer, ip, r, checkedQuery, (why) => {
            endUpstream(req);
            if (res.headersSent) res.destroy();
            else sendError(res, toErrorAnswer(why));
          });
          res.once('close', () => {
            untrack();
            if (!res.writableFinished) endUpstream(req);
            done();
          });
          return proxy.web(req, res, { target: r.target });
        }
        res.once('close', () => done());
        held.set(req, (answer) => {
          answered = true;
          const status = answer.statusCode ?? 502;
          const pass = () => {
            const headers = { ...answer.headers };
            // Hop-by-hop headers belong to the app's connection; Node frames the body for the client's.
            for (const h of ['connection', 'keep-alive', 'transfer-encoding']) delete headers[h];
            res.writeHead(status, headers);
            answer.pipe(res);
          };
          // Passed on once its record is durable; a success that could not be recorded is answered AUDIT_FAILED.
          void deps.audit.settle(event(status)).then(pass, (err: unknown) => {
            answer.resume();
            sendError(res, toErrorAnswer(err));
          });
        });
        holding.web(req, res, { target: r.target });
      });
      // The app never answered (the proxy answered 502): that attempt is recorded too.
      if (!get && !answered) await deps.audit.record(event(res.statusCode)).catch(() => undefined);
    },

    /** Handles an upgrade under `/api/plugin/`; returns false when the path is not ours. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, ip: string): boolean {
      if (!req.url?.startsWith(PREFIX)) return false;
      void (async () => {
        try {
          const r = resolve('GET', req.url!);
          const query = Object.fromEntries(new URLSearchParams(r.search.slice(1)));
          const { principal, bearer } = await prepare(req, ip, r, query);
          if (socket.destroyed) return;
          // The proxy passes the app's frames through untouched, so a revoked socket is cut rather than closed
          // with a code of ours; the app's side goes with it.
          const untrack = track(principal, bearer, ip, r, query, () => socket.destroy());
          socket.once('close', () => {
            untrack();
            endUpstream(req);
          });
          proxy.ws(req, socket, head, { target: r.target });
        } catch (err) {
          refuseUpgrade(socket, err);
        }
      })();
      return true;
    },

    close(): void {
      proxy.close();
      holding.close();
    },
  };
}
