/**
 * Redeploy and rollback: operations whose apply starts a job of the jobs service (one at a time per deployment:
 * the lane `deployment:<name>`), answered 202 with its id. `prepare` runs every check (the deployment, the strategy,
 * the services, the revision and its images, the files through the compose guard) and builds the plan preview; the
 * job runs the manager's redeploy or rollback, which checks again under the deployment's lock, records the
 * revision, and stops (its compose process killed) when the job is cancelled.
 */
import { join } from 'node:path';
import { defineOperation, errors, type PlanChange, type PlanSnapshot, type Principal } from '@agent/sdk';
import type { JobsService } from '@agent/plugin-jobs/api';
import type { ChangeContext, DeployResult, DeploymentManager } from '../manager.js';
import { RedeployInput, RollbackInput } from '../schemas.js';
import { DEFAULT_COMPOSE, ENV_FILE } from '../files.js';
import { predictedName } from '../plans.js';
import { diffChanges, revisionDiff } from '../revision-diff.js';
import { requireBackups } from '../deploy/backups.js';
import { strategyFor, swarmStrategyFor, SWARM_STRATEGY_NOTE, type DeployStrategy, type StrategyName } from '../deploy/strategies.js';

export type ChangeOperations = ReturnType<typeof changeOperations>;

/** What the operations need besides the manager. */
export interface ChangeDeps {
  jobs: () => JobsService | undefined;
  strategies: Map<StrategyName, DeployStrategy>;
  /** The audit record of a deploy job's end (the request that started it is audited by the kernel). */
  audit: (record: { principal: Principal | null; action: string; deployment: string; success: boolean; detail: Record<string, unknown> }) => Promise<void>;
}

export function requireJobs(jobs: JobsService | undefined): JobsService {
  if (!jobs) throw errors.unavailable('redeploys and rollbacks run as jobs: enable the jobs plugin', 'JOBS_UNAVAILABLE');
  return jobs;
}

/** What a deploy job asks for. */
export interface DeployJob {
  kind: 'deployment.redeploy' | 'deployment.rollback';
  deployment: string;
  title: string;
  principal: Principal | null;
  /** Who the audit record names when it is not the principal (a deploy hook). */
  actor?: { id: string; name: string };
  reason?: string;
  backup?: boolean;
  run(change: ChangeContext): Promise<DeployResult>;
}

export function changeOperations(manager: DeploymentManager, deps: ChangeDeps) {
  const files = ({ name }: { name: string }): PlanSnapshot => {
    const entry = manager.entries.get(name);
    const dir = entry?.dir ?? join(manager.root(), name);
    return { files: [join(dir, entry?.composeFile ?? DEFAULT_COMPOSE), join(dir, ENV_FILE)] };
  };

  /** The strategy a change of the deployment runs with: Swarm's update for a swarm deployment (see strategies.ts). */
  const strategyOf = (entry: { record: { runtime?: 'swarm' } }, name?: StrategyName) =>
    entry.record.runtime === 'swarm' ? swarmStrategyFor(name) : strategyFor(deps.strategies, name);
  /** What the answer of a swarm deployment's change says about how its tasks are replaced. */
  const noteOf = (strategy: DeployStrategy) => (strategy.name === 'swarm' ? { note: SWARM_STRATEGY_NOTE } : {});

  /** Starts a deploy job (409 JOB_IN_PROGRESS while another job of the deployment runs); its end is audited. */
  const startJob = (spec: DeployJob) => {
    const jobs = requireJobs(deps.jobs());
    return jobs.start<DeployResult>({
      kind: spec.kind,
      title: spec.title,
      deployment: spec.deployment,
      principal: spec.principal,
      lane: `deployment:${spec.deployment}`,
      run: async (job) => {
        const change: ChangeContext = {
          principal: spec.principal,
          reason: spec.reason ?? null,
          backup: spec.backup,
          jobId: job.id,
          signal: job.signal,
          output: (line) => job.output(line),
          progress: (step) => job.progress({ step }),
          report: (what) => job.report(what),
        };
        // Until the change touches the deployment, a cancel or a failure leaves it as it was; deployRun reports what
        // it left once it has begun.
        job.report({ deployment: spec.deployment, revision: null, changed: false, left: null });
        const audit = (success: boolean, detail: Record<string, unknown>) =>
          deps
            .audit({ principal: spec.principal, action: `${spec.kind}.finished`, deployment: spec.deployment, success, detail: { job_id: job.id, ...detail } })
            .catch(() => undefined);
        try {
          const result = await spec.run(change);
          await audit(true, { revision: result.revision, services: result.services, ...(spec.actor ? { actor: spec.actor.id } : {}) });
          return result;
        } catch (err) {
          await audit(false, { error: (err as Error).message.slice(0, 300), cancelled: job.signal.aborted, ...(spec.actor ? { actor: spec.actor.id } : {}) });
          throw err;
        }
      },
    });
  };

  const redeploy = defineOperation({
    name: 'deployments.redeploy',
    input: RedeployInput,
    resource: (input) => ({ type: 'deployment', id: input.name }),
    snapshot: files,
    prepare: async (input) => {
      const entry = manager.require(input.name);
      requireJobs(deps.jobs());
      const strategy = strategyOf(entry, input.strategy);
      if (input.backup) requireBackups(manager.opts.backups());
      const checked = await manager.checkRedeploy(entry, input.services);
      const defs = checked.model.services as Record<string, any>;
      const services = input.services ?? [...checked.services];
      const containers = manager.cache.containers(entry.name);
      const changes: PlanChange[] = [];
      for (const service of services) {
        const image = typeof defs[service]?.image === 'string' ? defs[service].image : '(build)';
        if (input.pull && defs[service]?.build === undefined) changes.push({ type: 'image', id: image, actions: ['update'], after: { pulled: true } });
        const existing = containers.filter((c) => c.service === service);
        if (!existing.length)
          changes.push({ type: 'container', id: predictedName(manager, entry.name, service, defs[service]), actions: ['create'], after: { service, image } });
        for (const c of existing)
          changes.push({
            type: 'container',
            id: c.name,
            actions: ['update'],
            before: { image: c.image, state: c.state },
            after: { service, image, recreated: true },
          });
      }
      if (input.backup) changes.push({ type: 'backup', id: entry.name, actions: ['create'] });
      // What the strategy will recreate instead (start-first: services it cannot switch through the proxy); the job
      // decides again when it runs, its result says what it did.
      const fallbacks = strategy.fallbacks?.({ deployment: entry.name, checked, services, containers }) ?? [];
      for (const f of fallbacks) changes.push({ type: 'fallback', id: f.service, actions: ['update'], after: { strategy: 'recreate', why: f.why } });
      return {
        value: { input, strategy, fallbacks },
        preview: { summary: `redeploy ${entry.name} (${strategy.name}): ${services.length} service(s)${input.pull ? ', images pulled first' : ''}`, changes },
      };
    },
    apply: ({ input, strategy, fallbacks }, { principal }) => {
      const job = startJob({
        kind: 'deployment.redeploy',
        deployment: input.name,
        title: `redeploy ${input.name}`,
        principal,
        reason: input.reason,
        backup: input.backup,
        run: (change) => manager.redeploy(input.name, { pull: input.pull, services: input.services, strategy }, change),
      });
      return { job_id: job.id, deployment: input.name, strategy: strategy.name, ...(strategy.fallbacks ? { fallbacks } : {}), ...noteOf(strategy) };
    },
  });

  const rollback = defineOperation({
    name: 'deployments.rollback',
    input: RollbackInput,
    resource: (input) => ({ type: 'deployment', id: input.name }),
    snapshot: files,
    prepare: async (input) => {
      const entry = manager.require(input.name);
      requireJobs(deps.jobs());
      const strategy = strategyOf(entry, input.strategy);
      if (input.backup) requireBackups(manager.opts.backups());
      const plan = await manager.checkRollback(entry, input.revision);
      const diff = await revisionDiff(manager, entry, plan.record, plan.env, plan.current);
      const volumes = {
        touched: false as const,
        note: 'volumes are not rolled back: their data stays as it is now; restore a backup for that',
        backup_before_revision: plan.record.backup_id,
      };
      const changes = diffChanges(entry, diff, plan.pins);
      changes.push({ type: 'volumes', id: entry.name, actions: ['no-op'], after: volumes });
      if (input.backup) changes.push({ type: 'backup', id: entry.name, actions: ['create'] });
      return {
        value: { input, strategy, pins: plan.pins, unpinned: plan.unpinned, volumes },
        preview: {
          summary: `roll ${entry.name} back to revision ${input.revision} (${strategy.name}): ${Object.keys(plan.pins).length} image(s) pinned; volumes not touched`,
          changes,
        },
      };
    },
    apply: ({ input, strategy, pins, unpinned, volumes }, { principal }) => {
      const job = startJob({
        kind: 'deployment.rollback',
        deployment: input.name,
        title: `roll ${input.name} back to revision ${input.revision}`,
        principal,
        reason: input.reason,
        backup: input.backup,
        run: (change) => manager.rollback(input.name, input.revision, { strategy }, change),
      });
      return { job_id: job.id, deployment: input.name, strategy: strategy.name, revision: input.revision, pins, unpinned, volumes, ...noteOf(strategy) };
    },
  });

  return { redeploy, rollback, startJob };
}
