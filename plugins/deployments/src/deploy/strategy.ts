/** What a deploy strategy is (strategies.ts lists them): its run, its outcome, and `recreate`, the fallback of all. */
import type { CheckedCompose, ComposeCommand, ContainerSummary } from '@agent/plugin-docker/api';

export type StrategyName = 'recreate' | 'start-first' | 'swarm';

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

/**
 * Swarm deployments (`runtime: swarm`): `docker stack deploy` of the model, then a forced update of the services
 * (all, or those named), so that every task is replaced even when the spec did not change (a tag that names another
 * image now is resolved again by the new tasks). Swarm replaces the tasks as each service's `update_config` says
 * (start-first, one at a time, rolled back when a new task fails within 10 s, unless the file says otherwise):
 * compose's strategies do not apply.
 */
export const swarmUpdate: DeployStrategy = {
  name: 'swarm',
  async run({ services, compose }) {
    await compose({ command: 'up', forceRecreate: true, removeOrphans: !services, services }, 'redeploying');
    return { fallbacks: [] };
  },
};

/** What the answer of a swarm deployment's redeploy or rollback says about how its tasks are replaced. */
export const SWARM_STRATEGY_NOTE =
  "Swarm replaces the tasks as each service's update_config says (unless the file says otherwise: start-first, one task at a time, rolled back when a new task fails within 10 s); when the change fails, the agent rolls the whole stack back to the last revision that succeeded";
