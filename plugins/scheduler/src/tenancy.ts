/**
 * Who reaches which task and execution (the tenancy model, README "Tenancy"): tasks belong to their deployment.
 * Executions of a deleted deployment's tasks are kept under its retired name `<name>~<time>`, which no principal
 * limited to deployments holds a grant on: only global principals reach them, as they reach executions whose
 * task's deployment is unknown.
 */
import { levelRank, type AccessLevel, type Principal } from '@agent/sdk';

/** A live deployment name or a retired one (`<name>~<yyyymmddhhmmss>`). */
export const DEPLOYMENT_OR_RETIRED = '^[a-z0-9][a-z0-9_-]{0,62}(~[0-9]{14})?$';

export function canReach(p: Principal, deployment: string | null, level: AccessLevel = 'read'): boolean {
  if (deployment === null) return p.isGlobal;
  if (deployment.includes('~') && !p.isGlobal) return false;
  return levelRank(p.deploymentLevel(deployment)) >= levelRank(level);
}

/** For a route's `deployment` function: the deployment when the caller has some access to it, else undefined. */
export const boundIfVisible = (p: Principal, deployment: string | undefined): string | undefined =>
  deployment !== undefined && canReach(p, deployment) ? deployment : undefined;

/** The same 404 for an unknown task and another tenant's. */
export function assertVisible(p: Principal, deployment: string | undefined, notFound: () => Error): void {
  if (deployment === undefined || !canReach(p, deployment)) throw notFound();
}
