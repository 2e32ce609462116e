/**
 * The tenancy rule every plugin applies to what it keeps (README "Tenancy"), written once: an item belongs to a
 * deployment, to a deleted deployment (kept under its retired name `<name>~<yyyymmddhhmmss>`), or to none (global).
 * A global principal reaches all of them within its permissions; a principal limited to some deployments reaches
 * the items of those, at its level on each, and never a retired or a global item.
 */
import { Type, type TString } from '@sinclair/typebox';
import { errors } from './errors.js';
import { levelRank, type AccessLevel, type Principal } from './principal.js';
import { DEPLOYMENT_NAME } from './schema.js';

/** A live deployment name or a retired one: filters of kept records accept both. */
export const DEPLOYMENT_OR_RETIRED = `${DEPLOYMENT_NAME.slice(0, -1)}(~[0-9]{14})?$`;
const DEPLOYMENT_NAME_RE = new RegExp(DEPLOYMENT_NAME);
const DEPLOYMENT_OR_RETIRED_RE = new RegExp(DEPLOYMENT_OR_RETIRED);

export const isDeploymentName = (name: string): boolean => DEPLOYMENT_NAME_RE.test(name);
export const isDeploymentOrRetiredName = (name: string): boolean => DEPLOYMENT_OR_RETIRED_RE.test(name);
/** `~` never appears in a deployment name, only in a retired one. */
export const isRetiredName = (name: string): boolean => name.includes('~');

/** A filter naming a deployment or a deleted deployment's retired name. */
export const deploymentOrRetired = (
  description = 'deployment name, or the retired name `<name>~<yyyymmddhhmmss>` of a deleted one (global principals)',
): TString => Type.String({ pattern: DEPLOYMENT_OR_RETIRED, maxLength: 80, description });

/** Whether the principal reaches an item of `deployment` (null, undefined or '': of no deployment) at `level`. */
export function canReach(p: Principal, deployment: string | null | undefined, level: AccessLevel = 'read'): boolean {
  if (!deployment) return p.isGlobal;
  // No grant can name a retired deployment; the check says so rather than relying on it.
  if (isRetiredName(deployment) && !p.isGlobal) return false;
  return levelRank(p.deploymentLevel(deployment)) >= levelRank(level);
}

/** undefined: every deployment (global principals); else the deployments the principal may read. */
export function visibleDeployments(p: Principal): string[] | undefined {
  if (p.isGlobal) return undefined;
  return Object.keys(p.deployments).filter((d) => d !== '*' && p.canAccessDeployment(d));
}

/**
 * For a route's `deployment` function: the item's deployment when the principal has some access to it (the core
 * then checks the level: 403 when too low), otherwise undefined, so that the route's `filtered` handler answers
 * the same 404 for an unknown item and for another tenant's (and no deployment name appears in the error).
 */
export const boundIfVisible = (p: Principal, deployment: string | null | undefined): string | undefined =>
  deployment !== null && deployment !== undefined && canReach(p, deployment) ? deployment : undefined;

/** The same 404 for an unknown item and for one the principal may not see. */
export function assertVisible(p: Principal, deployment: string | null | undefined, notFound: () => Error): void {
  if (deployment === undefined || !canReach(p, deployment)) throw notFound();
}

/** The 403 for a principal limited to its deployments asking for something that concerns global state. */
export const globalScopeRequired = (what: string) =>
  errors.forbidden(`${what} concerns global state: a principal limited to its deployments may not do it`, 'GLOBAL_SCOPE_REQUIRED');
