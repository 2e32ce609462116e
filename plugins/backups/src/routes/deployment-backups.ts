/** Routes of one deployment's backups: its list, a backup now with its configuration. */
import { deploymentName, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { BackupView } from '../backup-store.js';
import type { BackupService } from '../backup-service.js';
import type { backupOperations } from '../operations/backups.js';
import { Accepted } from '../operations/common.js';
import { BACKUP_ERRORS } from './backups.js';

export function registerDeploymentBackupRoutes(ctx: PluginContext, service: BackupService, ops: ReturnType<typeof backupOperations>): void {
  const Name = Type.Object({ name: deploymentName() });
  ctx.route({
    method: 'GET',
    path: '/deployments/:name/backups',
    permission: 'backups:read',
    operationId: 'backups.listForDeployment',
    summary: 'Backups of one deployment (newest first)',
    tag: 'backups',
    params: Name,
    deployment: 'name',
    response: Type.Array(BackupView),
    handler: (req) => service.list(req.params.name),
  });

  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/deployments/:name/backups',
      permission: 'backups:write',
      operationId: 'backups.createForDeployment',
      status: 202,
      summary: 'Back up one deployment now with its backup configuration',
      tag: 'backups',
      params: Name,
      deployment: 'name',
      response: Accepted,
      errors: BACKUP_ERRORS,
      input: (req) => ({ deployment_name: req.params.name }),
      respond: (r) => reply.accepted(r, r.message),
    }),
  );
}
