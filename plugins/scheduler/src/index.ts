/**
 * scheduler: tasks on a cron schedule: back up a deployment (through the backups service), restart
 * it (or one service), or run a command (argv) inside one of its services. Executions are recorded by the core
 * scheduler with their status, bounded output and duration.
 */
import { definePlugin, optional, principalDirectory } from '@agent/sdk';
import { backupsService } from '@agent/plugin-backups/api';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { dockerService } from '@agent/plugin-docker/api';
import { taskOperations } from './operations/tasks.js';
import { executionRoutes } from './routes/executions.js';
import { taskRoutes } from './routes/tasks.js';
import { taskRunner } from './runner.js';
import { TaskStore, type TaskDoc } from './tasks.js';

export default definePlugin({
  name: 'scheduler',
  version: '0.1.0',
  description: 'Scheduled tasks: backups, restarts and commands inside deployment services',
  resources: { scheduler: { description: 'scheduled tasks and their executions (of a deployment)', operator: 'write', viewer: 'read', owner: 'deployment' } },
  deps: { deployments: deploymentsService, docker: dockerService, principals: principalDirectory, backups: optional(backupsService) },

  async setup(ctx, deps) {
    const tasks: TaskStore = new TaskStore(
      await ctx.store.document<TaskDoc>({ next_id: 1, tasks: [], owners: {} }, 'tasks'),
      ctx.scheduler,
      taskRunner(ctx, deps, () => tasks),
      ctx.log,
    );

    // Each change is an operation (src/operations); the routes (src/routes) run them.
    taskRoutes(
      ctx,
      tasks,
      taskOperations(tasks, deps.deployments, () => deps.backups !== undefined),
    );
    executionRoutes(ctx, tasks);

    ctx.events.on('deployment.deleted', async ({ name, retired_as }) => {
      // Removed, not disabled: a new deployment of the same name must not get them back. Executions stay, retired.
      await tasks.removeDeployment(name, retired_as);
    });

    return { start: () => tasks.armAll() };
  },
});
