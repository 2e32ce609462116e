/** Who sees which engine object: those of a deployment need access to it; the others only the route's permission. */
import { errors, type AccessLevel, type Principal } from '@agent/sdk';

export const canSee = (principal: Principal, deployment: string | null, level: AccessLevel = 'read'): boolean =>
  deployment === null || principal.canAccessDeployment(deployment, level);

/** 404 (not 403) so a principal cannot probe for objects of deployments it may not see. */
export function assertCanSee(principal: Principal, deployment: string | null, what: string, level: AccessLevel = 'read'): void {
  if (canSee(principal, deployment, 'read') && canSee(principal, deployment, level)) return;
  if (!canSee(principal, deployment, 'read')) throw errors.notFound(`${what} not found`);
  throw errors.forbidden(`'${level}' access to deployment '${deployment}' required`);
}
