/**
 * Who reaches which engine object (the tenancy model): an object of a deployment (its compose project label) needs
 * access to that deployment; an object of no deployment is global, reached only by global principals.
 */
import { canReach, errors, levelRank, type AccessLevel, type Principal } from '@agent/sdk';

/**
 * Throws unless the principal may act on an object of `deployment` at `level`. Another deployment's object answers
 * 404 (as an unknown one: its existence is not told); an object of no deployment 403 `GLOBAL_SCOPE_REQUIRED` to a
 * principal limited to its deployments.
 */
export function assertCanReach(principal: Principal, deployment: string | null, what: string, level: AccessLevel = 'read'): void {
  if (deployment === null) {
    if (principal.isGlobal) return;
    throw errors.forbidden(`${what} belongs to no deployment: only a principal with global scope may reach it`, 'GLOBAL_SCOPE_REQUIRED');
  }
  const has = principal.deploymentLevel(deployment);
  if (!has) throw errors.notFound(`${what} not found`);
  if (levelRank(has) < levelRank(level)) throw errors.forbidden(`'${level}' access to deployment '${deployment}' required`);
}

/** Names of the containers a principal may see among an object's users (others' names carry their deployment). */
export const visibleNames = (principal: Principal, users: readonly { name: string; deployment: string | null }[]): string[] =>
  users
    .filter((u) => canReach(principal, u.deployment))
    .map((u) => u.name)
    .sort();
