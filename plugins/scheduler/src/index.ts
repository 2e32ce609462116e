/**
 * scheduler: tasks on a cron schedule (2.10, 4.12): back up a deployment (through the backups service), restart
 * it (or one service), or run a command (argv) inside one of its services. Executions are recorded by the core
 * scheduler with their status, bounded output and duration.
 */
import {
  backupsService, definePlugin, deploymentName, deploymentsService, dockerService, errors, Pagination, reply, Type,
  type DeploymentsService, type DockerService, type Principal,
} from '@agent/sdk';
import { ExecutionView, TASK_TYPES, TaskStore, TaskView, type TaskRecord } from './tasks.js';

/** Command output kept per execution (the core bounds the whole record too). */
const OUTPUT_LIMIT = 16 * 1024;
const SERVICE_NAME = '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$';
const COMMAND_TIMEOUT_MS = 10 * 60 * 1000;

let arm: (() => void) | null = null;

export default definePlugin({
  name: 'scheduler',
  version: '0.1.0',
  description: 'Scheduled tasks: backups, restarts and commands inside deployment services',
  resources: { scheduler: { description: 'scheduled tasks and their executions', operator: 'write', viewer: 'read' } },
  requires: [deploymentsService, dockerService],
  optional: [backupsService],

  async setup(ctx) {
    const deployments = (): DeploymentsService => ctx.services.get(deploymentsService);
    const docker = (): DockerService => ctx.services.get(dockerService);

    const bounded = (text: string) => (text.length > OUTPUT_LIMIT ? `${text.slice(0, OUTPUT_LIMIT)}\n… (output truncated at ${OUTPUT_LIMIT} bytes)` : text);

    const run = async (task: TaskRecord, output: (line: string) => void): Promise<void> => {
      const name = task.deployment_name;
      if (!deployments().get(name)) {
        await tasks.disableDeployment(name, `deployment '${name}' no longer exists`);
        throw new Error(`deployment '${name}' no longer exists; the task was disabled`);
      }
      if (task.task_type === 'backup') {
        const backups = ctx.services.optional(backupsService);
        if (!backups) throw new Error('the backups plugin is not enabled');
        const result = await backups.backup({ deployment: name, trigger: 'task', created_by: `scheduler task ${task.id}`, retention: task.retention ?? undefined, description: task.description || `task ${task.id}` });
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
      await ctx.store.document({ next_id: 1, tasks: [] as TaskRecord[] }, 'tasks'),
      ctx.scheduler, (task, output) => run(task, output), ctx.log,
    );

    /** Checks that the task can run: deployment, service, command, backups service. */
    const validate = async (t: Pick<TaskRecord, 'deployment_name' | 'task_type' | 'service' | 'command'>) => {
      const info = deployments().get(t.deployment_name);
      if (!info) throw errors.notFound(`deployment '${t.deployment_name}' not found`);
      if (t.task_type === 'command') {
        if (!t.service) throw errors.badRequest('body.service: a command task needs the service it runs in');
        if (!t.command?.length) throw errors.badRequest('body.command: a command task needs its argv (array of strings)');
      } else if (t.command) throw errors.badRequest(`body.command: only command tasks take a command`);
      if (t.task_type === 'backup' && !ctx.services.optional(backupsService)) throw errors.badRequest('body.task_type: backup tasks need the backups plugin', 'BACKUPS_UNAVAILABLE');
      if (t.service) {
        const { parsed } = await deployments().compose(t.deployment_name);
        if (!parsed.services?.[t.service]) throw errors.badRequest(`body.service: deployment '${t.deployment_name}' has no service '${t.service}'`);
      }
    };

    const visible = (p: Principal, t: TaskRecord) => p.canAccessDeployment(t.deployment_name);
    const taskDeployment = (id: number) => tasks.find(id)?.deployment_name;
    const Id = Type.Object({ id: Type.Integer({ minimum: 1 }) });
    const Command = Type.Array(Type.String({ maxLength: 4096 }), { minItems: 1, maxItems: 64, description: 'argv, run without a shell' });

    ctx.route({
      method: 'GET', path: '/scheduler/tasks', permission: 'scheduler:read', operationId: 'scheduler.listTasks',
      summary: 'List scheduled tasks', query: Type.Object({ deployment: Type.Optional(deploymentName()) }),
      response: Type.Array(TaskView),
      handler: (req) => tasks.list(req.query.deployment).filter((t) => visible(req.principal, t)).map((t) => tasks.view(t)),
    });

    ctx.route({
      method: 'POST', path: '/scheduler/tasks', permission: 'scheduler:write', operationId: 'scheduler.createTask', status: 201,
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
          deployment_name: b.deployment_name, task_type: b.task_type, cron_expr: b.cron_expr, action: b.action ?? '', description: b.description ?? '',
          enabled: b.enabled ?? true, service: b.service ?? null, command: b.command ?? null, retention: b.retention ?? null, created_by: req.principal.name,
        };
        await validate(input);
        const task = await tasks.create(input);
        return reply.created(tasks.view(task), `task ${task.id} created`);
      },
    });

    ctx.route({
      method: 'GET', path: '/scheduler/tasks/:id', permission: 'scheduler:read', operationId: 'scheduler.getTask',
      summary: 'Task details (next run, last run)', params: Id, deployment: (req) => taskDeployment(req.params.id),
      response: TaskView,
      handler: (req) => tasks.view(tasks.get(req.params.id)),
    });

    ctx.route({
      method: 'PUT', path: '/scheduler/tasks/:id', permission: 'scheduler:write', operationId: 'scheduler.updateTask',
      summary: 'Update a task (fields given are changed)', params: Id, deployment: (req) => taskDeployment(req.params.id),
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
        const current = tasks.get(req.params.id);
        if (req.body.cron_expr !== undefined) tasks.checkCron(req.body.cron_expr);
        const next = { ...current, ...req.body };
        if (req.body.enabled || next.enabled) await validate(next);
        return tasks.view(await tasks.update(req.params.id, req.body));
      },
    });

    ctx.route({
      method: 'DELETE', path: '/scheduler/tasks/:id', permission: 'scheduler:write', operationId: 'scheduler.deleteTask',
      summary: 'Delete a task (its execution history stays)', params: Id, deployment: (req) => taskDeployment(req.params.id),
      handler: async (req) => {
        await tasks.delete(req.params.id);
        return reply.ok(null, `task ${req.params.id} deleted`);
      },
    });

    ctx.route({
      method: 'POST', path: '/scheduler/tasks/:id/run', permission: 'scheduler:write', operationId: 'scheduler.runTask',
      summary: 'Run a task now; answers with the recorded execution', params: Id, deployment: (req) => taskDeployment(req.params.id),
      response: ExecutionView,
      handler: async (req) => {
        const task = tasks.get(req.params.id);
        if (!deployments().get(task.deployment_name)) throw errors.conflict(`deployment '${task.deployment_name}' no longer exists`, 'DEPLOYMENT_GONE');
        const execution = await tasks.runNow(task.id);
        return tasks.executions(task.id, 1, 0).find((e) => e.id === execution.id) ?? tasks.executions(task.id, 1, 0)[0];
      },
    });

    ctx.route({
      method: 'GET', path: '/scheduler/tasks/:id/executions', permission: 'scheduler:read', operationId: 'scheduler.taskExecutions',
      summary: 'Execution history of a task (newest first)', params: Id, deployment: (req) => taskDeployment(req.params.id),
      query: Type.Object({ ...Pagination(50, 500) }),
      response: Type.Array(ExecutionView),
      handler: (req) => {
        tasks.get(req.params.id);
        return tasks.executions(req.params.id, req.query.limit ?? 50, req.query.offset ?? 0);
      },
    });

    ctx.route({
      method: 'GET', path: '/scheduler/executions', permission: 'scheduler:read', operationId: 'scheduler.recentExecutions',
      summary: 'Recent executions of every task (newest first)',
      query: Type.Object({ ...Pagination(50, 500) }),
      response: Type.Array(ExecutionView),
      handler: (req) => {
        const all = tasks.recent(req.query.limit ?? 50, req.query.offset ?? 0);
        if (req.principal.isAdmin) return all;
        return all.filter((e) => {
          const t = tasks.find(e.task_id);
          return t ? visible(req.principal, t) : false;
        });
      },
    });

    ctx.events.on('deployment.deleted', async ({ name }) => {
      await tasks.disableDeployment(name, `deployment '${name}' was deleted`);
    });

    arm = () => tasks.armAll();
  },

  start() {
    arm?.();
  },
});
