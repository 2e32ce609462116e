/** Routes of backups: list, back up, upload, read, delete, download, restore. */
import { createReadStream } from 'node:fs';
import {
  boundIfVisible,
  canReach,
  DEPLOYMENT_OR_RETIRED,
  errors,
  isRetiredName,
  mergeErrors,
  operationRoute,
  reply,
  Type,
  type PluginContext,
  type Principal,
  type Reply,
} from '@agent/sdk';
import { backupView, BackupView, type BackupRecord } from '../backup-store.js';
import type { BackupService } from '../backup-service.js';
import { Accepted, BACKUP_ID, findBackup, requireWrite, visibleBackup } from '../operations/common.js';
import { CreateBackupInput, RestoreOptions, type backupOperations } from '../operations/backups.js';
import { UploadFields, type uploadOperation } from '../operations/upload.js';
import type { StoreRegistry } from '../s3/stores.js';
import { SERVICES_MISSING, STORE_ERRORS } from './answers.js';

export interface BackupRouteDeps {
  service: BackupService;
  stores: StoreRegistry;
  ops: ReturnType<typeof backupOperations> & { upload: ReturnType<typeof uploadOperation> };
  /** Largest archive `POST /backups/upload` takes (bytes). */
  uploadLimit: number;
  deploymentExists(name: string): boolean;
}

/** List filter: a deployment, or the retired name of a deleted one (only global principals reach those). */
export const DeploymentFilter = (description: string) =>
  Type.String({ pattern: DEPLOYMENT_OR_RETIRED, description: `${description}; a retired name \`<name>~<time>\` for what a deleted deployment left` });

const Id = Type.Object({ id: Type.String({ pattern: BACKUP_ID }) });

/** What queueing a backup answers besides the kernel (its patterns, its destination, a job already running). */
export const BACKUP_ERRORS = mergeErrors(SERVICES_MISSING, { 400: ['INVALID_PATTERN'], 404: ['OBJECT_STORE_NOT_FOUND'], 409: ['JOB_IN_PROGRESS'] });
const accepted = (r: Accepted) => reply.accepted(r, r.message);

/** The deployment of the backup in the path when the caller reaches it, else none (the handler answers 404). */
const boundToBackup = (service: BackupService) => (req: { principal: Principal; params: { id: string } }) =>
  boundIfVisible(req.principal, findBackup(service, req.params.id)?.deployment);

export function registerBackupRoutes(ctx: PluginContext, deps: BackupRouteDeps): void {
  const { service, ops } = deps;
  ctx.route({
    method: 'GET',
    path: '/backups',
    permission: 'backups:read',
    operationId: 'backups.list',
    summary: 'List backups (newest first)',
    description: 'Backups of the deployments the caller reaches; those of deleted deployments (retired names) for global principals only.',
    query: Type.Object({ deployment: Type.Optional(DeploymentFilter('only backups of this deployment')) }),
    deployment: (req) => req.query.deployment,
    tenancy: 'filtered',
    response: Type.Array(BackupView),
    handler: (req) => service.list(req.query.deployment).filter((b) => canReach(req.principal, b.deployment)),
  });
  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/backups',
      permission: 'backups:write',
      operationId: 'backups.create',
      status: 202,
      summary: 'Back up a deployment (files and database dumps) in the background',
      body: CreateBackupInput,
      deployment: (req) => req.body.deployment_name,
      response: Accepted,
      errors: BACKUP_ERRORS,
      input: (req) => req.body,
      respond: accepted,
    }),
  );
  registerUploadRoute(ctx, deps);
  registerBackupItemRoutes(ctx, deps);
  registerRestoreRoute(ctx, deps);
}

function registerUploadRoute(ctx: PluginContext, deps: BackupRouteDeps): void {
  ctx.route(
    operationRoute(deps.ops.upload, {
      method: 'POST',
      path: '/backups/upload',
      permission: 'backups:write',
      operationId: 'backups.upload',
      status: 201,
      creates: 'id',
      summary: 'Upload a backup archive (.tar.gz, multipart field `archive`): verified, then kept as a backup that can be restored',
      description:
        'The archive is verified as a restore verifies it (400 BACKUP_CORRUPT otherwise) and becomes a local backup of `deployment`, or of the deployment its manifest names: uploading it is creating a backup of that deployment (write access; a principal limited to its deployments, for those only). ' +
        `Archives over the limit (config backups.upload_limit, ${deps.uploadLimit} bytes here) get 413.`,
      multipart: { files: ['archive'], maxFileSize: deps.uploadLimit },
      body: UploadFields,
      // A named deployment is checked by the core; without one, the operation checks the one the archive names.
      deployment: (req) => req.body.deployment,
      tenancy: 'filtered',
      response: BackupView,
      errors: { 400: ['BACKUP_CORRUPT'] },
      input: (req) => ({ ...req.body, archive: req.files!.archive! }),
      respond: (view) => reply.created(view, `backup '${view.id}' stored from the uploaded archive`),
    }),
  );
}

function registerBackupItemRoutes(ctx: PluginContext, deps: BackupRouteDeps): void {
  const { service, ops } = deps;
  ctx.route({
    method: 'GET',
    path: '/backups/:id',
    permission: 'backups:read',
    operationId: 'backups.get',
    summary: 'Backup details: components with size and SHA-256, destination',
    params: Id,
    deployment: boundToBackup(service),
    tenancy: 'filtered',
    response: BackupView,
    errors: { 404: ['BACKUP_NOT_FOUND'] },
    handler: (req) => backupView(visibleBackup(service, req.principal, req.params.id)),
  });
  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/backups/:id',
      permission: 'backups:write',
      operationId: 'backups.delete',
      summary: 'Delete a backup (local archive and uploaded copy)',
      params: Id,
      deployment: boundToBackup(service),
      tenancy: 'filtered',
      response: Type.Null(),
      // A copy in an object store that cannot be deleted is logged, not answered.
      errors: { 404: ['BACKUP_NOT_FOUND'] },
      input: (req) => req.params,
      respond: ({ id }) => reply.ok(null, `backup '${id}' deleted`),
    }),
  );
  ctx.route({
    // The archive holds the deployment's .env and database dumps: downloading needs write, not read.
    method: 'GET',
    path: '/backups/:id/download',
    permission: 'backups:write',
    operationId: 'backups.download',
    summary: 'Download the archive (.tar.gz, streamed; needs backups:write: it holds secrets)',
    produces: 'application/gzip',
    params: Id,
    deployment: boundToBackup(service),
    deploymentLevel: 'write',
    tenancy: 'filtered',
    // A backup whose local archive is gone is read from its copy in an object store.
    errors: mergeErrors(STORE_ERRORS, { 404: ['BACKUP_NOT_FOUND'], 409: ['BACKUP_ARCHIVE_MISSING'] }),
    handler: (req) => {
      const b = visibleBackup(service, req.principal, req.params.id);
      requireWrite(req.principal, b);
      return download(deps, b, req.signal);
    },
  });
}

function registerRestoreRoute(ctx: PluginContext, deps: BackupRouteDeps): void {
  const { service, ops } = deps;
  ctx.route(
    operationRoute(ops.restore, {
      method: 'POST',
      path: '/backups/:id/restore',
      permission: 'backups:write',
      operationId: 'backups.restore',
      status: 202,
      summary: 'Restore a backup into the same or a new deployment (verified before anything changes)',
      params: Id,
      body: Type.Object(RestoreOptions),
      description:
        "Needs write access to the backup's deployment and to the target. Restoring into a new name creates that deployment: " +
        'a user limited to its deployments may (it becomes its admin), a key limited to a deployments list may not (403 GLOBAL_SCOPE_REQUIRED). ' +
        'Backups of a deleted deployment (retired name) are restored by global principals, into a named target.',
      // An existing target is checked by the core (write); no existing target means a creation (tenancy `create`).
      deployment: (req) => {
        const source = boundIfVisible(req.principal, findBackup(service, req.params.id)?.deployment);
        const target = req.body.target_name ?? (source && !isRetiredName(source) ? source : undefined);
        return target && deps.deploymentExists(target) ? target : undefined;
      },
      tenancy: 'create',
      response: Accepted,
      errors: mergeErrors(SERVICES_MISSING, { 400: ['BACKUP_CORRUPT'], 404: ['BACKUP_NOT_FOUND'], 409: ['JOB_IN_PROGRESS', 'BACKUP_ARCHIVE_MISSING'] }),
      input: (req) => ({ ...req.body, id: req.params.id }),
      respond: accepted,
    }),
  );
}

/** The archive, streamed from the local file, else from its uploaded copy. */
async function download(deps: BackupRouteDeps, b: BackupRecord, signal: AbortSignal): Promise<Reply> {
  const filename = `${b.deployment}-${b.id}.tar.gz`;
  const size = await deps.service.archiveSize(b.id);
  if (size !== null) return reply.stream(createReadStream(deps.service.archivePath(b.id)), { contentType: 'application/gzip', length: size, filename });
  if (!b.remote) throw errors.conflict(`the archive of backup '${b.id}' is missing`, 'BACKUP_ARCHIVE_MISSING');
  const client = deps.stores.client(b.remote.store);
  const got = await client.download(b.remote.bucket, b.remote.key, signal);
  got.body.once('close', () => client.destroy());
  return reply.stream(got.body, { contentType: 'application/gzip', length: got.length ?? undefined, filename });
}
