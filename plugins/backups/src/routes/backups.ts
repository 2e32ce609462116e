/** Routes of backups, restores, jobs, backup configuration and destinations. */
import { createReadStream } from 'node:fs';
import {
  assertVisible,
  boundIfVisible,
  canReach,
  DEPLOYMENT_OR_RETIRED,
  deploymentName,
  errors,
  globalScopeRequired,
  isRetiredName,
  Pagination,
  reply,
  Type,
  visibleDeployments,
  type PluginContext,
  type Principal,
} from '@agent/sdk';
import { ArchiveError } from '../archive/backup-archive.js';
import { invalidExcludePattern, invalidExcludePatterns } from '../archive/paths.js';
import { BackupConfig, type BackupConfigs } from '../backup-configs.js';
import { backupView, BackupView } from '../backup-store.js';
import type { BackupService } from '../backup-service.js';
import { JobView, type Jobs } from '../jobs.js';
import { storeView, type StoreRegistry } from '../s3/stores.js';

export interface BackupRouteDeps {
  service: BackupService;
  jobs: Jobs;
  configs: BackupConfigs;
  stores: StoreRegistry;
  archiveDir: string;
  deploymentExists(name: string): boolean;
}

const ExcludePatterns = Type.Array(Type.String({ minLength: 1, maxLength: 512 }), {
  maxItems: 100,
  description: 'glob patterns relative to the deployment folder',
});
const BACKUP_ID = '^bkp_[0-9]{14}_[0-9a-f]{8}$';
const JOB_ID = '^job_[0-9]{14}_[0-9a-f]{8}$';
const Accepted = Type.Object({ job_id: Type.String(), message: Type.String() });
/** List filter: a deployment, or the retired name of a deleted one (only global principals reach those). */
const DeploymentFilter = (description: string) =>
  Type.String({ pattern: DEPLOYMENT_OR_RETIRED, description: `${description}; a retired name \`<name>~<time>\` for what a deleted deployment left` });
const backupNotFound = (id: string) => () => errors.notFound(`backup '${id}' not found`, 'BACKUP_NOT_FOUND');
const jobNotFound = (id: string) => () => errors.notFound(`job '${id}' not found`, 'JOB_NOT_FOUND');

export function checkPatterns(patterns: string[], field = 'body.exclude_patterns'): void {
  patterns.forEach((p, i) => {
    const problem = invalidExcludePattern(p);
    if (problem) throw errors.badRequest(`${field}[${i}]: '${p}' ${problem}`, 'INVALID_PATTERN');
  });
  const together = invalidExcludePatterns(patterns);
  if (together) throw errors.badRequest(`${field}: the patterns ${together}`, 'INVALID_PATTERN');
}

const checkDestination = (stores: StoreRegistry, destination: string) => {
  if (destination !== 'local' && !stores.find(destination)) throw errors.badRequest(`body.destination: no object store named '${destination}'`);
};

const who = (p: Principal) => p.name;

export function registerBackupRoutes(ctx: PluginContext<any>, deps: BackupRouteDeps): void {
  const { service, jobs, configs, stores } = deps;
  /** A backup by id, as the principal sees it: unknown and another tenant's answer the same 404. */
  const visibleBackup = (p: Principal, id: string) => {
    const b = safeGet(service, id);
    assertVisible(p, b?.deployment, backupNotFound(id));
    return b!;
  };

  const createBackup = (
    principal: Principal,
    body: {
      deployment_name: string;
      include_files?: boolean;
      include_database?: boolean;
      exclude_patterns?: string[];
      description?: string;
      destination?: string;
    },
  ) => {
    if (!deps.deploymentExists(body.deployment_name)) throw errors.notFound(`deployment '${body.deployment_name}' not found`);
    const config = configs.get(body.deployment_name);
    const exclude = body.exclude_patterns ?? config.exclude_patterns;
    checkPatterns(exclude);
    const destination = body.destination ?? config.destination;
    checkDestination(stores, destination);
    const job = service.startBackup({
      deployment: body.deployment_name,
      include_files: body.include_files ?? true,
      include_database: body.include_database ?? config.include_database,
      exclude_patterns: exclude,
      description: body.description ?? '',
      destination,
      trigger: 'manual',
      created_by: who(principal),
    });
    return reply.accepted({ job_id: job.id, message: `backup of '${body.deployment_name}' queued` }, `backup of '${body.deployment_name}' queued`);
  };

  // Jobs first: '/backups/jobs' must not be taken for a backup id.
  ctx.route({
    method: 'GET',
    path: '/backups/jobs',
    permission: 'backups:read',
    operationId: 'backups.listJobs',
    summary: 'List backup, restore and replication jobs (newest first)',
    description:
      'A principal limited to its deployments sees their jobs only; jobs of no deployment (replications) and of deleted deployments (retired names) are for global principals.',
    query: Type.Object({
      deployment: Type.Optional(DeploymentFilter('only jobs of this deployment')),
      type: Type.Optional(Type.Union([Type.Literal('backup'), Type.Literal('restore'), Type.Literal('replicate')])),
      ...Pagination(50, 500),
    }),
    // A named deployment is checked by the core (404 for another tenant's); without one, the handler filters.
    deployment: (req) => req.query.deployment,
    tenancy: 'filtered',
    response: Type.Array(JobView),
    handler: (req) => {
      const limit = req.query.limit ?? 50;
      const offset = req.query.offset ?? 0;
      // A global principal reaches every deployment; a scoped one exactly those of its grants (never `*`).
      const deployments = req.query.deployment ? undefined : visibleDeployments(req.principal);
      const page = jobs.list({ deployment: req.query.deployment, deployments, type: req.query.type, limit, offset });
      return reply.page(page.items, { total: page.total, limit, offset });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/backups/jobs/:id',
    permission: 'backups:read',
    operationId: 'backups.getJob',
    summary: 'Status of a job: progress (step, bytes), error, timings, result',
    params: Type.Object({ id: Type.String({ pattern: JOB_ID }) }),
    deployment: (req) => boundIfVisible(req.principal, jobs.get(req.params.id)?.deployment),
    tenancy: 'filtered',
    response: JobView,
    handler: (req) => {
      const job = jobs.get(req.params.id);
      assertVisible(req.principal, job?.deployment, jobNotFound(req.params.id));
      return job;
    },
  });

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

  ctx.route({
    method: 'POST',
    path: '/backups',
    permission: 'backups:write',
    operationId: 'backups.create',
    status: 202,
    summary: 'Back up a deployment (files and database dumps) in the background',
    body: Type.Object({
      deployment_name: deploymentName(),
      include_files: Type.Optional(Type.Boolean({ default: true })),
      include_database: Type.Optional(Type.Boolean({ description: 'dump the database services; default from the backup config (true)' })),
      exclude_patterns: Type.Optional(ExcludePatterns),
      description: Type.Optional(Type.String({ maxLength: 500 })),
      destination: Type.Optional(Type.String({ maxLength: 64, description: "'local' or an object store; default from the backup config" })),
    }),
    deployment: (req) => req.body.deployment_name,
    response: Accepted,
    handler: (req) => createBackup(req.principal, req.body),
  });

  ctx.route({
    method: 'GET',
    path: '/backups/:id',
    permission: 'backups:read',
    operationId: 'backups.get',
    summary: 'Backup details: components with size and SHA-256, destination',
    params: Type.Object({ id: Type.String({ pattern: BACKUP_ID }) }),
    deployment: (req) => boundIfVisible(req.principal, safeGet(service, req.params.id)?.deployment),
    tenancy: 'filtered',
    response: BackupView,
    handler: (req) => backupView(visibleBackup(req.principal, req.params.id)),
  });

  ctx.route({
    method: 'DELETE',
    path: '/backups/:id',
    permission: 'backups:write',
    operationId: 'backups.delete',
    summary: 'Delete a backup (local archive and uploaded copy)',
    params: Type.Object({ id: Type.String({ pattern: BACKUP_ID }) }),
    deployment: (req) => boundIfVisible(req.principal, safeGet(service, req.params.id)?.deployment),
    tenancy: 'filtered',
    handler: async (req) => {
      const b = visibleBackup(req.principal, req.params.id);
      if (!canReach(req.principal, b.deployment, 'write')) throw errors.forbidden(`'write' access to the backup's deployment required`);
      await service.delete(b.id);
      return reply.ok(null, `backup '${req.params.id}' deleted`);
    },
  });

  ctx.route({
    // The archive holds the deployment's .env and database dumps: downloading needs write, not read.
    method: 'GET',
    path: '/backups/:id/download',
    permission: 'backups:write',
    operationId: 'backups.download',
    summary: 'Download the archive (.tar.gz, streamed; needs backups:write: it holds secrets)',
    produces: 'application/gzip',
    params: Type.Object({ id: Type.String({ pattern: BACKUP_ID }) }),
    deployment: (req) => boundIfVisible(req.principal, safeGet(service, req.params.id)?.deployment),
    deploymentLevel: 'write',
    tenancy: 'filtered',
    handler: async (req) => {
      const b = visibleBackup(req.principal, req.params.id);
      if (!canReach(req.principal, b.deployment, 'write')) throw errors.forbidden(`'write' access to the backup's deployment required`);
      const filename = `${b.deployment}-${b.id}.tar.gz`;
      const size = await service.archiveSize(b.id);
      if (size !== null) return reply.stream(createReadStream(service.archivePath(b.id)), { contentType: 'application/gzip', length: size, filename });
      if (!b.remote) throw errors.conflict(`the archive of backup '${b.id}' is missing`, 'BACKUP_ARCHIVE_MISSING');
      const client = stores.client(b.remote.store);
      const got = await client.download(b.remote.bucket, b.remote.key, req.signal);
      got.body.once('close', () => client.destroy());
      return reply.stream(got.body, { contentType: 'application/gzip', length: got.length ?? undefined, filename });
    },
  });

  ctx.route({
    method: 'POST',
    path: '/backups/:id/restore',
    permission: 'backups:write',
    operationId: 'backups.restore',
    status: 202,
    summary: 'Restore a backup into the same or a new deployment (verified before anything changes)',
    params: Type.Object({ id: Type.String({ pattern: BACKUP_ID }) }),
    body: Type.Object({
      target_name: Type.Optional(deploymentName({ description: "deployment to restore into; default the backup's own; a new name creates it" })),
      restore_files: Type.Optional(Type.Boolean({ default: true })),
      restore_database: Type.Optional(Type.Boolean({ description: 'default: true when the backup holds a dump' })),
      auto_start: Type.Optional(Type.Boolean({ default: true })),
    }),
    description:
      "Needs write access to the backup's deployment and to the target. Restoring into a new name creates that deployment: " +
      'a user limited to its deployments may (it becomes its admin), a key limited to a deployments list may not (403 GLOBAL_SCOPE_REQUIRED). ' +
      'Backups of a deleted deployment (retired name) are restored by global principals, into a named target.',
    // An existing target is checked by the core (write); no existing target means a creation (tenancy `create`).
    deployment: (req) => {
      const source = boundIfVisible(req.principal, safeGet(service, req.params.id)?.deployment);
      const target = req.body.target_name ?? (source && !isRetiredName(source) ? source : undefined);
      return target && deps.deploymentExists(target) ? target : undefined;
    },
    tenancy: 'create',
    response: Accepted,
    handler: async (req) => {
      const b = visibleBackup(req.principal, req.params.id);
      // The archive holds the source's files, .env and dumps: restoring it anywhere needs write on the source too.
      if (!canReach(req.principal, b.deployment, 'write')) throw errors.forbidden(`'write' access to the backup's deployment required`);
      if (isRetiredName(b.deployment) && !req.body.target_name) {
        throw errors.badRequest(`body.target_name: backup '${b.id}' belongs to a deleted deployment: name the deployment to restore into`);
      }
      const target = req.body.target_name ?? b.deployment;
      // Checked again here: the target may have appeared or gone since the core looked.
      if (deps.deploymentExists(target)) {
        if (!canReach(req.principal, target, 'read')) throw errors.notFound(`deployment '${target}' not found`);
        if (!canReach(req.principal, target, 'write')) throw errors.forbidden(`'write' access to deployment '${target}' required`);
      } else {
        if (!req.principal.can('deployments:write')) throw errors.forbidden("creating a deployment needs 'deployments:write'");
        if (!req.principal.isGlobal && req.principal.type !== 'user') throw globalScopeRequired('creating a deployment by a key limited to its deployments');
      }
      const restore = {
        backup_id: b.id,
        target_name: target,
        restore_files: req.body.restore_files ?? true,
        restore_database: req.body.restore_database ?? b.components.some((c) => c.type === 'database'),
        auto_start: req.body.auto_start ?? true,
        principal: req.principal,
        created_by: who(req.principal),
      };
      try {
        await service.precheckRestore(restore);
      } catch (err) {
        if (err instanceof ArchiveError) throw errors.badRequest(`${err.message}; nothing was changed`, 'BACKUP_CORRUPT');
        throw err;
      }
      const job = service.startRestore(restore);
      return reply.accepted({ job_id: job.id, message: `restore of '${b.id}' into '${target}' queued` }, `restore of '${b.id}' into '${target}' queued`);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/backups',
    permission: 'backups:read',
    operationId: 'backups.listForDeployment',
    summary: 'Backups of one deployment (newest first)',
    tag: 'backups',
    params: Type.Object({ name: deploymentName() }),
    deployment: 'name',
    response: Type.Array(BackupView),
    handler: (req) => service.list(req.params.name),
  });

  ctx.route({
    method: 'POST',
    path: '/deployments/:name/backups',
    permission: 'backups:write',
    operationId: 'backups.createForDeployment',
    status: 202,
    summary: 'Back up one deployment now with its backup configuration',
    tag: 'backups',
    params: Type.Object({ name: deploymentName() }),
    deployment: 'name',
    response: Accepted,
    handler: (req) => createBackup(req.principal, { deployment_name: req.params.name }),
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/backup-config',
    permission: 'backups:read',
    operationId: 'backups.getConfig',
    summary: 'Backup configuration of a deployment (schedule, retention, contents, destination)',
    tag: 'backups',
    params: Type.Object({ name: deploymentName() }),
    deployment: 'name',
    response: BackupConfig,
    handler: (req) => {
      if (!deps.deploymentExists(req.params.name)) throw errors.notFound(`deployment '${req.params.name}' not found`);
      return configs.get(req.params.name);
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/deployments/:name/backup-config',
    permission: 'backups:write',
    operationId: 'backups.setConfig',
    summary: 'Update the backup configuration; an enabled schedule runs backups and prunes beyond the retention',
    tag: 'backups',
    params: Type.Object({ name: deploymentName() }),
    deployment: 'name',
    body: Type.Object({
      enabled: Type.Optional(Type.Boolean()),
      schedule: Type.Optional(Type.String({ minLength: 1, maxLength: 120, description: 'cron expression (5 or 6 fields)' })),
      retention: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
      include_database: Type.Optional(Type.Boolean()),
      exclude_patterns: Type.Optional(ExcludePatterns),
      destination: Type.Optional(Type.String({ maxLength: 64 })),
    }),
    response: BackupConfig,
    plan: {
      resource: (req) => ({ type: 'backup-config', id: req.params.name }),
      preview: (req) => ({
        changes: [
          {
            type: 'backup-config',
            id: req.params.name,
            actions: ['update'],
            before: configs.get(req.params.name),
            after: { ...configs.get(req.params.name), ...req.body },
          },
        ],
      }),
      snapshot: (req) => ({ records: { config: configs.get(req.params.name) } }),
    },
    handler: async (req) => {
      if (!deps.deploymentExists(req.params.name)) throw errors.notFound(`deployment '${req.params.name}' not found`);
      if (req.body.exclude_patterns) checkPatterns(req.body.exclude_patterns);
      if (req.body.destination !== undefined) checkDestination(stores, req.body.destination);
      return configs.set(req.params.name, req.body);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/backup-destinations',
    permission: 'backups:read',
    operationId: 'backups.destinations',
    summary: 'Where backups can go: the local folder and every object store (external and managed)',
    description:
      "A catalogue: every principal may choose a destination for its deployments' backups by name. Endpoints, buckets " +
      'and the local folder are global details: principals limited to their deployments get them as null.',
    tenancy: 'catalogue',
    response: Type.Array(
      Type.Object({
        name: Type.String(),
        type: Type.Union([Type.Literal('local'), Type.Literal('external'), Type.Literal('managed')]),
        endpoint: Type.Union([Type.String(), Type.Null()]),
        bucket: Type.Union([Type.String(), Type.Null()]),
        path: Type.Union([Type.String(), Type.Null()]),
      }),
    ),
    handler: (req) => {
      const details = req.principal.isGlobal;
      return [
        { name: 'local', type: 'local' as const, endpoint: null, bucket: null, path: details ? deps.archiveDir : null },
        ...stores.list().map((s) => {
          const v = storeView(s);
          return { name: v.name, type: v.type, endpoint: details ? v.endpoint : null, bucket: details ? v.bucket : null, path: null };
        }),
      ];
    },
  });
}

function safeGet(service: BackupService, id: string) {
  try {
    return service.get(id);
  } catch {
    return undefined;
  }
}
