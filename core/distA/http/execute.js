import { errors, levelRank, Reply } from '@agent/sdk';
/** Checks the permission a route (or socket) declares; throws 403. */
export function checkPermission(permission, principal) {
    if (permission === null)
        return;
    if (!principal)
        throw errors.unauthorized();
    if (permission === 'authenticated')
        return;
    if (!principal.can(permission))
        throw errors.forbidden(`permission '${permission}' required`);
}
/** Deployment-scoped access: 404 for a deployment the principal cannot see, 403 when its level is too low. */
export function checkDeployment(principal, name, needed) {
    const level = principal.deploymentLevel(name);
    if (!level)
        throw errors.notFound(`deployment '${name}' not found`);
    if (levelRank(level) < levelRank(needed))
        throw errors.forbidden(`'${needed}' access to deployment '${name}' required`);
}
export function neededLevel(permission, declared) {
    return declared ?? (permission?.endsWith(':write') ? 'write' : 'read');
}
/**
 * What a handler receives. A class (not an object literal with a spread and a getter) keeps its shape fixed, so
 * building one per request stays on V8's fast path.
 */
class HandlerRequest {
    inv;
    body;
    params;
    query;
    principal;
    ip;
    method;
    path;
    headers;
    raw;
    plan;
    constructor(inv, body) {
        this.inv = inv;
        this.body = body;
        this.params = inv.params;
        this.query = inv.query;
        this.principal = inv.principal;
        this.ip = inv.ip;
        this.method = inv.route.method;
        this.path = inv.path;
        this.headers = inv.headers;
        this.raw = inv.raw;
        this.plan = inv.planId ? { id: inv.planId } : undefined;
    }
    get signal() {
        return this.inv.signal();
    }
}
export async function execute(inv, plans, validateResponse) {
    const { route } = inv;
    const spec = route.spec;
    checkPermission(route.permission, inv.principal);
    const paramsError = route.validate.params(inv.params);
    if (paramsError)
        throw paramsError;
    // A deployment named in the path is checked before the query and body: a principal without access gets the
    // same 404 whatever it sends, so validation errors cannot be used to probe deployments it may not see.
    let deployment = null;
    if (typeof spec.deployment === 'string' && inv.principal) {
        const name = inv.params[spec.deployment];
        if (name !== undefined && name !== '') {
            deployment = String(name);
            checkDeployment(inv.principal, deployment, neededLevel(route.permission, spec.deploymentLevel));
        }
    }
    const queryError = route.validate.query(inv.query);
    if (queryError)
        throw queryError;
    let body = inv.body;
    if (route.validate.body) {
        if (body === undefined || body === null)
            body = {};
        const bodyError = route.validate.body(body);
        if (bodyError)
            throw bodyError;
    }
    const req = new HandlerRequest(inv, body);
    if (typeof spec.deployment === 'function' && inv.principal) {
        const name = spec.deployment(req);
        if (name !== undefined && name !== null && name !== '') {
            deployment = String(name);
            checkDeployment(inv.principal, deployment, neededLevel(route.permission, spec.deploymentLevel));
        }
    }
    if (inv.wantsPlan) {
        if (!spec.plan)
            throw errors.badRequest(`${route.method} ${route.path} does not support plans`, 'PLAN_NOT_SUPPORTED');
        const plan = await plans.create({ route, principal: inv.principal, params: inv.params, query: inv.query, body, path: inv.path });
        return { reply: new Reply(201, { data: plans.view(plan), message: 'plan created; nothing was changed' }), deployment };
    }
    // Most handlers answer synchronously: awaiting only a promise saves a microtask turn per request.
    let result = spec.handler(req);
    if (result instanceof Promise)
        result = await result;
    let reply;
    if (result instanceof Reply)
        reply = result;
    else
        reply = new Reply(spec.status ?? 200, { data: result === undefined ? null : result });
    if (validateResponse && reply.body && reply.status < 300 && spec.response)
        validateResponse(route, reply.body.data);
    return { reply, deployment };
}
//# sourceMappingURL=execute.js.map