/**
 * The changes made to backups: back up (a job), delete, restore (a job). Each operation's `prepare` makes every
 * check the route made before (in the same order, with the same answers) and returns the planned change; `apply`
 * makes it. The routes (src/routes/) only map requests onto them.
 */
import { canReach, defineOperation, deploymentName, errors, globalScopeRequired, isRetiredName, Type, type Principal } from '@agent/sdk';
import { ArchiveError } from '../archive/backup-archive.js';
import type { BackupConfigs } from '../backup-configs.js';
import { backupView } from '../backup-store.js';
import type { BackupRequest, BackupService, RestoreRequest } from '../backup-service.js';
import type { StoreRegistry } from '../s3/stores.js';
import { BACKUP_ID, checkDestination, checkPatterns, ExcludePatterns, requireWrite, visibleBackup, type Accepted } from './common.js';

export interface BackupOperationDeps {
  service: BackupService;
  configs: BackupConfigs;
  stores: StoreRegistry;
  deploymentExists(name: string): boolean;
}

/** The body of `POST /backups`: unset fields come from the deployment's backup configuration. */
export const CreateBackupInput = Type.Object({
  deployment_name: deploymentName(),
  include_files: Type.Optional(Type.Boolean({ default: true })),
  include_database: Type.Optional(Type.Boolean({ description: 'dump the database services; default from the backup config (true)' })),
  exclude_patterns: Type.Optional(ExcludePatterns),
  description: Type.Optional(Type.String({ maxLength: 500 })),
  destination: Type.Optional(Type.String({ maxLength: 64, description: "'local' or an object store; default from the backup config" })),
});

/** The body of `POST /backups/:id/restore`. */
export const RestoreOptions = {
  target_name: Type.Optional(deploymentName({ description: "deployment to restore into; default the backup's own; a new name creates it" })),
  restore_files: Type.Optional(Type.Boolean({ default: true })),
  restore_database: Type.Optional(Type.Boolean({ description: 'default: true when the backup holds a dump' })),
  auto_start: Type.Optional(Type.Boolean({ default: true })),
};

const BackupId = Type.Object({ id: Type.String({ pattern: BACKUP_ID }) });

export function backupOperations(deps: BackupOperationDeps) {
  const { service, configs, stores } = deps;

  const create = defineOperation({
    name: 'backups.create',
    input: CreateBackupInput,
    resource: (input) => ({ type: 'deployment-backups', id: input.deployment_name }),
    prepare(input, { principal }) {
      const deployment = input.deployment_name;
      if (!deps.deploymentExists(deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
      const config = configs.get(deployment);
      const exclude = input.exclude_patterns ?? config.exclude_patterns;
      checkPatterns(exclude);
      const destination = input.destination ?? config.destination;
      checkDestination(stores, destination);
      const request: BackupRequest = {
        deployment,
        include_files: input.include_files ?? true,
        include_database: input.include_database ?? config.include_database,
        exclude_patterns: exclude,
        description: input.description ?? '',
        destination,
        trigger: 'manual',
        created_by: principal.name,
      };
      service.checkBackup(request);
      const { trigger: _t, created_by: _c, ...after } = request;
      return {
        value: request,
        preview: { summary: `back up '${deployment}' to ${destination}`, changes: [{ type: 'backup', id: deployment, actions: ['create'], after }] },
      };
    },
    apply: (request): Accepted => ({ job_id: service.startBackup(request).id, message: `backup of '${request.deployment}' queued` }),
  });

  const remove = defineOperation({
    name: 'backups.delete',
    input: BackupId,
    resource: (input) => ({ type: 'backup', id: input.id }),
    prepare({ id }, { principal }) {
      const b = visibleBackup(service, principal, id);
      requireWrite(principal, b);
      const copy = b.remote ? [{ type: 'object', id: `${b.remote.store}/${b.remote.bucket}/${b.remote.key}`, actions: ['delete' as const] }] : [];
      return {
        value: b.id,
        preview: { summary: `delete backup '${id}'`, changes: [{ type: 'backup', id, actions: ['delete'], before: backupView(b) }, ...copy] },
      };
    },
    apply: async (id) => {
      await service.delete(id);
      return { id };
    },
  });

  const restore = defineOperation({
    name: 'backups.restore',
    input: Type.Object({ ...BackupId.properties, ...RestoreOptions }),
    resource: (input) => ({ type: 'deployment', id: input.target_name ?? `backup:${input.id}` }),
    async prepare(input, { principal }) {
      const b = visibleBackup(service, principal, input.id);
      // The archive holds the source's files, .env and dumps: restoring it anywhere needs write on the source too.
      requireWrite(principal, b);
      if (isRetiredName(b.deployment) && !input.target_name) {
        throw errors.badRequest(`body.target_name: backup '${b.id}' belongs to a deleted deployment: name the deployment to restore into`);
      }
      const target = input.target_name ?? b.deployment;
      // Checked again here: the target may have appeared or gone since the core looked.
      const exists = deps.deploymentExists(target);
      checkTarget(principal, target, exists);
      const request: RestoreRequest = {
        backup_id: b.id,
        target_name: target,
        restore_files: input.restore_files ?? true,
        restore_database: input.restore_database ?? b.components.some((c) => c.type === 'database'),
        auto_start: input.auto_start ?? true,
        principal,
        created_by: principal.name,
      };
      try {
        await service.precheckRestore(request);
      } catch (err) {
        if (err instanceof ArchiveError) throw errors.badRequest(`${err.message}; nothing was changed`, 'BACKUP_CORRUPT');
        throw err;
      }
      const { principal: _p, created_by: _c, ...after } = request;
      return {
        value: request,
        preview: {
          summary: `restore '${b.id}' into '${target}'`,
          changes: [{ type: 'deployment', id: target, actions: [exists ? 'update' : 'create'], after }],
        },
      };
    },
    apply: (request): Accepted => ({
      job_id: service.startRestore(request).id,
      message: `restore of '${request.backup_id}' into '${request.target_name}' queued`,
    }),
  });

  return { create, remove, restore };
}

/** Write on an existing target (404 for one the caller cannot see); a new one is a creation. */
function checkTarget(principal: Principal, target: string, exists: boolean): void {
  if (exists) {
    if (!canReach(principal, target, 'read')) throw errors.notFound(`deployment '${target}' not found`);
    if (!canReach(principal, target, 'write')) throw errors.forbidden(`'write' access to deployment '${target}' required`);
  } else {
    if (!principal.can('deployments:write')) throw errors.forbidden("creating a deployment needs 'deployments:write'");
    if (!principal.isGlobal && principal.type !== 'user') throw globalScopeRequired('creating a deployment by a key limited to its deployments');
  }
}
