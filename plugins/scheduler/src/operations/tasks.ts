/**
 * The changes of scheduled tasks as operations: create, update, delete, and run now. `prepare` runs every check (the
 * task is visible and its deployment writable to the caller, the cron expression, and that the task can run: its
 * deployment, service, command, the backups service) and gives `apply` the task record or patch it stores, or the
 * task it runs. Whoever creates or changes a task becomes the principal it runs as (`run_as`).
 */
import { defineOperation, errors, type Principal } from '@agent/sdk';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import { writableTask } from '../access.js';
import { CreateTask, TaskId, UpdateTaskInput } from '../schemas.js';
import type { TaskRecord, TaskStore } from '../tasks.js';

export type TaskOperations = ReturnType<typeof taskOperations>;

const runAs = (p: Principal) => ({ id: p.id, name: p.name });
const aboutTask = (input: { id: number }) => ({ type: 'task', id: String(input.id) });

export function taskOperations(tasks: TaskStore, deployments: DeploymentsService, backupsEnabled: () => boolean) {
  /** Checks that the task can run: deployment, service, command, backups service. */
  const assertRunnable = async (t: Pick<TaskRecord, 'deployment_name' | 'task_type' | 'service' | 'command'>) => {
    const info = deployments.get(t.deployment_name);
    if (!info) throw errors.notFound(`deployment '${t.deployment_name}' not found`);
    if (t.task_type === 'command') {
      if (!t.service) throw errors.badRequest('body.service: a command task needs the service it runs in');
      if (!t.command?.length) throw errors.badRequest('body.command: a command task needs its argv (array of strings)');
    } else if (t.command) throw errors.badRequest(`body.command: only command tasks take a command`);
    if (t.task_type === 'backup' && !backupsEnabled()) throw errors.badRequest('body.task_type: backup tasks need the backups plugin', 'BACKUPS_UNAVAILABLE');
    if (t.service) {
      const { parsed } = await deployments.compose(t.deployment_name);
      if (!parsed.services?.[t.service]) throw errors.badRequest(`body.service: deployment '${t.deployment_name}' has no service '${t.service}'`);
    }
  };

  const create = defineOperation({
    name: 'scheduler.createTask',
    input: CreateTask,
    resource: (input) => ({ type: 'deployment', id: input.deployment_name }),
    prepare: async (b, { principal }) => {
      tasks.checkCron(b.cron_expr);
      const task = {
        deployment_name: b.deployment_name,
        task_type: b.task_type,
        cron_expr: b.cron_expr,
        action: b.action ?? '',
        description: b.description ?? '',
        enabled: b.enabled ?? true,
        service: b.service ?? null,
        command: b.command ?? null,
        retention: b.retention ?? null,
        created_by: principal.name,
        run_as: runAs(principal),
      };
      await assertRunnable(task);
      return {
        value: task,
        preview: { summary: `${task.task_type} task of ${task.deployment_name}`, changes: [{ type: 'task', id: 'new', actions: ['create'], after: task }] },
      };
    },
    apply: async (task) => tasks.view(await tasks.create(task)),
  });

  const update = defineOperation({
    name: 'scheduler.updateTask',
    input: UpdateTaskInput,
    resource: aboutTask,
    prepare: async ({ id, ...fields }, { principal }) => {
      const current = writableTask(tasks, principal, id);
      if (fields.cron_expr !== undefined) tasks.checkCron(fields.cron_expr);
      const next = { ...current, ...fields };
      if (fields.enabled || next.enabled) await assertRunnable(next);
      const patch = { ...fields, run_as: runAs(principal) };
      return {
        value: { id, patch },
        preview: { summary: `task ${id}`, changes: [{ type: 'task', id: String(id), actions: ['update'], before: current, after: next }] },
      };
    },
    apply: async ({ id, patch }) => tasks.view(await tasks.update(id, patch)),
  });

  const remove = defineOperation({
    name: 'scheduler.deleteTask',
    input: TaskId,
    resource: aboutTask,
    prepare: ({ id }, { principal }) => {
      const task = writableTask(tasks, principal, id);
      return { value: task.id, preview: { summary: `task ${id}`, changes: [{ type: 'task', id: String(id), actions: ['delete'], before: task }] } };
    },
    apply: async (id) => {
      await tasks.delete(id);
      return id;
    },
  });

  const run = defineOperation({
    name: 'scheduler.runTask',
    input: TaskId,
    resource: aboutTask,
    prepare: ({ id }, { principal }) => {
      const task = writableTask(tasks, principal, id);
      if (!deployments.get(task.deployment_name)) throw errors.conflict(`deployment '${task.deployment_name}' no longer exists`, 'DEPLOYMENT_GONE');
      // The rights of the principal the task runs as are checked by the run itself, as for a cron run.
      return { value: task.id, preview: { summary: `run task ${id} now`, changes: [{ type: 'task', id: String(id), actions: ['no-op'] }] } };
    },
    apply: async (id) => {
      const execution = await tasks.runNow(id);
      return tasks.executions(id, 1, 0).find((e) => e.id === execution.id) ?? tasks.executions(id, 1, 0)[0];
    },
  });

  return { create, update, remove, run };
}
