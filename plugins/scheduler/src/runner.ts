/**
 * What a run of a task does (cron or manual): back up, restart, or run a command in a service, after checking that
 * its deployment still exists and that the principal it runs as still holds the rights it needs.
 */
import type { PluginContext, PrincipalDirectory } from '@agent/sdk';
import type { BackupsService } from '@agent/plugin-backups/api';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import type { DockerService } from '@agent/plugin-docker/api';
import { refusal } from './run-as.js';
import type { TaskRecord, TaskStore } from './tasks.js';

/** Command output kept per execution (the core bounds the whole record too). */
const OUTPUT_LIMIT = 16 * 1024;
const COMMAND_TIMEOUT_MS = 10 * 60 * 1000;

export interface RunnerDeps {
  deployments: DeploymentsService;
  docker: DockerService;
  principals: PrincipalDirectory;
  backups?: BackupsService;
}

const bounded = (text: string) => (text.length > OUTPUT_LIMIT ? `${text.slice(0, OUTPUT_LIMIT)}\n… (output truncated at ${OUTPUT_LIMIT} bytes)` : text);

/** The runner of the task store (which it needs back, to disable a task that may no longer run). */
export function taskRunner(ctx: PluginContext, deps: RunnerDeps, store: () => TaskStore) {
  return async (task: TaskRecord, output: (line: string) => void): Promise<void> => {
    const tasks = store();
    const name = task.deployment_name;
    if (!deps.deployments.get(name)) {
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
        const container = await deps.deployments.serviceContainer(name, task.service);
        if (!container) throw new Error(`service '${task.service}' of '${name}' has no container`);
        await deps.docker.restartContainer(container.id);
        output(`restarted service ${task.service} of ${name}`);
      } else {
        await deps.deployments.restart(name);
        output(`restarted ${name}`);
      }
    } else {
      const container = await deps.deployments.serviceContainer(name, task.service!);
      if (!container || container.state !== 'running') throw new Error(`service '${task.service}' of '${name}' is not running`);
      const result = await deps.docker.exec(container.id, task.command!, { timeoutMs: COMMAND_TIMEOUT_MS });
      if (result.stdout) output(bounded(result.stdout.replace(/\n$/, '')));
      if (result.stderr) output(bounded(`[stderr] ${result.stderr.replace(/\n$/, '')}`));
      if (result.exit_code !== 0) throw new Error(`command exited with ${result.exit_code}`);
    }
  };
}
