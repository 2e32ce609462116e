/**
 * What a caller may see, from the principal the core forwarded (scope and deployment grants). A deployment's
 * containers, series, events and rules need access to it; what belongs to no deployment (containers outside any,
 * host metrics, rules of every container or of the host) is global: global principals only. Retired names
 * (`<name>~<time>`, what a deleted deployment left) are never granted, so they need a global principal too.
 */
import { levelRank, type AccessLevel, type Principal } from '@agent/sdk';

/** A global principal's level on every deployment (`*`): rules not tied to one deployment need it. */
export const hasGlobal = (p: Principal, level: AccessLevel): boolean => p.isGlobal && levelRank(p.deploymentLevel('*')) >= levelRank(level);

export const canUseRuleScope = (p: Principal, deployment: string | null, level: AccessLevel): boolean =>
  deployment === null ? hasGlobal(p, level) : p.canAccessDeployment(deployment, level);
