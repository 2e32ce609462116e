/** Visibility of deployment-tagged records (traffic, events) for a principal. */
import type { Principal } from '@agent/sdk';
import { errors } from '@agent/sdk';

/** undefined: every deployment (and untagged records); else the deployments the principal may read. */
export function visibleDeployments(p: Principal): string[] | undefined {
  if (p.isAdmin || p.deploymentLevel('*')) return undefined;
  return Object.keys(p.deployments).filter((d) => d !== '*');
}

/** RFC 3339 query value → epoch ms (400 naming the field when it is not a time). */
export function timeParam(value: string | undefined, field: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  const t = Date.parse(value);
  if (!Number.isFinite(t) || !/^\d{4}-\d{2}-\d{2}T/.test(value)) throw errors.badRequest(`${field}: expected an RFC 3339 time`, 'VALIDATION_FAILED', { field });
  return t;
}
