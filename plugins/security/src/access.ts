/**
 * Tenancy of the security records (events, blocks): a record belongs to a deployment (its tag) or to none (unknown
 * hosts, global blocks). A global principal reaches every record; a principal limited to some deployments reaches
 * only the records of those, never untagged or retired ones.
 */
import { canReach, errors, Type, visibleDeployments, type Principal } from '@agent/sdk';

/**
 * A deployment named in a filter: the principal's own, else 404 whether it exists or not (the name is the
 * caller's, so the message tells nothing new). Returns the visible set for the rest of the filter.
 */
export function filterScope(p: Principal, deployment: string | undefined): string[] | undefined {
  if (deployment && !canReach(p, deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
  return visibleDeployments(p);
}

/** RFC 3339 query value → epoch ms (400 naming the field when it is not a time). */
export function timeParam(value: string | undefined, field: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  const t = Date.parse(value);
  if (!Number.isFinite(t) || !/^\d{4}-\d{2}-\d{2}T/.test(value)) throw errors.badRequest(`${field}: expected an RFC 3339 time`, 'VALIDATION_FAILED', { field });
  return t;
}

/** An optional RFC 3339 time in a query. */
export const TimeQuery = (description = 'RFC 3339 time') => Type.Optional(Type.String({ format: 'date-time', maxLength: 40, description }));
