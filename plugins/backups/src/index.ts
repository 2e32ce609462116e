/**
 * backups: streamed backups of deployments (files + database dumps in one .tar.gz with a manifest), restores,
 * per-deployment schedules with retention, and S3 object stores (external or managed on this host).
 */
import { isAbsolute, join } from 'node:path';
import bytes from 'bytes';
import { definePlugin, errors, optional, Type } from '@agent/sdk';
import { deploymentsService, type DeploymentsService } from '@agent/plugin-deployments/api';
import { dockerService, type DockerService } from '@agent/plugin-docker/api';
import { type BackupsService, backupsService } from './api.js';
import { BackupConfigs } from './backup-configs.js';
import { BackupService } from './backup-service.js';
import { BackupStore } from './backup-store.js';
import { Jobs } from './jobs.js';
import { ManagedStores } from './s3/managed.js';
import { StoreRegistry } from './s3/stores.js';
import { backupConfigOperations } from './operations/backup-config.js';
import { backupOperations } from './operations/backups.js';
import { checkPatterns } from './operations/common.js';
import { objectOperations } from './operations/objects.js';
import { storeOperations } from './operations/object-stores.js';
import { uploadOperation } from './operations/upload.js';
import { registerBackupConfigRoutes } from './routes/backup-config.js';
import { registerBackupRoutes } from './routes/backups.js';
import { registerBucketRoutes } from './routes/buckets.js';
import { registerDeploymentBackupRoutes } from './routes/deployment-backups.js';
import { registerDestinationRoutes } from './routes/destinations.js';
import { registerJobRoutes } from './routes/jobs.js';
import { registerObjectRoutes } from './routes/objects.js';
import { registerStoreActionRoutes, registerStoreRoutes } from './routes/object-stores.js';
import { objectOwner } from './s3/layout.js';

/** Bytes of a size setting (`10gb`, `512mb` or a number of bytes; the schema admits nothing else). */
const sizeOf = (size: number | string): number => (typeof size === 'number' ? size : bytes.parse(size)!);

export default definePlugin({
  name: 'backups',
  version: '0.1.0',
  description: 'Backups, restores, backup schedules and S3 object stores',
  config: Type.Object({
    backups: Type.Object(
      {
        directory: Type.String({ default: '', description: 'where archives are kept (default <data>/plugins/backups/archives)' }),
        compression_level: Type.Integer({ minimum: 1, maximum: 9, default: 6, description: 'gzip level' }),
        restore_ready_timeout: Type.Integer({
          minimum: 5,
          maximum: 3600,
          default: 120,
          description: 'seconds to wait for a database service during a restore',
        }),
        managed_store_labels: Type.Record(Type.String(), Type.String(), { default: {}, description: 'extra container labels of managed object stores' }),
        upload_limit: Type.Union([Type.Integer({ minimum: 1 }), Type.String({ pattern: '^[0-9]+(b|kb|mb|gb)$' })], {
          default: '10gb',
          description: 'largest archive POST /backups/upload takes (bytes, or 512mb, 10gb); larger ones get 413',
        }),
      },
      { default: {} },
    ),
  }),
  resources: {
    backups: {
      description: 'backups, restores, backup jobs and backup configurations (of a deployment, wherever its archives are stored)',
      operator: 'write',
      viewer: 'read',
      owner: 'deployment',
    },
    'object-stores': {
      description: "S3 object stores, their buckets and objects (backups in them stay their deployment's)",
      operator: 'write',
      viewer: 'read',
      owner: 'global',
    },
  },
  deps: { deployments: optional(deploymentsService), docker: optional(dockerService) },
  provides: { backups: backupsService },

  async setup(ctx, deps) {
    const cfg = ctx.config.backups;
    const archiveDir = cfg.directory ? (isAbsolute(cfg.directory) ? cfg.directory : join(ctx.agent.dataDir, cfg.directory)) : join(ctx.dataDir, 'archives');
    const need =
      <T>(get: () => T | undefined, what: string) =>
      (): T => {
        const svc = get();
        if (!svc) throw errors.unavailable(`the ${what} service is not available (enable the deployments and docker plugins)`, 'SERVICE_UNAVAILABLE');
        return svc;
      };
    const services = { deployments: need<DeploymentsService>(() => deps.deployments, 'deployments'), docker: need<DockerService>(() => deps.docker, 'docker') };
    const deploymentExists = (name: string) => !!deps.deployments?.get(name);

    const db = ctx.store.journal();
    const jobs = new Jobs(db, ctx.log);
    const store = new BackupStore(db);
    const stores = await StoreRegistry.open(ctx.store);
    const service = new BackupService(
      services,
      store,
      jobs,
      stores,
      { archiveDir, compressionLevel: cfg.compression_level, readyTimeoutMs: cfg.restore_ready_timeout * 1000 },
      ctx.log,
      (event, payload) => ctx.events.emit(event, payload),
    );
    const managed = new ManagedStores({
      stores,
      ...services,
      packageDir: ctx.packageDir,
      workDir: ctx.dataDir,
      log: ctx.log,
      labels: cfg.managed_store_labels,
    });

    /** Runs a backup job to its end (scheduled backups and scheduler tasks wait for the result). */
    const backupAndWait = async (input: Parameters<BackupsService['backup']>[0], output?: (line: string) => void) => {
      const config = configs.get(input.deployment);
      const exclude = input.exclude_patterns ?? config.exclude_patterns;
      checkPatterns(exclude);
      const job = service.startBackup({
        deployment: input.deployment,
        include_files: true,
        include_database: input.include_database ?? config.include_database,
        exclude_patterns: exclude,
        description: input.description ?? '',
        destination: input.destination ?? config.destination,
        trigger: input.trigger ?? 'task',
        created_by: input.created_by ?? null,
        retention: input.retention,
      });
      output?.(`backup job ${job.id} queued`);
      const done = await jobs.wait(job.id);
      if (done.status === 'failed') throw new Error(`backup of '${input.deployment}' failed: ${done.error}`);
      const result = done.result ?? {};
      output?.(`backup ${String(result.backup_id)} completed (${String(result.size)} bytes)`);
      if (Array.isArray(result.pruned) && result.pruned.length) output?.(`retention pruned ${result.pruned.join(', ')}`);
      return { job_id: done.id, backup_id: String(result.backup_id), size: Number(result.size) };
    };

    const configs = await BackupConfigs.open(ctx.store, ctx.scheduler, ctx.log, async (deployment, config, output) => {
      if (!deploymentExists(deployment)) throw new Error(`deployment '${deployment}' no longer exists`);
      // Background work is audited by the plugin (requests are audited by the core).
      try {
        const done = await backupAndWait(
          {
            deployment,
            include_database: config.include_database,
            exclude_patterns: config.exclude_patterns,
            destination: config.destination,
            trigger: 'scheduled',
            retention: config.retention,
            description: 'scheduled backup',
          },
          output,
        );
        await ctx.audit({
          action: 'backups.scheduled',
          resource_type: 'backups',
          resource_id: done.backup_id,
          deployment,
          success: true,
          detail: { size: done.size },
        });
      } catch (err) {
        // The run's own error is what its execution reports (the kernel logs an audit failure).
        await ctx
          .audit({
            action: 'backups.scheduled',
            resource_type: 'backups',
            deployment,
            success: false,
            detail: { error: (err as Error).message.slice(0, 300) },
          })
          .catch(() => undefined);
        throw err;
      }
    });

    const provided: BackupsService = {
      backup: (input) => backupAndWait(input),
      list: (deployment) => service.list(deployment).map((b) => ({ id: b.id, deployment: b.deployment, size: b.size, created_at: b.created_at })),
    };

    // Each change is an operation (src/operations/), which its route, its plan preview and a plan's apply all run.
    const ownerOf = (bucket: string, key: string) => objectOwner(stores.list(), (id) => store.get(id)?.deployment, bucket, key);
    const backupOps = { ...backupOperations({ service, configs, stores, deploymentExists }), upload: uploadOperation({ service, deploymentExists }) };
    const storeOps = storeOperations({ stores, jobs, managed, deploymentExists, ownerOf });
    // Registration order is the API description's; '/backups/jobs' comes before '/backups/:id' takes it for an id.
    registerJobRoutes(ctx, jobs);
    registerBackupRoutes(ctx, { service, stores, ops: backupOps, uploadLimit: sizeOf(cfg.upload_limit), deploymentExists });
    registerDeploymentBackupRoutes(ctx, service, backupOps);
    registerBackupConfigRoutes(ctx, { configs, ops: backupConfigOperations({ configs, stores, deploymentExists }), deploymentExists });
    registerDestinationRoutes(ctx, stores, archiveDir);
    registerStoreRoutes(ctx, stores, storeOps);
    registerBucketRoutes(ctx, stores, storeOps);
    registerObjectRoutes(ctx, { stores, ops: objectOperations({ stores, ownerOf }), ownerOf });
    registerStoreActionRoutes(ctx, storeOps);

    ctx.events.on('deployment.deleted', async ({ name, retired_as }) => {
      // Its schedule and store attachments go with it; its backups and jobs stay under the retired name (they are how
      // it comes back, by an admin), so that a new deployment of the same name neither sees nor restores them.
      await configs.remove(name);
      const retired = service.retire(name, retired_as);
      const detached = await stores.detach(name);
      ctx.log.info('backups of a deleted deployment retired', { deployment: name, retired_as, backups: retired.backups.length, jobs: retired.jobs, detached });
    });
    const reconnect = async ({ name }: { name: string }) => {
      if (deps.docker) await managed.reconnect(name);
    };
    ctx.events.on('deployment.started', reconnect);
    ctx.events.on('deployment.updated', reconnect);

    return {
      provides: { backups: provided },
      start: () => service.cleanLeftovers(),
      stop: () => jobs.close(),
    };
  },
});
