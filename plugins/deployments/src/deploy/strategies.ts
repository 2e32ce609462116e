/**
 * How a redeploy or a rollback replaces the containers of a deployment. A strategy gets the checked model that runs
 * and the guarded compose call of the deployment (every compose call still goes through the compose guard), under
 * the deployment's lock, with the job's signal: it must stop when the signal aborts.
 *
 * - `recreate` (today's behaviour): compose recreates the services' containers (`up -d --force-recreate`); each
 *   service is down from its old container stopping to its new one starting.
 * - `start-first` (zero downtime, issue 27) is not implemented yet: asking for it answers 400 STRATEGY_UNAVAILABLE.
 *   It plugs in here: a `DeployStrategy` named `start-first`, added to the map `deployStrategies` returns (given
 *   the services it needs, e.g. the edge plugin's upstream switch, as optional dependencies of this plugin). For each
 *   service with a healthcheck served through the agent's proxy it starts the new container beside the old one
 *   (through `compose`, e.g. `up -d --no-recreate --scale <service>=2` on the checked model), waits until healthy,
 *   points the upstream at it, drains and removes the old one; services without a healthcheck, with fixed host
 *   ports or a `container_name` go through `recreate` and are listed in `fallbacks` with why. A failed health check
 *   leaves the old container serving and rejects: the revision is then `failed`.
 */
import { errors } from '@agent/sdk';
import type { CheckedCompose, ComposeCommand } from '@agent/plugin-docker/api';

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
}

export const recreate: DeployStrategy = {
  name: 'recreate',
  async run({ services, compose }) {
    // Orphans (services the model no longer has) go too, unless only some services are redeployed.
    await compose({ command: 'up', forceRecreate: true, removeOrphans: !services, services }, 'redeploying');
    return { fallbacks: [] };
  },
};

/** The strategies this agent has. */
export function deployStrategies(): Map<StrategyName, DeployStrategy> {
  return new Map([[recreate.name, recreate]]);
}

/** The strategy a request asks for (`recreate` by default); 400 STRATEGY_UNAVAILABLE for one not implemented. */
export function strategyFor(strategies: Map<StrategyName, DeployStrategy>, name: StrategyName = 'recreate'): DeployStrategy {
  const found = strategies.get(name);
  if (!found)
    throw errors.badRequest(
      `strategy '${name}' is not available on this agent yet (zero-downtime redeploys through the proxy are planned); use 'recreate'`,
      'STRATEGY_UNAVAILABLE',
      { field: 'strategy', available: [...strategies.keys()] },
    );
  return found;
}
