/** GET /api/scheduler/executions: recent executions of every task the caller reaches (a read, filtered). */
import { canReach, Type, type PluginContext } from '@agent/sdk';
import { RecentExecutionsQuery } from '../schemas.js';
import { ExecutionView, type TaskStore } from '../tasks.js';

export function executionRoutes(ctx: PluginContext, tasks: TaskStore): void {
  ctx.route({
    method: 'GET',
    path: '/scheduler/executions',
    permission: 'scheduler:read',
    operationId: 'scheduler.recentExecutions',
    summary: 'Recent executions of every task (newest first)',
    description:
      'Executions of tasks of the deployments the caller reaches. Those of deleted deployments (`deployment` is the retired name) and of tasks whose deployment is unknown are for global principals.',
    query: RecentExecutionsQuery,
    deployment: (req) => req.query.deployment,
    tenancy: 'filtered',
    response: Type.Array(ExecutionView),
    handler: (req) => {
      const limit = req.query.limit ?? 50;
      const offset = req.query.offset ?? 0;
      const only = req.query.deployment;
      if (!only && req.principal.isGlobal) return tasks.recent(limit, offset);
      const ids = tasks
        .knownIds()
        .filter((t) => (only ? t.deployment === only : canReach(req.principal, t.deployment)))
        .map((t) => t.id);
      return tasks.recentOf(ids, limit, offset);
    },
  });
}
