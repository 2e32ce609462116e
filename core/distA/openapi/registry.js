import { bodyValidator, paramsValidator, queryValidator } from './validation.js';
const PARAM = /:([A-Za-z_][A-Za-z0-9_]*)/g;
export const pathParams = (path) => [...path.matchAll(PARAM)].map((m) => m[1]);
const camel = (parts) => parts
    .flatMap((p) => p.split(/[-_.]/))
    .filter(Boolean)
    .map((p, i) => (i === 0 ? p.toLowerCase() : p[0].toUpperCase() + p.slice(1).toLowerCase()))
    .join('');
/**
 * `GET /deployments` → `list`, `GET /deployments/:name` → `get`, `POST /deployments/:name/start` → `start`,
 * `GET /security/events/:id` → `securityEventsGet` (the tag's own first segment is dropped).
 */
export function deriveOperationName(tag, method, path) {
    const segments = path.split('/').filter(Boolean);
    const literals = segments.filter((s) => !s.startsWith(':'));
    if (literals[0] === tag)
        literals.shift();
    const endsWithParam = segments.length > 0 && segments[segments.length - 1].startsWith(':');
    const lastIsAction = !endsWithParam && segments.length >= 2 && segments[segments.length - 2].startsWith(':');
    let verb = '';
    if (method === 'GET')
        verb = endsWithParam ? 'get' : literals.length === 0 ? 'list' : '';
    else if (method === 'POST')
        verb = endsWithParam ? 'post' : lastIsAction || literals.length > 0 ? '' : 'create';
    else if (method === 'PUT')
        verb = 'update';
    else if (method === 'PATCH')
        verb = 'patch';
    else if (method === 'DELETE')
        verb = 'delete';
    return camel([...literals, verb]) || verb;
}
/** A path matcher for koa-style paths (`/metrics/:id`), used where the router is not (sockets, app routes). */
export function pathMatcher(path) {
    const names = [];
    const source = path
        .split('/')
        .map((seg) => {
        if (seg.startsWith(':')) {
            names.push(seg.slice(1));
            return '([^/]+)';
        }
        return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
        .join('/');
    const re = new RegExp(`^${source}/?$`);
    return (candidate) => {
        const m = re.exec(candidate);
        if (!m)
            return null;
        const out = {};
        try {
            names.forEach((n, i) => (out[n] = decodeURIComponent(m[i + 1])));
        }
        catch {
            return null;
        }
        return out;
    };
}
function paramsSchemaFor(path, declared) {
    const names = pathParams(path);
    if (declared) {
        const props = declared.properties ?? {};
        for (const n of names)
            if (!(n in props))
                throw new Error(`path param ':${n}' is missing from the params schema`);
        return declared;
    }
    return {
        type: 'object',
        properties: Object.fromEntries(names.map((n) => [n, { type: 'string', minLength: 1, maxLength: 256 }])),
        required: names,
    };
}
/** Identity of an entry for duplicate detection: param names do not matter, `/a/:x` and `/a/:y` clash. */
const entryKey = (e) => e.kind === 'http' ? `http ${e.method} ${e.path.replace(PARAM, ':')}`
    : e.kind === 'websocket' ? `ws ${e.path.replace(PARAM, ':')}`
        : `app ${e.plugin} ${e.method} ${e.path.replace(PARAM, ':')}`;
const emptyQuery = { type: 'object', properties: {} };
function checkPath(path) {
    if (!/^(\/[A-Za-z0-9._:-]+)+\/?$|^\/$/.test(path))
        throw new Error(`invalid route path '${path}'`);
}
export class RouteRegistry {
    routes = [];
    sockets = [];
    appRoutes = [];
    ids = new Map();
    keys = new Set();
    claimId(operationId, plugin) {
        const owner = this.ids.get(operationId);
        if (owner)
            throw new Error(`operationId '${operationId}' is already used by plugin '${owner}'`);
    }
    /** Compiles a route without registering it (plugins commit their routes only when setup succeeds). */
    prepareRoute(plugin, spec) {
        checkPath(spec.path);
        const permission = spec.public === true ? null : spec.permission;
        if (!spec.public && !permission)
            throw new Error(`route ${spec.method} ${spec.path} declares no permission (deny by default)`);
        if (permission && permission !== 'authenticated' && !/^([a-z][a-z0-9-]*|\*):(read|write)$/.test(permission)) {
            throw new Error(`route ${spec.method} ${spec.path}: invalid permission '${permission}'`);
        }
        if (spec.plan && spec.method === 'GET')
            throw new Error(`route GET ${spec.path}: a GET cannot be plannable`);
        const tag = spec.tag ?? plugin;
        const operationId = spec.operationId ?? `${tag}.${deriveOperationName(tag, spec.method, spec.path)}`;
        const body = spec.body ? bodyValidator(spec.body) : null;
        if (body && spec.method === 'GET')
            throw new Error(`route GET ${spec.path}: a GET has no body`);
        return {
            kind: 'http', plugin, tag, operationId, derived: !spec.operationId, method: spec.method, path: spec.path, permission, spec,
            validate: { params: paramsValidator(paramsSchemaFor(spec.path, spec.params)), query: queryValidator(spec.query ?? emptyQuery), body },
        };
    }
    prepareSocket(plugin, spec) {
        checkPath(spec.path);
        if (!spec.permission)
            throw new Error(`websocket ${spec.path} declares no permission (deny by default)`);
        const tag = spec.tag ?? plugin;
        return {
            kind: 'websocket', plugin, tag, path: spec.path, permission: spec.permission, spec,
            operationId: spec.operationId ?? `${tag}.${deriveOperationName(tag, 'GET', spec.path)}`,
            validate: { params: paramsValidator(paramsSchemaFor(spec.path, spec.params)), query: queryValidator(spec.query ?? emptyQuery) },
            match: pathMatcher(spec.path),
        };
    }
    prepareAppRoute(plugin, spec) {
        checkPath(spec.path);
        if (!spec.permission)
            throw new Error(`app route ${spec.method} ${spec.path} declares no permission (deny by default)`);
        return {
            kind: 'app', plugin, tag: plugin, method: spec.method, path: spec.path, permission: spec.permission, spec,
            operationId: spec.operationId ?? `${plugin}.${deriveOperationName(plugin, spec.method, spec.path)}`,
            validate: { params: paramsValidator(paramsSchemaFor(spec.path, spec.params)), query: queryValidator(spec.query ?? emptyQuery) },
            match: pathMatcher(spec.path),
        };
    }
    /** Registers prepared entries atomically: all or none (duplicate ids or method+path refuse the batch). */
    commit(entries) {
        const seenIds = new Set();
        const seenKeys = new Set();
        for (const e of entries) {
            // A derived id that clashes (GET and POST on one collection) gets the method's verb appended.
            if (e.kind === 'http' && e.derived && (this.ids.has(e.operationId) || seenIds.has(e.operationId))) {
                const verb = { GET: 'List', POST: 'Create', PUT: 'Update', PATCH: 'Patch', DELETE: 'Delete' }[e.method];
                e.operationId = `${e.operationId}${verb}`;
            }
            this.claimId(e.operationId, e.plugin);
            if (seenIds.has(e.operationId))
                throw new Error(`operationId '${e.operationId}' is declared twice`);
            seenIds.add(e.operationId);
            const key = entryKey(e);
            if (this.keys.has(key) || seenKeys.has(key))
                throw new Error(`route ${key.slice(key.indexOf(' ') + 1)} is declared twice`);
            seenKeys.add(key);
        }
        for (const e of entries) {
            this.ids.set(e.operationId, e.plugin);
            this.keys.add(entryKey(e));
            if (e.kind === 'http')
                this.routes.push(e);
            else if (e.kind === 'websocket')
                this.sockets.push(e);
            else
                this.appRoutes.push(e);
        }
    }
    /** Withdraws every entry of a plugin (one that failed to start). */
    removePlugin(plugin) {
        for (const list of [this.routes, this.sockets, this.appRoutes]) {
            for (let i = list.length - 1; i >= 0; i--)
                if (list[i].plugin === plugin)
                    list.splice(i, 1);
        }
        for (const [id, owner] of this.ids)
            if (owner === plugin)
                this.ids.delete(id);
        this.keys.clear();
        for (const e of [...this.routes, ...this.sockets, ...this.appRoutes])
            this.keys.add(entryKey(e));
    }
    byOperationId(operationId) {
        return this.routes.find((r) => r.operationId === operationId);
    }
    forPlugin(plugin) {
        return {
            routes: this.routes.filter((r) => r.plugin === plugin),
            sockets: this.sockets.filter((s) => s.plugin === plugin),
            appRoutes: this.appRoutes.filter((a) => a.plugin === plugin),
        };
    }
}
//# sourceMappingURL=registry.js.map