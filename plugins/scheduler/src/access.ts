/**
 * Who reaches a task: the principals that reach its deployment. Task routes name that deployment to the core when
 * the caller has some access to it (the core checks the level); otherwise nothing, and the `filtered` route answers
 * the same 404 for an unknown and a foreign task.
 */
import { assertVisible, boundIfVisible, canReach, errors, type Principal } from '@agent/sdk';
import type { TaskRecord, TaskStore } from './tasks.js';

const taskNotFound = (id: number) => () => errors.notFound(`task ${id} not found`, 'TASK_NOT_FOUND');

/** For a task route's `deployment`: the task's deployment when the caller reaches it. */
export const taskDeployment =
  (tasks: TaskStore) =>
  (req: { principal: Principal; params: { id: number } }): string | undefined =>
    boundIfVisible(req.principal, tasks.find(req.params.id)?.deployment_name);

/** The task, or the same 404 for an unknown one and one the principal may not see. */
export function visibleTask(tasks: TaskStore, principal: Principal, id: number): TaskRecord {
  const task = tasks.find(id);
  assertVisible(principal, task?.deployment_name, taskNotFound(id));
  return task!;
}

/** The task, when the principal may change it or run it: write access to its deployment. */
export function writableTask(tasks: TaskStore, principal: Principal, id: number): TaskRecord {
  const task = visibleTask(tasks, principal, id);
  if (!canReach(principal, task.deployment_name, 'write')) throw errors.forbidden(`'write' access to the task's deployment required`);
  return task;
}
