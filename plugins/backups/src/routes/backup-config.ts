/** Routes of a deployment's backup configuration (schedule, retention, contents, destination). */
import { deploymentName, errors, operationRoute, Type, type PluginContext } from '@agent/sdk';
import { BackupConfig, type BackupConfigs } from '../backup-configs.js';
import { ConfigPatch, type backupConfigOperations } from '../operations/backup-config.js';

export interface ConfigRouteDeps {
  configs: BackupConfigs;
  ops: ReturnType<typeof backupConfigOperations>;
  deploymentExists(name: string): boolean;
}

export function registerBackupConfigRoutes(ctx: PluginContext, deps: ConfigRouteDeps): void {
  const Name = Type.Object({ name: deploymentName() });
  ctx.route({
    method: 'GET',
    path: '/deployments/:name/backup-config',
    permission: 'backups:read',
    operationId: 'backups.getConfig',
    summary: 'Backup configuration of a deployment (schedule, retention, contents, destination)',
    tag: 'backups',
    params: Name,
    deployment: 'name',
    response: BackupConfig,
    handler: (req) => {
      if (!deps.deploymentExists(req.params.name)) throw errors.notFound(`deployment '${req.params.name}' not found`);
      return deps.configs.get(req.params.name);
    },
  });

  ctx.route(
    operationRoute(deps.ops.set, {
      method: 'PUT',
      path: '/deployments/:name/backup-config',
      permission: 'backups:write',
      operationId: 'backups.setConfig',
      summary: 'Update the backup configuration; an enabled schedule runs backups and prunes beyond the retention',
      tag: 'backups',
      params: Name,
      deployment: 'name',
      body: ConfigPatch,
      response: BackupConfig,
      errors: { 400: ['INVALID_PATTERN', 'INVALID_CRON'] },
      plannable: true,
      input: (req) => ({ deployment: req.params.name, patch: req.body }),
    }),
  );
}
