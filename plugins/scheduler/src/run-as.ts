/**
 * Background work re-checks its principal at every run: a task runs with the rights, of the moment, of whoever
 * created or last changed it (`run_as`). Looked up through the principal directory each time: a deleted or
 * deactivated user, a revoked or expired key, a removed grant or a lowered role stop the task.
 */
import { principalFrom, type PrincipalDirectory, type PrincipalInfo } from '@agent/sdk';
import type { TaskRecord } from './tasks.js';

/** The principal behind `user:<id>` / `api_key:<id>` as the core would build it now; null when it cannot act. */
function current(principals: PrincipalDirectory, id: string): PrincipalInfo | null {
  const m = /^(user|api_key):([0-9]{1,15})$/.exec(id);
  if (!m) return null;
  return principals.principalById(id);
}

/** Why the task may not run now, or null when its principal still holds what it needs. */
export function refusal(principals: PrincipalDirectory, task: Pick<TaskRecord, 'deployment_name' | 'task_type' | 'run_as'>): string | null {
  const runAs = task.run_as ?? null;
  // Tasks from before the check have no recorded principal: running them as the system is what the check ends.
  if (!runAs) return 'the task has no recorded creator (it predates per-creator checks): re-enable it to run it with your rights';
  if (runAs.id.startsWith('system:')) return `the task was created by the system principal ${runAs.id}, which does not run tasks`;
  const info = current(principals, runAs.id);
  if (!info) return `its creator ${runAs.name} (${runAs.id}) can no longer act: deleted or deactivated, or the key was revoked or has expired`;
  const p = principalFrom(info);
  if (!p.can('scheduler:write')) return `its creator ${runAs.name} (${runAs.id}) no longer holds 'scheduler:write'`;
  if (!p.canAccessDeployment(task.deployment_name, 'write'))
    return `its creator ${runAs.name} (${runAs.id}) no longer has write access to deployment '${task.deployment_name}'`;
  if (task.task_type === 'backup' && !p.can('backups:write')) return `its creator ${runAs.name} (${runAs.id}) no longer holds 'backups:write'`;
  return null;
}
