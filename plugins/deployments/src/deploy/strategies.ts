/**
 * How a redeploy or a rollback replaces the containers of a deployment. A strategy gets the checked model that runs
 * and the guarded compose call of the deployment (every compose call still goes through the compose guard), under
 * the deployment's lock, with the job's signal: it must stop when the signal aborts.
 *
 * - `recreate` (today's behaviour): compose recreates the services' containers (`up -d --force-recreate`); each
 *   service is down from its old container stopping to its new one starting.
 * - `start-first` (zero downtime, start-first.ts): for each service with a healthcheck served through the
 *   agent's proxy it starts the new container beside the old one (the guard's `start-beside` on the checked model),
 *   waits until healthy, points the upstream at it, drains and removes the old one; services without a healthcheck,
 *   with fixed host ports or a `container_name` go through `recreate` and are listed in `fallbacks` with why. A
 *   failed health check leaves the old container serving and rejects: the revision is then `failed`.
 */
import { errors } from '@agent/sdk';
import { startFirst, type StartFirstDeps } from './start-first.js';
import { recreate, swarmUpdate, type DeployStrategy, type StrategyName } from './strategy.js';

export { recreate, swarmUpdate, SWARM_STRATEGY_NOTE, type DeployStrategy, type StrategyName, type StrategyOutcome, type StrategyRun } from './strategy.js';

/** The strategies this agent has (`start-first` with what it needs). */
export function deployStrategies(startFirstDeps?: StartFirstDeps): Map<StrategyName, DeployStrategy> {
  const all: DeployStrategy[] = [recreate, ...(startFirstDeps ? [startFirst(startFirstDeps)] : [])];
  return new Map(all.map((s) => [s.name, s]));
}

/**
 * The strategy of a swarm deployment's redeploy or rollback: Swarm's own update (`swarmUpdate`). `recreate`, the
 * default of every caller (a deploy hook asks for it), means replacing the tasks; `start-first` is compose's and is
 * refused (400 STRATEGY_UNAVAILABLE): the services' `update_config` decides the order.
 */
export function swarmStrategyFor(name: StrategyName = 'recreate'): DeployStrategy {
  if (name !== 'recreate' && name !== 'swarm')
    throw errors.badRequest(
      `strategy '${name}' does not apply to a swarm deployment: Swarm replaces its tasks as each service's update_config says (start-first by default); leave strategy out`,
      'STRATEGY_UNAVAILABLE',
      { field: 'strategy', available: ['recreate'] },
    );
  return swarmUpdate;
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
