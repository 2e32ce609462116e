/**
 * Who reaches which backup, job and stored object (the tenancy model, README "Tenancy"). Backups follow their
 * deployment: its principals reach them at their level on it. What a deleted deployment left is kept under its
 * retired name `<name>~<time>`, which no principal limited to deployments holds a grant on, so only global
 * principals reach it. Items of no deployment (replication jobs) are global.
 */
import { errors, levelRank, type AccessLevel, type Principal } from '@agent/sdk';

/** A live deployment name or a retired one (`<name>~<yyyymmddhhmmss>`): list filters accept both. */
export const DEPLOYMENT_OR_RETIRED = '^[a-z0-9][a-z0-9_-]{0,62}(~[0-9]{14})?$';
const NAME_OR_RETIRED_RE = new RegExp(DEPLOYMENT_OR_RETIRED);

export const isRetired = (name: string): boolean => name.includes('~');
export const looksLikeDeployment = (name: string): boolean => NAME_OR_RETIRED_RE.test(name);

/** Whether the principal reaches an item of `deployment` (null: of no deployment) at `level`. */
export function canReach(p: Principal, deployment: string | null, level: AccessLevel = 'read'): boolean {
  if (deployment === null) return p.isGlobal;
  if (isRetired(deployment) && !p.isGlobal) return false;
  return levelRank(p.deploymentLevel(deployment)) >= levelRank(level);
}

/**
 * For a route's `deployment` function: the item's deployment when the principal has some access to it (the core
 * then checks the level: 403 when too low), otherwise undefined, so that the route's `filtered` handler answers
 * the same 404 for an unknown id and for another tenant's (and no deployment name appears in the error).
 */
export const boundIfVisible = (p: Principal, deployment: string | null | undefined): string | undefined =>
  deployment !== null && deployment !== undefined && canReach(p, deployment, 'read') ? deployment : undefined;

/** The same 404 for an unknown item and for one the principal may not see. */
export function assertVisible(p: Principal, deployment: string | null | undefined, notFound: () => Error): void {
  if (deployment === undefined || !canReach(p, deployment, 'read')) throw notFound();
}

export const globalScopeRequired = (what: string) =>
  errors.forbidden(`${what} concerns global state: a principal limited to its deployments may not do it`, 'GLOBAL_SCOPE_REQUIRED');
