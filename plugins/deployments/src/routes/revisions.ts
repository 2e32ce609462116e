/**
 * Revisions (reads) and the changes that run as jobs: redeploy and rollback (operations, plannable, 202 with the
 * job). A deleted deployment's revisions are read under its retired name (`<name>~<time>`, global principals).
 */
import { errors, isRetiredName, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import type { ChangeOperations } from '../operations/changes.js';
import type { Revisions } from '../revisions.js';
import { revisionDiff } from '../revision-diff.js';
import { redactEnv } from '../env-file.js';
import { NameParams, Redeploy, RevisionDetails, RevisionParams, RevisionSummary, RevisionsParams, Rollback, StartedJob, StartedRollback } from '../schemas.js';

/** What a redeploy or a rollback may answer besides its 202 (the checks of the files, the job's lane, the parts it needs). */
export const DEPLOY_ERRORS = {
  400: ['STRATEGY_UNAVAILABLE', 'HOST_SAFETY', 'INVALID_COMPOSE', 'INVALID_YAML'],
  409: ['JOB_IN_PROGRESS', 'PLAN_STALE'],
  503: ['JOBS_UNAVAILABLE', 'BACKUPS_UNAVAILABLE', 'DOCKER_UNAVAILABLE', 'COMPOSE_UNAVAILABLE'],
} as const;

export function revisionRoutes(ctx: PluginContext<any>, manager: DeploymentManager, revisions: Revisions, ops: ChangeOperations): void {
  /** A live deployment (404 when unknown), or a retired name whose revisions are kept. */
  const owner = (name: string) => (isRetiredName(name) ? null : manager.require(name));

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/revisions',
    permission: 'deployments:read',
    operationId: 'deployments.revisions',
    tag: 'deployments',
    summary: 'Revisions of a deployment, newest first (paginated)',
    description:
      'Every change (create, update, redeploy, rollback) is a revision: who, when, why, the outcome, the image each service ran (id and registry digest), the backup taken first. The newest `deployments.revisions_keep` (setting, default 20) are kept. A deleted deployment keeps its revisions under its retired name (`<name>~<time>`, global principals).',
    params: RevisionsParams,
    deployment: 'name',
    query: Type.Object({
      limit: Type.Integer({ minimum: 1, maximum: 200, default: 20 }),
      offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
    }),
    response: Type.Array(RevisionSummary),
    handler: (req) => {
      owner(req.params.name);
      const { items, total } = revisions.list(req.params.name, req.query.limit, req.query.offset);
      return reply.page(items, { total, limit: req.query.limit, offset: req.query.offset });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/revisions/:rev',
    permission: 'deployments:read',
    operationId: 'deployments.revision',
    tag: 'deployments',
    summary: 'One revision: its compose file and checked model, its `.env` (secrets redacted), its images, and a diff against the deployment now',
    description:
      '`diff`: the compose diff from the current file to the revision’s, the `.env` keys that differ (never values) and the image of each service now and in the revision: what a rollback to it would change. Null for a deleted deployment’s revision.',
    params: RevisionParams,
    deployment: 'name',
    response: RevisionDetails,
    errors: { 404: ['REVISION_NOT_FOUND'] },
    handler: async (req) => {
      const entry = owner(req.params.name);
      const record = revisions.get(req.params.name, req.params.rev);
      if (!record) throw errors.notFound(`deployment '${req.params.name}' has no revision ${req.params.rev}`, 'REVISION_NOT_FOUND');
      const env = revisions.env(record);
      const { env_sealed: _sealed, model_hash: _hash, ...rest } = record;
      return { ...rest, env: redactEnv(env), diff: entry ? await revisionDiff(manager, entry, record, env) : null };
    },
  });

  ctx.route(
    operationRoute(ops.redeploy, {
      method: 'POST',
      path: '/deployments/:name/redeploy',
      permission: 'deployments:write',
      tag: 'deployments',
      status: 202,
      summary: 'Redeploy (a job): pull the images when asked, then replace the containers of the services',
      description:
        'Answers 202 with the job (`GET /api/jobs/:id`, `/api/jobs/:id/stream`; cancel with `POST /api/jobs/:id/cancel`: the compose process stops within 5 s and the job and the revision say what was left). One deploy job at a time per deployment (409 `JOB_IN_PROGRESS` with `job_id`). Runs the files as they are: images a rollback pinned are resolved from their tags again. `strategy: recreate` (default) recreates the containers; `start-first` replaces each service with a healthcheck that a domain of the proxy routes to without downtime (new container beside the old, healthy, proxy switched, old drained and removed) and recreates the others, listed in `fallbacks` with why (all of them without the edge plugin). A new container that is not healthy in time is removed and the old one keeps serving: the job fails with `HEALTH_CHECK_FAILED`, the revision is `failed` and `deployment.failed` is sent. 503 `JOBS_UNAVAILABLE` without the jobs plugin.',
      params: NameParams,
      deployment: 'name',
      body: Redeploy,
      response: StartedJob,
      errors: DEPLOY_ERRORS,
      plannable: true,
      input: (req) => ({ ...req.body, name: req.params.name }),
      respond: (started) => reply.accepted(started, `redeploy of ${started.deployment} started (job ${started.job_id})`),
    }),
  );

  ctx.route(
    operationRoute(ops.rollback, {
      method: 'POST',
      path: '/deployments/:name/rollback',
      permission: 'deployments:write',
      tag: 'deployments',
      status: 202,
      summary: 'Roll back to a revision (a job): its compose file and `.env`, each service on the image that revision ran',
      description:
        'Writes back the revision’s compose file and `.env` and runs them with every service pinned to the image the revision ran (`repo@sha256:…`, or the image id for an image built or tagged on this host), through the compose guard like any file; the pins stay for later starts until the compose file changes or a redeploy. 409 `IMAGE_MISSING` (with `service`, `image`) when an image is no longer on the host, 404 `REVISION_NOT_FOUND`, 409 `REVISION_NOT_RESTORABLE` for a revision that did not succeed. Volumes are not touched: the answer says so and names the backup taken before that revision, if one was. The plan (`?plan=true`) shows the compose diff, the `.env` keys and the images it pins. A rollback is a revision itself. Answers 202 with the job.',
      params: NameParams,
      deployment: 'name',
      body: Rollback,
      response: StartedRollback,
      errors: { ...DEPLOY_ERRORS, 404: ['REVISION_NOT_FOUND'], 409: [...DEPLOY_ERRORS[409], 'IMAGE_MISSING', 'REVISION_NOT_RESTORABLE', 'PIN_FAILED'] },
      plannable: true,
      input: (req) => ({ ...req.body, name: req.params.name }),
      respond: (started) =>
        reply.accepted(started, `rollback of ${started.deployment} to revision ${started.revision} started (job ${started.job_id}); volumes are not touched`),
    }),
  );
}
