/**
 * Tenancy of the edge's records (traffic rows, security events, blocks, certificates): a record belongs to a
 * deployment (its tag) or to none (unknown hosts, global blocks). A global principal reaches every record; a
 * principal limited to some deployments reaches only the records of those, never untagged or retired ones.
 */
import type { Principal } from '@agent/sdk';
import { DEPLOYMENT_NAME, errors, Type } from '@agent/sdk';

/** undefined: every record (global principals); else the deployments whose records the principal may read. */
export function visibleDeployments(p: Principal): string[] | undefined {
  if (p.isGlobal) return undefined;
  return Object.keys(p.deployments).filter((d) => d !== '*' && p.canAccessDeployment(d));
}

/** Whether a record tagged `deployment` (null/'' = of no deployment) is the principal's to see. */
export function canSee(p: Principal, deployment: string | null | undefined): boolean {
  return deployment ? p.canAccessDeployment(deployment) : p.isGlobal;
}

/**
 * A deployment named in a filter: the principal's own, else 404 whether it exists or not (the name is the
 * caller's, so the message tells nothing new). Returns the visible set for the rest of the filter.
 */
export function filterScope(p: Principal, deployment: string | undefined): string[] | undefined {
  const visible = visibleDeployments(p);
  if (deployment && !canSee(p, deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
  return visible;
}

/**
 * A deployment name or a retired one (`<name>~<yyyymmddhhmmss>`, what a deleted deployment's records are kept
 * under): filters of records accept both; only global principals reach retired names.
 */
export const DeploymentRef = (description = 'deployment name, or the retired name `<name>~<yyyymmddhhmmss>` of a deleted one (global principals)') =>
  Type.String({ pattern: `${DEPLOYMENT_NAME.slice(0, -1)}(~[0-9]{14})?$`, maxLength: 80, description });

/** The 403 a handler answers when what a request resolved to is global state (a scoped principal may not). */
export const globalScopeRequired = (p: Principal, what: string) =>
  errors.forbidden(`${p.name} is limited to its deployments; ${what} concerns global state`, 'GLOBAL_SCOPE_REQUIRED');

/** RFC 3339 query value → epoch ms (400 naming the field when it is not a time). */
export function timeParam(value: string | undefined, field: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  const t = Date.parse(value);
  if (!Number.isFinite(t) || !/^\d{4}-\d{2}-\d{2}T/.test(value)) throw errors.badRequest(`${field}: expected an RFC 3339 time`, 'VALIDATION_FAILED', { field });
  return t;
}

/** An optional RFC 3339 time in a query. */
export const TimeQuery = (description = 'RFC 3339 time') => Type.Optional(Type.String({ format: 'date-time', maxLength: 40, description }));
