/**
 * The route pipeline after authentication: permission → validation → deployment access → plan or handler.
 * HTTP requests and plan applies both go through it, so a plan runs exactly what a direct request would.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errors, levelRank, Reply, type AccessLevel, type Principal, type RouteRequest, type Tenancy } from '@agent/sdk';
import type { RegisteredRoute, RegisteredSocket } from '../openapi/registry.js';
import type { PlanEngine } from '../plans/engine.js';

export interface Invocation {
  route: RegisteredRoute;
  principal: Principal | null;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  ip: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Created on first use (most handlers never need it). */
  signal: () => AbortSignal;
  raw: { req: IncomingMessage; res: ServerResponse };
  /** `?plan=true` was given. */
  wantsPlan: boolean;
  /** Set when running through plan apply. */
  planId?: string;
}

export interface ExecuteResult {
  reply: Reply;
  /** The deployment the request was about, when the route is deployment-scoped (for the audit record). */
  deployment: string | null;
}

/** Checks the permission a route (or socket) declares; throws 403. */
export function checkPermission(permission: string | null, principal: Principal | null): void {
  if (permission === null) return;
  if (!principal) throw errors.unauthorized();
  if (permission === 'authenticated') return;
  if (!principal.can(permission)) throw errors.forbidden(`permission '${permission}' required`);
}

/**
 * Deployment-scoped access when the request names a deployment: 404 for one the principal cannot see, 403 when its
 * level is too low; else the route's tenancy. Returns the deployment. A name the route found itself (from an id) is
 * not repeated in the answer: it would tell the caller whose the id is.
 */
export function checkScope(principal: Principal, name: unknown, route: RegisteredRoute | RegisteredSocket, method: string, named = true): string | null {
  if (name === undefined || name === null || name === '') {
    checkTenancy(principal, route.spec.tenancy, method);
    return null;
  }
  const deployment = String(name);
  const level = principal.deploymentLevel(deployment);
  if (!level) throw errors.notFound(named ? `deployment '${deployment}' not found` : 'not found');
  const needed = neededLevel(route.permission, route.spec.deploymentLevel);
  if (levelRank(level) < levelRank(needed)) throw errors.forbidden(`'${needed}' access to deployment '${deployment}' required`);
  return deployment;
}

/**
 * What a scoped principal may do where no deployment is named: only routes that declare how they keep to its
 * deployments (see `Tenancy`). Global routes answer 403 `GLOBAL_SCOPE_REQUIRED`.
 */
export function checkTenancy(principal: Principal | null, tenancy: Tenancy | undefined, method: string): void {
  if (!principal || principal.isGlobal || tenancy === 'filtered' || tenancy === 'own') return;
  if (tenancy === 'catalogue' && method === 'GET') return;
  // A scoped user becomes admin of what it creates; a scoped key would not reach it: it may not create one.
  if (tenancy === 'create' && principal.type === 'user') return;
  throw errors.forbidden(`${principal.name} is limited to its deployments; this operation concerns global state`, 'GLOBAL_SCOPE_REQUIRED');
}

export function neededLevel(permission: string | null, declared: AccessLevel | undefined): AccessLevel {
  return declared ?? (permission?.endsWith(':write') ? 'write' : 'read');
}

/**
 * What a handler receives. A class (not an object literal with a spread and a getter) keeps its shape fixed, so
 * building one per request stays on V8's fast path.
 */
class HandlerRequest implements RouteRequest<any, any, any> {
  readonly params: Record<string, string>;
  readonly query: Record<string, unknown>;
  readonly principal: Principal;
  readonly ip: string;
  readonly method: RouteRequest['method'];
  readonly path: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly raw: RouteRequest['raw'];
  readonly plan: { id: string } | undefined;

  constructor(
    private readonly inv: Invocation,
    readonly body: unknown,
  ) {
    this.params = inv.params;
    this.query = inv.query;
    this.principal = inv.principal!;
    this.ip = inv.ip;
    this.method = inv.route.method;
    this.path = inv.path;
    this.headers = inv.headers;
    this.raw = inv.raw;
    this.plan = inv.planId ? { id: inv.planId } : undefined;
  }

  get signal(): AbortSignal {
    return this.inv.signal();
  }
}

/**
 * Runs the pipeline. Synchronous for a synchronous handler (most are): the HTTP layer then answers without a
 * promise of its own. Errors before the handler runs are thrown, not returned as rejections.
 */
export function execute(
  inv: Invocation,
  plans: PlanEngine,
  validateResponse?: (route: RegisteredRoute, data: unknown) => void,
): ExecuteResult | Promise<ExecuteResult> {
  const { route } = inv;
  const spec = route.spec;
  checkPermission(route.permission, inv.principal);

  const paramsError = route.validate.params(inv.params);
  if (paramsError) throw paramsError;
  // A deployment named in the path is checked before the query and body: a principal without access gets the
  // same 404 whatever it sends, so validation errors cannot be used to probe deployments it may not see. Without
  // one, the route's tenancy decides for a scoped principal, before validation.
  const { principal } = inv;
  const inPath = typeof spec.deployment === 'string' ? inv.params[spec.deployment] : undefined;
  let deployment = principal && typeof spec.deployment !== 'function' ? checkScope(principal, inPath, route, route.method) : null;
  const queryError = route.validate.query(inv.query);
  if (queryError) throw queryError;
  let body = inv.body;
  if (route.validate.body) {
    if (body === undefined || body === null) body = {};
    const bodyError = route.validate.body(body);
    if (bodyError) throw bodyError;
  }

  const req = new HandlerRequest(inv, body);

  if (typeof spec.deployment === 'function' && principal) {
    deployment = checkScope(principal, spec.deployment(req), route, route.method, false);
  }

  if (inv.wantsPlan) {
    if (!spec.plan) throw errors.badRequest(`${route.method} ${route.path} does not support plans`, 'PLAN_NOT_SUPPORTED');
    return plans
      .create({ route, principal: inv.principal!, params: inv.params, query: inv.query, body, path: inv.path })
      .then((plan) => ({ reply: new Reply(201, { data: plans.view(plan), message: 'plan created; nothing was changed' }), deployment }));
  }

  const finish = (result: unknown): ExecuteResult => {
    const reply = result instanceof Reply ? result : new Reply(spec.status ?? 200, { data: result === undefined ? null : result });
    if (validateResponse && reply.body && reply.status < 300 && spec.response) validateResponse(route, reply.body.data);
    return { reply, deployment };
  };
  const result: unknown = spec.handler(req);
  return result instanceof Promise ? result.then(finish) : finish(result);
}
