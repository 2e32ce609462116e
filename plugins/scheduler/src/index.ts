/**
 * scheduler: tasks on a cron schedule: back up a deployment (through the backups service), restart
 * it (or one service), or run a command (argv) inside one of its services. Executions are recorded by the core
 * scheduler with their status, bounded output and duration.
 */
import {
  assertVisible,
  boundIfVisible,
  canReach,
  definePlugin,
  DEPLOYMENT_OR_RETIRED,
  deploymentName,
  errors,
  optional,
  Pagination,
  principalDirectory,
  RecordId,
  reply,
  Type,
} from '@agent/sdk';
import { backupsService } from '@agent/plugin-backups/api';
import { deploymentsService, type DeploymentsService } from '@agent/plugin-deployments/api';
import { dockerService, type DockerService } from '@agent/plugin-docker/api';
import { refusal } from './run-as.js';
import { ExecutionView, TASK_TYPES, TaskStore, TaskView, type TaskDoc, type TaskRecord } from './tasks.js';

/** Command output kept per execution (the core bounds the whole record too). */
const OUTPUT_LIMIT = 16 * 1024;
const SERVICE_NAME = '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$';
const COMMAND_TIMEOUT_MS = 10 * 60 * 1000;
/** Offsets beyond this are refused (400): executions are merged per task for a principal limited to deployments. */
const MAX_OFFSET = 10_000;
const Page = { ...Pagination(50, 500), offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0 })) };

export default definePlugin({
  name: 'scheduler',
  version: '0.1.0',
  description: 'Scheduled tasks: backups, restarts and commands inside deployment services',
  resources: { scheduler: { description: 'scheduled tasks and their executions (of a deployment)', operator: 'write', viewer: 'read', owner: 'deployment' } },
  deps: { deployments: deploymentsService, docker: dockerService, principals: principalDirectory, backups: optional(backupsService) },

  async setup(ctx, deps) {
    const deployments = (): DeploymentsService => deps.deployments;
    const docker = (): DockerService => deps.docker;

    const bounded = (text: string) => (text.length > OUTPUT_LIMIT ? `${text.slice(0, OUTPUT_LIMIT)}\n… (output truncated at ${OUTPUT_LIMIT} bytes)` : text);

    const run = async (task: TaskRecord, output: (line: string) => void): Promise<void> => {
      const name = task.deployment_name;
      if (!deployments().get(name)) {
        await tasks.disableDeployment(name, `deployment '${name}' no longer exists`);
        throw new Error(`deployment '${name}' no longer exists; the task was disabled`);
      }
      // Background work runs with its principal's rights of the moment, checked at every run (cron or manual).
      const refused = refusal(deps.principals, task);
      if (refused) {
        await tasks.disable(task.id, `not run: ${refused}`);
        await ctx
          .audit({
            action: 'scheduler.run_refused',
            resource_type: 'scheduler',
            resource_id: String(task.id),
            deployment: name,
            success: false,
            detail: { reason: refused, run_as: task.run_as?.id ?? null },
          })
          .catch(() => undefined); // the refusal is what the run reports (the kernel logs an audit failure)
        throw new Error(`not run: ${refused}; the task was disabled`);
      }
      if (task.task_type === 'backup') {
        const backups = deps.backups;
        if (!backups) throw new Error('the backups plugin is not enabled');
        const result = await backups.backup({
          deployment: name,
          trigger: 'task',
          created_by: `scheduler task ${task.id}`,
          retention: task.retention ?? undefined,
          description: task.description || `task ${task.id}`,
        });
        output(`backup ${result.backup_id} completed (${result.size} bytes, job ${result.job_id})`);
      } else if (task.task_type === 'restart') {
        if (task.service) {
          const container = await deployments().serviceContainer(name, task.service);
          if (!container) throw new Error(`service '${task.service}' of '${name}' has no container`);
          await docker().restartContainer(container.id);
          output(`restarted service ${task.service} of ${name}`);
        } else {
          await deployments().restart(name);
          output(`restarted ${name}`);
        }
      } else {
        const container = await deployments().serviceContainer(name, task.service!);
        if (!container || container.state !== 'running') throw new Error(`service '${task.service}' of '${name}' is not running`);
        const result = await docker().exec(container.id, task.command!, { timeoutMs: COMMAND_TIMEOUT_MS });
        if (result.stdout) output(bounded(result.stdout.replace(/\n$/, '')));
        if (result.stderr) output(bounded(`[stderr] ${result.stderr.replace(/\n$/, '')}`));
        if (result.exit_code !== 0) throw new Error(`command exited with ${result.exit_code}`);
      }
    };

    const tasks = new TaskStore(
      await ctx.store.document<TaskDoc>({ next_id: 1, tasks: [], owners: {} }, 'tasks'),
      ctx.scheduler,
      (task, output) => run(task, output),
      ctx.log,
    );

    /** Checks that the task can run: deployment, service, command, backups service. */
    const validate = async (t: Pick<TaskRecord, 'deployment_name' | 'task_type' | 'service' | 'command'>) => {
      const info = deployments().get(t.deployment_name);
      if (!info) throw errors.notFound(`deployment '${t.deployment_name}' not found`);
      if (t.task_type === 'command') {
        if (!t.service) throw errors.badRequest('body.service: a command task needs the service it runs in');
        if (!t.command?.length) throw errors.badRequest('body.command: a command task needs its argv (array of strings)');
      } else if (t.command) throw errors.badRequest(`body.command: only command tasks take a command`);
      if (t.task_type === 'backup' && !deps.backups) throw errors.badRequest('body.task_type: backup tasks need the backups plugin', 'BACKUPS_UNAVAILABLE');
      if (t.service) {
        const { parsed } = await deployments().compose(t.deployment_name);
        if (!parsed.services?.[t.service]) throw errors.badRequest(`body.service: deployment '${t.deployment_name}' has no service '${t.service}'`);
      }
    };

    const taskNotFound = (id: number) => () => errors.notFound(`task ${id} not found`, 'TASK_NOT_FOUND');
    /**
     * Task routes name the task's deployment to the core when the caller has some access to it (the core checks the
     * level); otherwise nothing, and the `filtered` handler answers the same 404 for an unknown and a foreign task.
     */
    const taskDeployment = (req: { principal: Parameters<typeof boundIfVisible>[0]; params: { id: number } }) =>
      boundIfVisible(req.principal, tasks.find(req.params.id)?.deployment_name);
    const visibleTask = (req: { principal: Parameters<typeof boundIfVisible>[0]; params: { id: number } }) => {
      const task = tasks.find(req.params.id);
      assertVisible(req.principal, task?.deployment_name, taskNotFound(req.params.id));
      return task!;
    };
    const runAs = (p: { id: string; name: string }) => ({ id: p.id, name: p.name });
    const Id = Type.Object({ id: RecordId('task id') });
    const Command = Type.Array(Type.String({ maxLength: 4096 }), { minItems: 1, maxItems: 64, description: 'argv, run without a shell' });

    ctx.route({
      method: 'GET',
      path: '/scheduler/tasks',
      permission: 'scheduler:read',
      operationId: 'scheduler.listTasks',
      summary: 'List scheduled tasks (of the deployments the caller reaches)',
      query: Type.Object({ deployment: Type.Optional(deploymentName()) }),
      deployment: (req) => req.query.deployment,
      tenancy: 'filtered',
      response: Type.Array(TaskView),
      handler: (req) =>
        tasks
          .list(req.query.deployment)
          .filter((t) => canReach(req.principal, t.deployment_name))
          .map((t) => tasks.view(t)),
    });

    ctx.route({
      method: 'POST',
      path: '/scheduler/tasks',
      permission: 'scheduler:write',
      operationId: 'scheduler.createTask',
      creates: 'id',
      status: 201,
      summary: 'Create a scheduled task (cron expression validated)',
      body: Type.Object({
        deployment_name: deploymentName(),
        task_type: Type.Union(TASK_TYPES.map((t) => Type.Literal(t))),
        cron_expr: Type.String({ minLength: 1, maxLength: 120, description: 'cron expression, 5 or 6 fields' }),
        action: Type.Optional(Type.String({ maxLength: 500, description: 'free text (may be empty)' })),
        description: Type.Optional(Type.String({ maxLength: 500 })),
        enabled: Type.Optional(Type.Boolean({ default: true })),
        service: Type.Optional(Type.String({ pattern: SERVICE_NAME })),
        command: Type.Optional(Command),
        retention: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
      }),
      deployment: (req) => req.body.deployment_name,
      response: TaskView,
      handler: async (req) => {
        const b = req.body;
        tasks.checkCron(b.cron_expr);
        const input = {
          deployment_name: b.deployment_name,
          task_type: b.task_type,
          cron_expr: b.cron_expr,
          action: b.action ?? '',
          description: b.description ?? '',
          enabled: b.enabled ?? true,
          service: b.service ?? null,
          command: b.command ?? null,
          retention: b.retention ?? null,
          created_by: req.principal.name,
          run_as: runAs(req.principal),
        };
        await validate(input);
        const task = await tasks.create(input);
        return reply.created(tasks.view(task), `task ${task.id} created`);
      },
    });

    ctx.route({
      method: 'GET',
      path: '/scheduler/tasks/:id',
      permission: 'scheduler:read',
      operationId: 'scheduler.getTask',
      summary: 'Task details (next run, last run)',
      params: Id,
      deployment: taskDeployment,
      tenancy: 'filtered',
      response: TaskView,
      handler: (req) => tasks.view(visibleTask(req)),
    });

    ctx.route({
      method: 'PUT',
      path: '/scheduler/tasks/:id',
      permission: 'scheduler:write',
      operationId: 'scheduler.updateTask',
      summary: 'Update a task (fields given are changed); it then runs with the rights of the caller',
      description:
        'Whoever changes a task (re-enabling it included) becomes the principal it runs as: every run checks that principal still holds scheduler:write and write access to the deployment (and backups:write for backup tasks).',
      params: Id,
      deployment: taskDeployment,
      tenancy: 'filtered',
      body: Type.Object({
        task_type: Type.Optional(Type.Union(TASK_TYPES.map((t) => Type.Literal(t)))),
        cron_expr: Type.Optional(Type.String({ minLength: 1, maxLength: 120 })),
        action: Type.Optional(Type.String({ maxLength: 500 })),
        description: Type.Optional(Type.String({ maxLength: 500 })),
        enabled: Type.Optional(Type.Boolean()),
        service: Type.Optional(Type.Union([Type.String({ pattern: SERVICE_NAME }), Type.Null()])),
        command: Type.Optional(Type.Union([Command, Type.Null()])),
        retention: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1000 }), Type.Null()])),
      }),
      response: TaskView,
      handler: async (req) => {
        const current = visibleTask(req);
        if (!canReach(req.principal, current.deployment_name, 'write')) throw errors.forbidden(`'write' access to the task's deployment required`);
        if (req.body.cron_expr !== undefined) tasks.checkCron(req.body.cron_expr);
        const next = { ...current, ...req.body };
        if (req.body.enabled || next.enabled) await validate(next);
        return tasks.view(await tasks.update(req.params.id, { ...req.body, run_as: runAs(req.principal) }));
      },
    });

    ctx.route({
      method: 'DELETE',
      path: '/scheduler/tasks/:id',
      permission: 'scheduler:write',
      operationId: 'scheduler.deleteTask',
      summary: 'Delete a task (its execution history stays)',
      params: Id,
      deployment: taskDeployment,
      tenancy: 'filtered',
      handler: async (req) => {
        const task = visibleTask(req);
        if (!canReach(req.principal, task.deployment_name, 'write')) throw errors.forbidden(`'write' access to the task's deployment required`);
        await tasks.delete(task.id);
        return reply.ok(null, `task ${req.params.id} deleted`);
      },
    });

    ctx.route({
      method: 'POST',
      path: '/scheduler/tasks/:id/run',
      permission: 'scheduler:write',
      operationId: 'scheduler.runTask',
      summary: 'Run a task now; answers with the recorded execution',
      description:
        'The run is checked like a scheduled one: the principal the task runs as must still hold its rights, otherwise the execution fails with the reason and the task is disabled.',
      params: Id,
      deployment: taskDeployment,
      tenancy: 'filtered',
      response: ExecutionView,
      handler: async (req) => {
        const task = visibleTask(req);
        if (!canReach(req.principal, task.deployment_name, 'write')) throw errors.forbidden(`'write' access to the task's deployment required`);
        if (!deployments().get(task.deployment_name)) throw errors.conflict(`deployment '${task.deployment_name}' no longer exists`, 'DEPLOYMENT_GONE');
        const execution = await tasks.runNow(task.id);
        return tasks.executions(task.id, 1, 0).find((e) => e.id === execution.id) ?? tasks.executions(task.id, 1, 0)[0];
      },
    });

    ctx.route({
      method: 'GET',
      path: '/scheduler/tasks/:id/executions',
      permission: 'scheduler:read',
      operationId: 'scheduler.taskExecutions',
      summary: 'Execution history of a task (newest first)',
      params: Id,
      deployment: taskDeployment,
      tenancy: 'filtered',
      query: Type.Object(Page),
      response: Type.Array(ExecutionView),
      handler: (req) => {
        visibleTask(req);
        return tasks.executions(req.params.id, req.query.limit ?? 50, req.query.offset ?? 0);
      },
    });

    ctx.route({
      method: 'GET',
      path: '/scheduler/executions',
      permission: 'scheduler:read',
      operationId: 'scheduler.recentExecutions',
      summary: 'Recent executions of every task (newest first)',
      description:
        'Executions of tasks of the deployments the caller reaches. Those of deleted deployments (`deployment` is the retired name) and of tasks whose deployment is unknown are for global principals.',
      query: Type.Object({
        deployment: Type.Optional(
          Type.String({ pattern: DEPLOYMENT_OR_RETIRED, description: 'only executions of tasks of this deployment (or retired name)' }),
        ),
        ...Page,
      }),
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

    ctx.events.on('deployment.deleted', async ({ name, retired_as }) => {
      // Removed, not disabled: a new deployment of the same name must not get them back. Executions stay, retired.
      await tasks.removeDeployment(name, retired_as);
    });

    return { start: () => tasks.armAll() };
  },
});
