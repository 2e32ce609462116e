/**
 * The plugin proxy: `/api/plugin/<name>/<path>` → the app plugin's own server. The core normalises the path,
 * forwards only routes the app declared, authenticates, checks the declared permission, then forwards with the
 * principal in a signed `x-agent-principal` header (the caller's token is not passed on). Websockets included.
 */
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import httpProxy from 'http-proxy';
import { errors, HttpError, type AppDirectory, type AuditEventInput, type Principal, type PrincipalDirectory } from '@agent/sdk';
import { PRINCIPAL_HEADER } from '@agent/sdk/app';
import { auditActor, type AuditWriter } from '../audit.js';
import type { RouteRegistry } from '../openapi/registry.js';
import { admit, authenticateHeader } from '../auth/checks.js';
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

export function createPluginProxy(deps: { registry: RouteRegistry; principals: PrincipalDirectory; apps: AppDirectory; audit: AuditWriter; log: RootLogger }) {
  const proxy = httpProxy.createProxyServer({ xfwd: false, ws: true, proxyTimeout: 120_000 });
  // Mutations: the app's answer is held until its audit record is durable (see `http`), then passed on.
  const holding = httpProxy.createProxyServer({ xfwd: false, proxyTimeout: 120_000, selfHandleResponse: true });
  const held = new WeakMap<IncomingMessage, (answer: IncomingMessage) => void>();
  holding.on('proxyRes', (answer, req) => held.get(req)?.(answer));
  const onError = (err: Error, _req: IncomingMessage, res: ServerResponse | Duplex) => {
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

  /** Authenticates and authorizes the request, then rewrites it for the app: signed principal, no token, its own path. */
  const prepare = async (req: IncomingMessage, ip: string, r: Resolved, query: Record<string, unknown>): Promise<Principal> => {
    const header = req.headers.authorization;
    const principal = await authenticateHeader(Array.isArray(header) ? header[0] : header, ip, deps.principals);
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
    return principal;
  };

  return {
    /** Serves one request under `/api/plugin/`; `ip` is the client's address, `query` its parsed query string. */
    async http(req: IncomingMessage, res: ServerResponse, ip: string, query: Record<string, unknown>): Promise<void> {
      const r = resolve(req.method!, req.url!);
      const principal = await prepare(req, ip, r, { ...query });
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
        res.once('close', () => done());
        if (get) return proxy.web(req, res, { target: r.target });
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
          await prepare(req, ip, r, Object.fromEntries(new URLSearchParams(r.search.slice(1))));
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
