/** What a caller may see, from the grants the core forwarded. */
import { levelRank, type AccessLevel, type Principal } from '@agent/sdk';

/**
 * Containers of a deployment need access to it; containers outside any deployment are visible to whoever holds
 * the route's permission (the same rule as the docker plugin's container list).
 */
export const canSeeContainer = (p: Principal, deployment: string | null): boolean =>
  deployment === null || p.canAccessDeployment(deployment);

/** Access to every deployment (a `*` grant): needed for rules that are not tied to one deployment. */
export const hasGlobal = (p: Principal, level: AccessLevel): boolean => levelRank(p.deployments['*'] ?? null) >= levelRank(level);

export const canUseRuleScope = (p: Principal, deployment: string | null, level: AccessLevel): boolean =>
  deployment === null ? hasGlobal(p, level) : p.canAccessDeployment(deployment, level);
