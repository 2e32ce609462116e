/**
 * /api/scheduler/tasks: list, get and a task's executions (reads), create, update, delete and run now (operations).
 * A task route names the task's deployment to the core when the caller reaches it, else it is `filtered`.
 */
import { canReach, mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { COMPOSE_ERRORS } from '@agent/plugin-docker/api';
import { taskDeployment, visibleTask } from '../access.js';
import type { TaskOperations } from '../operations/tasks.js';
import { CreateTask, ExecutionsPage, ListTasksQuery, TaskId, UpdateTask } from '../schemas.js';
import { ExecutionView, TaskView, type TaskStore } from '../tasks.js';

/** An unknown task, or one of a deployment the caller does not reach (access.ts). */
const UNKNOWN_TASK = { 404: ['TASK_NOT_FOUND'] } as const;
/**
 * What checking that a task can run answers (operations/tasks.ts `assertRunnable`): its cron expression, the backups
 * plugin, and the deployment's compose model when a service is named (read through the compose guard).
 */
const RUNNABLE_ERRORS = mergeErrors(COMPOSE_ERRORS, { 400: ['INVALID_CRON', 'BACKUPS_UNAVAILABLE'] });

export function taskRoutes(ctx: PluginContext, tasks: TaskStore, ops: TaskOperations): void {
  collectionRoutes(ctx, tasks, ops);
  oneTaskRoutes(ctx, tasks, ops);
}

function collectionRoutes(ctx: PluginContext, tasks: TaskStore, ops: TaskOperations): void {
  ctx.route({
    method: 'GET',
    path: '/scheduler/tasks',
    permission: 'scheduler:read',
    operationId: 'scheduler.listTasks',
    summary: 'List scheduled tasks (of the deployments the caller reaches)',
    query: ListTasksQuery,
    deployment: (req) => req.query.deployment,
    tenancy: 'filtered',
    response: Type.Array(TaskView),
    handler: (req) =>
      tasks
        .list(req.query.deployment)
        .filter((t) => canReach(req.principal, t.deployment_name))
        .map((t) => tasks.view(t)),
  });

  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/scheduler/tasks',
      permission: 'scheduler:write',
      creates: 'id',
      status: 201,
      summary: 'Create a scheduled task (cron expression validated)',
      body: CreateTask,
      deployment: (req) => req.body.deployment_name,
      response: TaskView,
      errors: RUNNABLE_ERRORS,
      input: (req) => req.body,
      respond: (task) => reply.created(task, `task ${task.id} created`),
    }),
  );
}

/** One task: get, update, delete, run now, and its executions. */
function oneTaskRoutes(ctx: PluginContext, tasks: TaskStore, ops: TaskOperations): void {
  const bound = { params: TaskId, deployment: taskDeployment(tasks), tenancy: 'filtered' as const };

  ctx.route({
    ...bound,
    method: 'GET',
    path: '/scheduler/tasks/:id',
    permission: 'scheduler:read',
    operationId: 'scheduler.getTask',
    summary: 'Task details (next run, last run)',
    response: TaskView,
    errors: UNKNOWN_TASK,
    handler: (req) => tasks.view(visibleTask(tasks, req.principal, req.params.id)),
  });

  ctx.route(
    operationRoute(ops.update, {
      ...bound,
      method: 'PUT',
      path: '/scheduler/tasks/:id',
      permission: 'scheduler:write',
      summary: 'Update a task (fields given are changed); it then runs with the rights of the caller',
      description:
        'Whoever changes a task (re-enabling it included) becomes the principal it runs as: every run checks that principal still holds scheduler:write and write access to the deployment (and backups:write for backup tasks).',
      body: UpdateTask,
      response: TaskView,
      errors: mergeErrors(RUNNABLE_ERRORS, UNKNOWN_TASK),
      input: (req) => ({ ...req.body, id: req.params.id }),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      ...bound,
      method: 'DELETE',
      path: '/scheduler/tasks/:id',
      permission: 'scheduler:write',
      summary: 'Delete a task (its execution history stays)',
      response: Type.Null(),
      errors: UNKNOWN_TASK,
      input: (req) => req.params,
      respond: (id) => reply.ok(null, `task ${id} deleted`),
    }),
  );

  ctx.route(
    operationRoute(ops.run, {
      ...bound,
      method: 'POST',
      path: '/scheduler/tasks/:id/run',
      permission: 'scheduler:write',
      summary: 'Run a task now; answers with the recorded execution',
      description:
        'The run is checked like a scheduled one: the principal the task runs as must still hold its rights, otherwise the execution fails with the reason and the task is disabled.',
      response: ExecutionView,
      // What the run itself meets is its execution's outcome, not the answer's.
      errors: mergeErrors(UNKNOWN_TASK, { 409: ['DEPLOYMENT_GONE'] }),
      input: (req) => req.params,
    }),
  );

  ctx.route({
    ...bound,
    method: 'GET',
    path: '/scheduler/tasks/:id/executions',
    permission: 'scheduler:read',
    operationId: 'scheduler.taskExecutions',
    summary: 'Execution history of a task (newest first)',
    query: ExecutionsPage,
    response: Type.Array(ExecutionView),
    errors: UNKNOWN_TASK,
    handler: (req) => {
      visibleTask(tasks, req.principal, req.params.id);
      return tasks.executions(req.params.id, req.query.limit ?? 50, req.query.offset ?? 0);
    },
  });
}
