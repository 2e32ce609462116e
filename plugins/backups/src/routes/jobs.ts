/** Routes of backup, restore and replication jobs (reads: jobs are started by the operations that need them). */
import { assertVisible, boundIfVisible, errors, Pagination, reply, Type, visibleDeployments, type PluginContext } from '@agent/sdk';
import { JobView, type Jobs } from '../jobs.js';
import { JOB_ID } from '../operations/common.js';
import { DeploymentFilter } from './backups.js';

export function registerJobRoutes(ctx: PluginContext, jobs: Jobs): void {
  ctx.route({
    method: 'GET',
    path: '/backups/jobs',
    permission: 'backups:read',
    operationId: 'backups.listJobs',
    summary: 'List backup, restore and replication jobs (newest first)',
    description:
      'A principal limited to its deployments sees their jobs only; jobs of no deployment (replications) and of deleted deployments (retired names) are for global principals.',
    query: Type.Object({
      deployment: Type.Optional(DeploymentFilter('only jobs of this deployment')),
      type: Type.Optional(Type.Union([Type.Literal('backup'), Type.Literal('restore'), Type.Literal('replicate')])),
      ...Pagination(50, 500),
    }),
    // A named deployment is checked by the core (404 for another tenant's); without one, the handler filters.
    deployment: (req) => req.query.deployment,
    tenancy: 'filtered',
    response: Type.Array(JobView),
    handler: (req) => {
      const { limit = 50, offset = 0, deployment, type } = req.query;
      // A global principal reaches every deployment; a scoped one exactly those of its grants (never `*`).
      const page = jobs.list({ deployment, deployments: deployment ? undefined : visibleDeployments(req.principal), type, limit, offset });
      return reply.page(page.items, { total: page.total, limit, offset });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/backups/jobs/:id',
    permission: 'backups:read',
    operationId: 'backups.getJob',
    summary: 'Status of a job: progress (step, bytes), error, timings, result',
    params: Type.Object({ id: Type.String({ pattern: JOB_ID }) }),
    deployment: (req) => boundIfVisible(req.principal, jobs.get(req.params.id)?.deployment),
    tenancy: 'filtered',
    response: JobView,
    errors: { 404: ['JOB_NOT_FOUND'] },
    handler: (req) => {
      const job = jobs.get(req.params.id);
      assertVisible(req.principal, job?.deployment, () => errors.notFound(`job '${req.params.id}' not found`, 'JOB_NOT_FOUND'));
      return job;
    },
  });
}
