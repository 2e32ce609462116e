/**
 * The checks between a request and a handler, shared by routes, websockets, app routes and plan applies: the bearer
 * token, the declared permission, the deployment the request names and, where it names none, the route's tenancy.
 */
import { errors, levelRank, type AccessLevel, type Principal, type PrincipalDirectory, type Tenancy } from '@agent/sdk';
import type { RegisteredAppRoute, RegisteredRoute, RegisteredSocket } from '../openapi/registry.js';

type Entry = RegisteredRoute | RegisteredSocket | RegisteredAppRoute;

const checked = (principal: Principal | null): Principal => {
  if (!principal) throw errors.unauthorized('invalid, expired or revoked token', 'INVALID_TOKEN');
  return principal;
};

/**
 * The principal behind an `Authorization: Bearer …` header; throws 401. Synchronous when the directory answers
 * from its caches (every request but a token's first), so the hot path awaits nothing.
 */
export function authenticateHeader(header: string | undefined, ip: string, principals: PrincipalDirectory): Principal | Promise<Principal> {
  return authenticateBearer(bearerToken(header), ip, principals);
}

/** The principal behind a bearer credential; throws 401. */
export function authenticateBearer(bearer: string, ip: string, principals: PrincipalDirectory): Principal | Promise<Principal> {
  const found = principals.authenticate(bearer, ip);
  return found instanceof Promise ? found.then(checked) : checked(found);
}

/** The credential of an `Authorization: Bearer …` header; throws 401. */
export function bearerToken(header: string | undefined): string {
  if (!header) throw errors.unauthorized('missing bearer token');
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw errors.unauthorized('the Authorization header must be "Bearer <token>"');
  return m[1]!;
}

/** Checks the permission a route (or socket) declares; throws 403. */
export function checkPermission(permission: string | null, principal: Principal | null): void {
  if (permission === null) return;
  if (!principal) throw errors.unauthorized();
  if (permission === 'authenticated') return;
  if (!principal.can(permission)) throw errors.forbidden(`permission '${permission}' required`);
}

export function neededLevel(permission: string | null, declared: AccessLevel | undefined): AccessLevel {
  return declared ?? (permission?.endsWith(':write') ? 'write' : 'read');
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

const methodOf = (entry: Entry): string => (entry.kind === 'websocket' ? 'GET' : entry.method);

/**
 * Deployment-scoped access when the request names a deployment: 404 for one the principal cannot see, 403 when its
 * level is too low; else the route's tenancy. Returns the deployment. A name the route found itself (from an id) is
 * not repeated in the answer: it would tell the caller whose the id is.
 */
export function checkScope(principal: Principal, name: unknown, entry: Entry, named = true): string | null {
  if (name === undefined || name === null || name === '') {
    checkTenancy(principal, entry.spec.tenancy, methodOf(entry));
    return null;
  }
  const deployment = String(name);
  const level = principal.deploymentLevel(deployment);
  if (!level) throw errors.notFound(named ? `deployment '${deployment}' not found` : 'not found');
  const needed = neededLevel(entry.permission, entry.kind === 'app' ? undefined : entry.spec.deploymentLevel);
  if (levelRank(level) < levelRank(needed)) throw errors.forbidden(`'${needed}' access to deployment '${deployment}' required`);
  return deployment;
}

/**
 * The checks every entry makes before its body and handler, in one order: permission → path params → the
 * deployment the path names (or the tenancy when it names none) → query. The deployment comes before the query (and
 * the body): a principal without access gets the same 404 whatever it sends, so validation errors cannot be used to
 * probe deployments it may not see. A deployment the route finds itself (`deployment` is a function) is the
 * caller's to check, once the request is validated. Returns the deployment checked.
 */
export function admit(entry: Entry, principal: Principal | null, params: Record<string, string>, query: Record<string, unknown>): string | null {
  checkPermission(entry.permission, principal);
  const paramsError = entry.validate.params(params);
  if (paramsError) throw paramsError;
  const named = entry.kind === 'app' ? undefined : entry.spec.deployment;
  const deployment = principal && typeof named !== 'function' ? checkScope(principal, typeof named === 'string' ? params[named] : undefined, entry) : null;
  const queryError = entry.validate.query(query);
  if (queryError) throw queryError;
  return deployment;
}

/**
 * The checks a long-lived connection passed when it opened, for its principal of now (see `LiveConnections`):
 * `admit`, then the deployment the entry found itself (`found`, when its `deployment` is a function).
 */
export function readmit(entry: Entry, principal: Principal, params: Record<string, string>, query: Record<string, unknown>, found: unknown): void {
  admit(entry, principal, params, query);
  if (entry.kind !== 'app' && typeof entry.spec.deployment === 'function') checkScope(principal, found, entry, false);
}

/** Whether `now` lacks a right `then` had: global scope, a permission, a level on a deployment. */
export function lostRights(then: Principal, now: Principal): boolean {
  if (then.isGlobal && !now.isGlobal) return true;
  if (then.permissions.some((p) => !now.can(p))) return true;
  for (const name in then.deployments) if (levelRank(now.deploymentLevel(name)) < levelRank(then.deployments[name])) return true;
  return false;
}
