/**
 * The koa application: error envelope, CORS, the router built from the registry (auth → body → pipeline →
 * audit per route), the plugin proxy, and JSON 404/405 answers.
 */
import Koa from 'koa';
import Router from '@koa/router';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { cjsExports, errors, HttpError } from '@agent/sdk';
import { execute } from './execute.js';
import { toErrorAnswer } from './errors.js';
const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const checked = (principal) => {
    if (!principal)
        throw errors.unauthorized('invalid, expired or revoked token', 'INVALID_TOKEN');
    return principal;
};
/**
 * The principal behind an `Authorization: Bearer …` header; throws 401. Synchronous when the identity answers
 * from its caches (every request but a token's first), so the hot path awaits nothing.
 */
export function authenticateHeader(header, ip, identity) {
    if (!header)
        throw errors.unauthorized('missing bearer token');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m)
        throw errors.unauthorized('the Authorization header must be "Bearer <token>"');
    const principal = identity.authenticate(m[1], ip);
    return principal instanceof Promise ? principal.then(checked) : checked(principal);
}
/** The first literal path segment names the resource type in audit records. */
export const resourceTypeOf = (path) => path.split('/').find((s) => s && !s.startsWith(':')) ?? 'api';
export function auditActor(principal) {
    return { actor_type: principal.type, actor_id: principal.id, actor_name: principal.name };
}
function makeResponseValidator(log) {
    const ajv = new Ajv2020({ strict: false, allErrors: false });
    const cache = new Map();
    return (route, data) => {
        let fn = cache.get(route);
        if (!fn) {
            // Responses may carry more fields than documented; only the documented ones are checked.
            fn = ajv.compile(JSON.parse(JSON.stringify(route.spec.response)));
            cache.set(route, fn);
        }
        if (!fn(data)) {
            const first = fn.errors[0];
            log.error({ operation: route.operationId, error: first }, 'response does not match its schema');
            throw errors.internal(`response of ${route.operationId} does not match its schema at '${first.instancePath}': ${first.message}`, 'RESPONSE_INVALID');
        }
    };
}
export function createHttpApp(deps) {
    const { config, log, identity, registry, plans, audit } = deps;
    const app = new Koa({ proxy: config.api.trust_proxy });
    app.silent = true;
    const validateResponse = deps.validateResponses ? makeResponseValidator(log) : undefined;
    const allowedOrigins = new Set(config.api.allowed_origins);
    const answerError = (ctx, err) => {
        const answer = toErrorAnswer(err);
        if (answer.internal)
            log.error({ err, method: ctx.method, path: ctx.path }, 'request failed');
        if (ctx.headerSent || !ctx.writable)
            return;
        ctx.status = answer.status;
        for (const [k, v] of Object.entries(answer.headers ?? {}))
            ctx.set(k, v);
        ctx.body = answer.body;
    };
    // Plain promise callbacks rather than an async function: this wraps every request.
    app.use((ctx, next) => next().then(() => {
        if (ctx.status === 404 && ctx.body === undefined && ctx.respond !== false)
            answerError(ctx, errors.notFound(`no route ${ctx.method} ${ctx.path}`));
    }, (err) => answerError(ctx, err)));
    if (config.api.enable_cors) {
        app.use(async (ctx, next) => {
            const origin = ctx.get('origin');
            if (!origin)
                return next();
            const allowed = allowedOrigins.has(origin);
            ctx.vary('Origin');
            if (ctx.method === 'OPTIONS' && ctx.get('access-control-request-method')) {
                if (!allowed)
                    throw errors.forbidden(`origin ${origin} is not allowed`, 'CORS_ORIGIN_DENIED');
                ctx.set('Access-Control-Allow-Origin', origin);
                ctx.set('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE');
                ctx.set('Access-Control-Allow-Headers', ctx.get('access-control-request-headers') || 'Authorization, Content-Type');
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
    // koa-body (and the multipart stack it pulls in) is loaded with the first request that has a body.
    let bodyParser = null;
    const parseBody = async (ctx) => {
        bodyParser ??= import('koa-body').then(cjsExports).then(({ koaBody, HttpMethodEnum }) => koaBody({
            json: true, text: false, urlencoded: false, multipart: false, jsonLimit: config.api.body_limit, jsonStrict: true,
            parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE], includeUnparsed: false,
            onError: (err) => {
                throw err;
            },
        }));
        await (await bodyParser)(ctx, async () => undefined);
    };
    const compiler = new Router({ prefix: '/api' });
    const groups = new Map();
    const add = (path, method, handler) => {
        const first = path.split('/')[1] ?? '';
        const key = first.startsWith(':') ? '*' : first;
        const layer = compiler.register(path, [method], handler);
        let list = groups.get(key);
        if (!list)
            groups.set(key, (list = []));
        list.push({ layer, methods: new Set(layer.methods), handler });
    };
    for (const route of registry.routes) {
        add(route.path, route.method, async (ctx) => {
            const ip = ctx.ip;
            let principal = null;
            let status = 500;
            let deployment = null;
            let wantsPlan = false;
            try {
                if (route.permission !== null) {
                    const found = authenticateHeader(ctx.get('authorization'), ip, identity);
                    principal = found instanceof Promise ? await found : found;
                }
                if (route.validate.body && !route.spec.rawBody) {
                    const length = Number(ctx.get('content-length') || 0);
                    if ((length > 0 || ctx.get('transfer-encoding')) && !ctx.is('json')) {
                        throw errors.badRequest('the body must be JSON (Content-Type: application/json)', 'UNSUPPORTED_MEDIA_TYPE');
                    }
                    if (length > config.api.body_limit)
                        throw errors.tooLarge(`request body larger than ${config.api.body_limit} bytes`);
                    await parseBody(ctx);
                }
                // koa parses the query once per request; it is only copied when `plan` has to be taken out.
                let query = ctx.query;
                if ('plan' in query) {
                    query = { ...query };
                    if (query.plan !== 'true' && query.plan !== 'false')
                        throw errors.badRequest('query.plan: must be true or false');
                    wantsPlan = query.plan === 'true';
                    delete query.plan;
                }
                // Most handlers never look at the signal: it is created (and the close listener added) on first use.
                let controller = null;
                const signal = () => {
                    if (!controller) {
                        const c = (controller = new AbortController());
                        ctx.res.once('close', () => {
                            if (!ctx.res.writableFinished)
                                c.abort();
                        });
                    }
                    return controller.signal;
                };
                const result = await execute({
                    // A copy: validation coerces params in place (`'2'` → `2`), the audit record keeps the raw path values.
                    route, principal, params: { ...ctx.params }, query, body: ctx.request.body, ip, path: ctx.path,
                    headers: ctx.headers, signal, raw: { req: ctx.req, res: ctx.res }, wantsPlan,
                }, plans, validateResponse);
                deployment = result.deployment;
                const reply = result.reply;
                status = reply.status;
                for (const k in reply.headers)
                    ctx.set(k, reply.headers[k]);
                ctx.status = reply.status;
                if (reply.stream !== undefined)
                    ctx.body = reply.stream;
                else if (reply.body) {
                    // Set directly: koa would otherwise look the type up for every JSON answer.
                    if (!ctx.res.hasHeader('content-type'))
                        ctx.set('Content-Type', 'application/json; charset=utf-8');
                    ctx.body = reply.body;
                }
                else
                    ctx.body = null;
            }
            catch (err) {
                status = toErrorAnswer(err).status;
                throw err;
            }
            finally {
                if (principal && MUTATING.has(route.method) && route.spec.audit !== false) {
                    audit.record({
                        ...auditActor(principal),
                        action: wantsPlan ? `${route.operationId}.plan` : route.operationId,
                        resource_type: resourceTypeOf(route.path),
                        resource_id: Object.values((ctx.params ?? {}))[0] ?? null,
                        deployment,
                        success: status < 400,
                        status,
                        client_ip: ip,
                        detail: wantsPlan ? { plan: true } : null,
                    });
                }
            }
        });
    }
    const fallback = groups.get('*') ?? [];
    app.use((ctx, next) => {
        const path = ctx.path;
        if (!path.startsWith('/api/'))
            return next();
        if (path.startsWith('/api/plugin/'))
            return deps.proxy(ctx);
        const end = path.indexOf('/', 5);
        const list = groups.get(path.slice(5, end < 0 ? undefined : end)) ?? fallback;
        let allowed = null;
        for (const entry of list) {
            if (!entry.layer.regexp.test(path))
                continue;
            if (entry.methods.has(ctx.method)) {
                ctx.params = entry.layer.params(path, entry.layer.captures(path), {});
                return entry.handler(ctx, next);
            }
            (allowed ??= []).push(...entry.methods);
        }
        if (!allowed)
            return next();
        ctx.set('Allow', [...new Set(allowed)].join(', '));
        if (ctx.method === 'OPTIONS') {
            ctx.status = 204;
            return;
        }
        throw new HttpError(405, 'METHOD_NOT_ALLOWED', `method ${ctx.method} is not allowed on ${path}`);
    });
    return app;
}
//# sourceMappingURL=app.js.map