/**
 * How a redeploy or a rollback replaces the containers of a deployment. A strategy gets the checked model that runs
 * and the guarded compose call of the deployment (every compose call still goes through the compose guard), under
 * the deployment's lock, with the job's signal: it must stop when the signal aborts.
 *
 * - `recreate` (today's behaviour): compose recreates the services' containers (`up -d --force-recreate`); each
 *   service is down from its old container stopping to its new one starting.
 * - `start-first` (zero downtime, issue 27, start-first.ts): for each service with a healthcheck served through the
 *   agent's proxy it starts the new container beside the old one (the guard's `start-beside` on the checked model),
 *   waits until healthy, points the upstream at it, drains and removes the old one; services without a healthcheck,
 *   with fixed host ports or a `container_name` go through `recreate` and are listed in `fallbacks` with why. A
 *   failed health check leaves the old container serving and rejects: the revision is then `failed`.
 */
import { errors } from '@agent/sdk';
import type { CheckedCompose, ComposeCommand, ContainerSummary } from '@agent/plugin-docker/api';
import { startFirst, type StartFirstDeps } from './start-first.js';

export type StrategyName = 'recreate' | 'start-first';

export interface StrategyRun {
  deployment: string;
  /** The model that runs (checked, pins applied). */
  checked: CheckedCompose;
  /** The services to replace; all of the model when absent. */
  services?: string[];
  /** Aborted when the job is cancelled or times out: stop at once (the compose call is killed with it). */
  signal: AbortSignal;
  output(line: string): void;
  /** A compose call on the checked model, through the guard; throws 502 COMPOSE_FAILED with compose's output. */
  compose(command: ComposeCommand, what: string): Promise<string>;
}

export interface StrategyOutcome {
  /** Services the strategy could not replace its way and recreated instead, with why. */
  fallbacks: { service: string; why: string }[];
}

export interface DeployStrategy {
  readonly name: StrategyName;
  run(run: StrategyRun): Promise<StrategyOutcome>;
  /** The services it would recreate instead, with why, as things are now (for the request's answer and its plan). */
  fallbacks?(input: { deployment: string; checked: CheckedCompose; services: string[]; containers: ContainerSummary[] }): StrategyOutcome['fallbacks'];
}

export const recreate: DeployStrategy = {
  name: 'recreate',
  async run({ services, compose }) {
    // Orphans (services the model no longer has) go too, unless only some services are redeployed.
    await compose({ command: 'up', forceRecreate: true, removeOrphans: !services, services }, 'redeploying');
    return { fallbacks: [] };
  },
};

/** The strategies this agent has (`start-first` with what it needs). */
export function deployStrategies(startFirstDeps?: StartFirstDeps): Map<StrategyName, DeployStrategy> {
  const all: DeployStrategy[] = [recreate, ...(startFirstDeps ? [startFirst(startFirstDeps)] : [])];
  return new Map(all.map((s) => [s.name, s]));
}

/** The strategy a request asks for (`recreate` by default); 400 STRATEGY_UNAVAILABLE for one not implemented. */
export function strategyFor(strategies: Map<StrategyName, DeployStrategy>, name: StrategyName = 'recreate'): DeployStrategy {
  const found = strategies.get(name);
  if (!found)
    throw errors.badRequest(`strategy '${name}' is not available on this agent; use 'recreate'`, 'STRATEGY_UNAVAILABLE', {
      field: 'strategy',
      available: [...strategies.keys()],
    });
  return found;
}
