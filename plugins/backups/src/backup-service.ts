/**
 * Backups and restores of deployments: what runs inside the jobs. A backup streams the deployment folder and
 * database dumps into one archive, then uploads it to its destination. A restore verifies the whole archive
 * (extracting files to a staging folder) before it touches the target, and puts the target back as it was
 * when anything fails.
 */
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import pRetry from 'p-retry';
import { Dir, errors, isHttpError, readTextInside, removeInside, UNSAFE_FILE, type Logger, type Principal } from '@agent/sdk';
import { parseEnv, type DeploymentsService } from '@agent/plugin-deployments/api';
import { type DockerService } from '@agent/plugin-docker/api';
import {
  databaseDump,
  hashFile,
  verifyArchive,
  writeBackupArchive,
  ArchiveError,
  type DatabaseComponent,
  type DumpSource,
  type Manifest,
} from './archive/backup-archive.js';
import { copyEntry, dropEscapingLinks, openEntry, sortedEntries } from './archive/folder-ops.js';
import { excludeMatcher } from './archive/paths.js';
import { backupView, type BackupRecord, type BackupStore, type BackupView } from './backup-store.js';
import { DatabaseTools, type DatabaseService } from './databases.js';
import { newId, type JobContext, type Jobs, type JobView } from './jobs.js';
import type { StoreRegistry } from './s3/stores.js';

/** Files in a deployment folder that belong to the agent, not to the backup: never restored over the target's. */
const AGENT_OWNED = ['.agent.json'];

export interface BackupRequest {
  deployment: string;
  include_files: boolean;
  include_database: boolean;
  exclude_patterns: string[];
  description: string;
  destination: string;
  trigger: 'manual' | 'scheduled' | 'task';
  created_by: string | null;
  /** Keep at most this many backups of the deployment afterwards (0 = no pruning). */
  retention?: number;
}

export interface RestoreRequest {
  backup_id: string;
  target_name: string;
  restore_files: boolean;
  restore_database: boolean;
  auto_start: boolean;
  principal: Principal | null;
  created_by: string | null;
}

export interface ServiceOptions {
  archiveDir: string;
  compressionLevel: number;
  readyTimeoutMs: number;
}

export class BackupService {
  /** Recent deletions per deployment name: a backup that was running meanwhile is recorded under the retired name. */
  private readonly retirements = new Map<string, { retiredAs: string; at: number }[]>();

  constructor(
    private readonly services: { deployments(): DeploymentsService; docker(): DockerService },
    private readonly store: BackupStore,
    private readonly jobs: Jobs,
    private readonly stores: StoreRegistry,
    private readonly options: ServiceOptions,
    private readonly log: Logger,
    private readonly emit: (
      event: 'backup.finished' | 'restore.finished',
      payload: { id: string; deployment: string; success: boolean; error?: string },
    ) => void,
  ) {}

  private get deployments(): DeploymentsService {
    return this.services.deployments();
  }

  private get docker(): DockerService {
    return this.services.docker();
  }

  private get dbTools(): DatabaseTools {
    return new DatabaseTools(this.docker, this.deployments);
  }

  archivePath(id: string): string {
    return join(this.options.archiveDir, `${id}.tar.gz`);
  }

  private tmpDir(): string {
    return join(this.options.archiveDir, 'tmp');
  }

  /** Removes archives left half-written by a crash (never listed: they were not recorded). */
  async cleanLeftovers(): Promise<void> {
    await mkdir(this.options.archiveDir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.options.archiveDir)) {
      if (name.endsWith('.partial')) await rm(join(this.options.archiveDir, name), { force: true });
    }
    await rm(this.tmpDir(), { recursive: true, force: true });
  }

  private deployment(name: string) {
    const info = this.deployments.get(name);
    if (!info) throw errors.notFound(`deployment '${name}' not found`);
    return info;
  }

  private assertIdle(deployment: string): void {
    const busy = this.jobs.busy(deployment);
    if (busy) throw errors.conflict(`a ${busy.type} job (${busy.id}) is already ${busy.status} for deployment '${deployment}'`, 'JOB_IN_PROGRESS');
  }

  /** The checks of a backup before it is queued (what `startBackup` refuses); changes nothing. */
  checkBackup(req: BackupRequest): void {
    this.deployment(req.deployment);
    if (!req.include_files && !req.include_database) throw errors.badRequest('body: include_files and include_database are both false: nothing to back up');
    if (req.destination !== 'local') this.stores.get(req.destination);
    this.assertIdle(req.deployment);
  }

  /** Queues a backup; validation errors are thrown before anything is queued. */
  startBackup(req: BackupRequest): JobView {
    this.checkBackup(req);
    return this.jobs.submit({
      type: 'backup',
      deployment: req.deployment,
      trigger: req.trigger,
      created_by: req.created_by,
      run: (ctx) => this.runBackup(req, ctx),
    });
  }

  private async runBackup(req: BackupRequest, ctx: JobContext): Promise<Record<string, unknown>> {
    const started = Date.now();
    const id = newId('bkp');
    try {
      const info = this.deployment(req.deployment);
      const dumps: DumpSource[] = [];
      if (req.include_database) {
        ctx.progress({ step: 'finding databases' });
        for (const { service, engine } of await this.dbTools.declared(req.deployment)) {
          const db = await this.dbTools.resolve(req.deployment, service, engine);
          if (!db) throw new Error(`database service '${service}' is not running: start the deployment or back up without include_database`);
          dumps.push(this.dbTools.dumpSource(db, await this.dbTools.databases(db), ctx.signal));
        }
      }
      const rel = (abs: string) => (abs && dirname(abs) === info.path ? abs.slice(info.path.length + 1) : null);
      const written = await writeBackupArchive({
        folder: info.path,
        includeFiles: req.include_files,
        exclude: req.exclude_patterns,
        dumps,
        meta: {
          id,
          deployment: req.deployment,
          created_at: new Date().toISOString(),
          description: req.description,
          compose_file: rel(info.compose_file),
          env_file: rel(info.env_file),
        },
        output: this.archivePath(id),
        level: this.options.compressionLevel,
        signal: ctx.signal,
        onProgress: (p) => ctx.progress({ step: p.step, bytes: p.bytes }),
      });
      let record: BackupRecord = {
        id,
        deployment: req.deployment,
        description: req.description,
        status: 'completed',
        size: written.size,
        sha256: written.sha256,
        include_files: req.include_files,
        include_database: req.include_database,
        exclude_patterns: req.exclude_patterns,
        components: written.manifest.components.map((c) => ({ ...c })),
        warnings: written.manifest.warnings,
        destination: req.destination,
        remote: null,
        upload_error: null,
        trigger: req.trigger,
        created_by: req.created_by,
        created_at: written.manifest.created_at,
        duration_ms: 0,
        file: `${id}.tar.gz`,
        manifest: written.manifest,
      };
      if (req.destination !== 'local') {
        ctx.progress({ step: `uploading to ${req.destination}` });
        record = await this.upload(record, req.destination, ctx.signal);
      }
      record.duration_ms = Date.now() - started;
      // Deleted while the backup ran: the archive is the old deployment's, never the next one's of the same name.
      record.deployment = this.ownerAt(req.deployment, started);
      this.store.insert(record);
      let pruned: string[] = [];
      if (req.retention && req.retention > 0 && record.deployment === req.deployment) pruned = await this.prune(req.deployment, req.retention);
      this.emit('backup.finished', { id, deployment: req.deployment, success: true });
      return { backup_id: id, size: record.size, sha256: record.sha256, pruned, upload_error: record.upload_error };
    } catch (err) {
      await rm(this.archivePath(id), { force: true });
      this.emit('backup.finished', { id, deployment: req.deployment, success: false, error: (err as Error).message });
      throw err;
    }
  }

  /** Uploads the archive; a failed upload keeps the local backup and records why. */
  private async upload(record: BackupRecord, storeName: string, signal?: AbortSignal): Promise<BackupRecord> {
    const store = this.stores.get(storeName);
    const client = this.stores.client(storeName);
    const key = `${store.prefix}${record.deployment}/${record.id}.tar.gz`;
    try {
      if (!(await client.bucketExists(store.bucket))) await client.createBucket(store.bucket);
      await client.upload(store.bucket, key, createReadStream(this.archivePath(record.id)), {
        length: record.size,
        contentType: 'application/gzip',
        metadata: { sha256: record.sha256 },
        signal,
      });
      return { ...record, remote: { store: storeName, bucket: store.bucket, key } };
    } catch (err) {
      this.log.warn('backup upload failed', { backup: record.id, store: storeName, error: (err as Error).message });
      return { ...record, upload_error: (err as Error).message };
    } finally {
      client.destroy();
    }
  }

  /**
   * A deployment was deleted: its backups and jobs are kept under its retired name (admins can still read,
   * download and restore them into a named deployment); a new deployment of the same name starts without them.
   */
  retire(deployment: string, retiredAs: string): { backups: string[]; jobs: number } {
    const list = this.retirements.get(deployment) ?? [];
    list.push({ retiredAs, at: Date.now() });
    this.retirements.set(deployment, list.slice(-10));
    return { backups: this.store.retire(deployment, retiredAs), jobs: this.jobs.retire(deployment, retiredAs) };
  }

  /** The name a backup started at `startedAt` belongs to: the retired name when its deployment was deleted since. */
  private ownerAt(deployment: string, startedAt: number): string {
    return this.retirements.get(deployment)?.find((r) => r.at >= startedAt)?.retiredAs ?? deployment;
  }

  /** Deletes the oldest backups of a deployment beyond `keep`; returns their ids. */
  async prune(deployment: string, keep: number): Promise<string[]> {
    const all = this.store.list(deployment);
    const doomed = all.slice(keep);
    for (const b of doomed) await this.delete(b.id);
    return doomed.map((b) => b.id);
  }

  list(deployment?: string): BackupView[] {
    return this.store.list(deployment).map(backupView);
  }

  get(id: string): BackupRecord {
    const b = this.store.get(id);
    if (!b) throw errors.notFound(`backup '${id}' not found`, 'BACKUP_NOT_FOUND');
    return b;
  }

  /** Removes the record, the local archive and the uploaded copy (a missing remote copy is not an error). */
  async delete(id: string): Promise<void> {
    const b = this.get(id);
    if (b.remote && this.stores.find(b.remote.store)) {
      const client = this.stores.client(b.remote.store);
      try {
        await client.deleteObject(b.remote.bucket, b.remote.key);
      } catch (err) {
        this.log.warn('could not delete the uploaded copy', { backup: id, error: (err as Error).message });
      } finally {
        client.destroy();
      }
    }
    await rm(this.archivePath(id), { force: true });
    this.store.delete(id);
  }

  /**
   * Records a verified archive a user uploaded as a local backup of `deployment`: the file is moved (copied when on
   * another filesystem) into the archives as `<id>.tar.gz.partial`, then renamed, so a crash leaves nothing listed.
   */
  async adoptUpload(
    file: { path: string; size: number; sha256: string },
    meta: { deployment: string; description: string; created_by: string | null; manifest: Manifest },
  ): Promise<BackupRecord> {
    const started = Date.now();
    const id = newId('bkp');
    const path = this.archivePath(id);
    const partial = `${path}.partial`;
    await mkdir(this.options.archiveDir, { recursive: true, mode: 0o700 });
    try {
      await rename(file.path, partial).catch((err: NodeJS.ErrnoException) => (err.code === 'EXDEV' ? copyFile(file.path, partial) : Promise.reject(err)));
      await chmod(partial, 0o600);
      await rename(partial, path);
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
    const { manifest } = meta;
    const record: BackupRecord = {
      id,
      deployment: meta.deployment,
      description: meta.description,
      status: 'completed',
      size: file.size,
      sha256: file.sha256,
      include_files: manifest.components.some((c) => c.type === 'files'),
      include_database: manifest.components.some((c) => c.type === 'database'),
      exclude_patterns: manifest.exclude_patterns,
      components: manifest.components.map((c) => ({ ...c })),
      warnings: manifest.warnings,
      destination: 'local',
      remote: null,
      upload_error: null,
      trigger: 'upload',
      created_by: meta.created_by,
      created_at: new Date().toISOString(),
      duration_ms: Date.now() - started,
      file: `${id}.tar.gz`,
      manifest,
    };
    try {
      this.store.insert(record);
    } catch (err) {
      await rm(path, { force: true });
      throw err;
    }
    return record;
  }

  /** The local archive, fetched back from its object store when only the remote copy is left. */
  private async localArchive(b: BackupRecord, signal?: AbortSignal): Promise<{ path: string; temporary: boolean }> {
    const path = this.archivePath(b.id);
    if (existsSync(path)) return { path, temporary: false };
    if (!b.remote) throw new ArchiveError(`the archive of backup '${b.id}' is missing`);
    await mkdir(this.tmpDir(), { recursive: true, mode: 0o700 });
    const tmp = join(this.tmpDir(), `${b.id}.${Date.now()}.tar.gz`);
    const client = this.stores.client(b.remote.store);
    try {
      const got = await client.download(b.remote.bucket, b.remote.key, signal);
      await pipeline(got.body, createWriteStream(tmp, { mode: 0o600 }));
    } finally {
      client.destroy();
    }
    return { path: tmp, temporary: true };
  }

  /**
   * Quick synchronous checks before a restore is queued: the archive is there and its SHA-256 is the recorded
   * one (a corrupted archive is refused with 422 before anything happens).
   */
  async precheckRestore(req: RestoreRequest): Promise<BackupRecord> {
    const b = this.get(req.backup_id);
    if (!req.restore_files && !req.restore_database) throw errors.badRequest('body: restore_files and restore_database are both false: nothing to restore');
    if (req.restore_database && !b.components.some((c) => c.type === 'database')) {
      throw errors.badRequest(`body.restore_database: backup '${b.id}' holds no database dump`);
    }
    if (req.restore_files && !b.include_files) throw errors.badRequest(`body.restore_files: backup '${b.id}' holds no files`);
    const exists = !!this.deployments.get(req.target_name);
    if (!exists && !req.restore_files) throw errors.badRequest('body.restore_files: restoring into a new deployment needs the files');
    this.assertIdle(req.target_name);
    const path = this.archivePath(b.id);
    if (existsSync(path)) {
      const actual = await hashFile(path);
      if (actual.size !== b.size || actual.sha256 !== b.sha256) {
        throw new ArchiveError(`the archive of backup '${b.id}' is corrupted (its SHA-256 does not match the one recorded)`);
      }
    } else if (!b.remote) throw errors.conflict(`the archive of backup '${b.id}' is missing`, 'BACKUP_ARCHIVE_MISSING');
    return b;
  }

  startRestore(req: RestoreRequest): JobView {
    return this.jobs.submit({
      type: 'restore',
      deployment: req.target_name,
      backup_id: req.backup_id,
      trigger: 'manual',
      created_by: req.created_by,
      run: (ctx) => this.runRestore(req, ctx),
    });
  }

  private async runRestore(req: RestoreRequest, ctx: JobContext): Promise<Record<string, unknown>> {
    const b = this.get(req.backup_id);
    const undo: (() => Promise<void>)[] = [];
    const cleanup: (() => Promise<void>)[] = [];
    const target = req.target_name;
    let archive: { path: string; temporary: boolean } | null = null;
    /** The target's folder as it was before the restore, once replaced (a rollback renames it back). */
    let previous: string | null = null;
    try {
      ctx.progress({ step: 'fetching archive' });
      archive = await this.localArchive(b, ctx.signal);
      if (archive.temporary) {
        const got = await hashFile(archive.path, ctx.signal);
        if (got.sha256 !== b.sha256) throw new ArchiveError(`the downloaded archive of backup '${b.id}' does not match its SHA-256`);
        cleanup.push(() => rm(archive!.path, { force: true }));
      }

      // 1. Verify everything (files extracted to a staging folder next to the deployments) before touching the target.
      ctx.progress({ step: 'verifying archive', total_bytes: b.components.reduce((n, c) => n + c.size, 0) });
      const root = this.deployments.root();
      const stagingName = `.restore-${ctx.id}`;
      const staging = req.restore_files ? join(root, stagingName) : undefined;
      // Removed without following links (removeInside), like every tree below the deployments' root.
      if (staging) cleanup.push(() => removeInside(root, stagingName));
      let manifest: Manifest;
      try {
        manifest = await verifyArchive(archive.path, { extractTo: staging, signal: ctx.signal, onProgress: (p) => ctx.progress({ bytes: p.bytes }) });
      } catch (err) {
        throw err instanceof ArchiveError ? new Error(`${err.message}; nothing was changed`) : err;
      }

      // 2. The target: an existing deployment, or a new one created from the archive's compose file.
      let existing = this.deployments.get(target);
      const created = !existing;
      let wasRunning = false;
      if (!existing) {
        if (!staging || !manifest.compose_file) throw new Error('the backup has no compose file: it cannot create a new deployment');
        ctx.progress({ step: `creating deployment ${target}` });
        // Read relative to the staged folder, never through a link (the names come from the archive).
        const compose = await readTextInside(staging, manifest.compose_file);
        if (compose === null) throw new Error(`the backup has no compose file '${manifest.compose_file}': it cannot create a new deployment`);
        const envText = manifest.env_file ? await readTextInside(staging, manifest.env_file).catch(() => null) : null;
        // Read as the deployment's own `.env` is; names compose takes but a deployment is not created with (`a.b`,
        // `a-b`) are left out, as before.
        const env_vars = Object.entries(parseEnv(envText ?? ''))
          .filter(([key]) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(key))
          .map(([key, value]) => ({ key, value }));
        await this.deployments.create({ name: target, compose_content: compose, env_vars, auto_start: false }, req.principal);
        undo.push(() => this.deployments.remove(target, { remove_files: true }));
        existing = this.deployments.get(target)!;
      } else {
        wasRunning = existing.status === 'running' || existing.status === 'partial';
        ctx.progress({ step: `stopping ${target}` });
        await this.deployments.stop(target);
        // Rolled back last: the target ends as it was, running or stopped.
        undo.push(async () => {
          if (wasRunning) await this.deployments.start(target);
          else await this.deployments.stop(target);
        });
      }
      const folder = existing.path;

      // 3. Files: swap the staged folder in (same filesystem: renames), keeping what the backup had excluded.
      if (staging) {
        ctx.progress({ step: 'restoring files' });
        const carried = await this.carryOverExcluded(folder, staging, manifest.exclude_patterns, manifest.warnings);
        // The agent's own metadata of the target (created_at, log sources…) stays the target's.
        for (const own of AGENT_OWNED) await this.keepAgentFile(folder, staging, own);
        // A link carried over may lead out through links of the backup: the staged tree is checked as a whole again.
        if (carried.links > 0) {
          for (const dropped of await dropEscapingLinks(staging)) {
            manifest.warnings.push(`symlink ${dropped.rel} -> ${dropped.target} not carried over: it resolves outside the deployment folder`);
          }
        }
        const oldName = `.restore-${ctx.id}-previous`;
        const old = join(root, oldName);
        await rename(folder, old);
        try {
          await rename(staging, folder);
        } catch (err) {
          await rename(old, folder);
          throw err;
        }
        undo.push(async () => {
          await removeInside(dirname(folder), basename(folder));
          await rename(old, folder);
          await this.deployments.refresh(target).catch(() => undefined);
        });
        previous = oldName;
        await this.deployments.refresh(target);
      }

      // 4. Databases: start only the database services, keep a safety dump, load the backup's dump.
      const restoredDbs: string[] = [];
      if (req.restore_database) {
        for (const comp of manifest.components.filter((c): c is DatabaseComponent => c.type === 'database')) {
          ctx.progress({ step: `restoring database ${comp.service}` });
          const db = await this.startDatabase(target, comp, ctx.signal);
          const safety = created ? null : await this.safetyDump(db, ctx);
          if (safety) {
            cleanup.push(() => rm(safety, { force: true }));
            undo.push(async () => {
              const again = await this.startDatabase(target, comp);
              await this.dbTools.loadFile(again, safety);
            });
          }
          await this.dbTools.load(db, databaseDump(archive.path, comp), ctx.signal);
          restoredDbs.push(comp.service);
        }
      }

      // 5. Start (or leave stopped).
      if (req.auto_start) {
        ctx.progress({ step: `starting ${target}` });
        await this.deployments.start(target);
      } else if (restoredDbs.length) await this.deployments.stop(target);
      if (previous) await this.removePrevious(root, previous, manifest.warnings);
      this.emit('restore.finished', { id: b.id, deployment: target, success: true });
      return { backup_id: b.id, target, restored_files: !!staging, restored_databases: restoredDbs, warnings: manifest.warnings };
    } catch (err) {
      // Put the target back as it was, newest change first.
      ctx.progress({ step: 'rolling back' });
      for (const step of undo.reverse()) {
        try {
          await step();
        } catch (rollbackError) {
          this.log.error('restore rollback step failed', { target, error: (rollbackError as Error).message });
        }
      }
      this.emit('restore.finished', { id: b.id, deployment: target, success: false, error: (err as Error).message });
      throw err;
    } finally {
      for (const step of cleanup) await step().catch(() => undefined);
    }
  }

  /**
   * Copies what the backup had excluded from the current folder into the staged one (a restore keeps those files),
   * where the backup holds nothing of that name. Both trees are walked through open directories, never through a
   * link: a link is carried over as a link, FIFOs and devices are not, a folder of the staged tree that is a link
   * there takes nothing. Copies, not moves, so a rollback finds the current folder untouched.
   */
  private async carryOverExcluded(folder: string, staging: string, patterns: string[], warnings: string[]): Promise<{ links: number }> {
    const carried = { links: 0 };
    if (!patterns.length) return carried;
    let excluded: (rel: string) => boolean;
    try {
      excluded = excludeMatcher(patterns);
    } catch (err) {
      // Patterns of an older backup that the matcher no longer takes: nothing is carried over rather than guessed.
      warnings.push(`files the backup excluded were not carried over: ${(err as Error).message}`);
      return carried;
    }
    /** The staged folder at `rel`, opened (and created like its source) only when something goes into it. */
    const visit = async (from: Dir, rel: string, to: () => Promise<Dir | null>): Promise<void> => {
      for (const dirent of await sortedEntries(from)) {
        const childRel = rel ? `${rel}/${dirent.name}` : dirent.name;
        if (excluded(childRel)) {
          const dest = await to();
          if (!dest) return;
          const present = await dest.lstat(dirent.name).then(
            () => true,
            (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? false : Promise.reject(err)),
          );
          if (!present) carried.links += await copyEntry(from, dest, dirent.name, dirent, childRel, warnings);
        } else if (dirent.isDirectory()) {
          const entry = await openEntry(from, dirent.name, dirent, () => warnings.push(`${childRel} was not carried over: it kept changing while it was read`));
          if (entry?.type !== 'directory') {
            if (entry?.type === 'file') await entry.handle.close();
            continue;
          }
          let sub: Dir | null | undefined;
          const open = async (): Promise<Dir | null> => {
            if (sub !== undefined) return sub;
            const parent = await to();
            sub = parent ? await this.stagedDir(parent, dirent.name, entry.stat.mode, childRel, warnings) : null;
            return sub;
          };
          try {
            await visit(entry.dir, childRel, open);
          } finally {
            await entry.dir.close();
            await sub?.close();
          }
        }
      }
    };
    const source = await Dir.openRoot(folder);
    const top = await Dir.openRoot(staging);
    try {
      await visit(source, '', async () => top);
    } finally {
      await source.close();
      await top.close();
    }
    return carried;
  }

  /** The staged folder `name` of `parent`, created when the backup had none; null (with a warning) when it is not a folder. */
  private async stagedDir(parent: Dir, name: string, mode: number, rel: string, warnings: string[]): Promise<Dir | null> {
    try {
      return await parent.dir(name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        if (isHttpError(err) && err.code === UNSAFE_FILE) {
          warnings.push(`excluded files below ${rel} were not carried over: the backup holds a file or link there`);
          return null;
        }
        throw err;
      }
    }
    await parent.mkdir(name, (mode & 0o777) | 0o700);
    return parent.dir(name);
  }

  /** Replaces the staged copy of an agent-owned file by the target's own (regular files only, never through a link). */
  private async keepAgentFile(folder: string, staging: string, name: string): Promise<void> {
    const source = await Dir.openRoot(folder);
    const dest = await Dir.openRoot(staging);
    try {
      let opened;
      try {
        opened = await source.openFile(name);
      } catch (err) {
        // The target has none (or something that is not a regular file): the backup's stays.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (isHttpError(err) && err.code === UNSAFE_FILE)) return;
        throw err;
      }
      await opened.handle.close();
      await removeInside(staging, name);
      await copyEntry(source, dest, name, null, name, []);
    } finally {
      await source.close();
      await dest.close();
    }
  }

  /**
   * Removes the folder a restore replaced, without following any link (it holds what containers wrote). Something
   * may still write into it (a container outside the deployment with a bind mount of it): a few tries, then a
   * warning naming the folder, which is left as it is.
   */
  private async removePrevious(root: string, name: string, warnings: string[]): Promise<void> {
    // Five tries, 200 ms apart.
    await pRetry(() => removeInside(root, name), { retries: 4, minTimeout: 200, factor: 1 }).catch((err: Error) => {
      this.log.warn('could not remove the folder a restore replaced', { folder: join(root, name), error: err.message });
      warnings.push(`the previous folder ${join(root, name)} could not be removed (${err.message}): something still writes into it`);
    });
  }

  /** Starts one database service of a deployment (compose up of that service) and waits until it answers. */
  private async startDatabase(deployment: string, comp: DatabaseComponent, signal?: AbortSignal): Promise<DatabaseService> {
    this.deployment(deployment);
    const declared = await this.dbTools.declared(deployment);
    const match = declared.find((d) => d.service === comp.service);
    if (!match) throw new Error(`deployment '${deployment}' has no database service '${comp.service}' to restore into`);
    if (match.engine !== comp.engine) throw new Error(`service '${comp.service}' is ${match.engine}, the dump is ${comp.engine}`);
    let db = await this.dbTools.resolve(deployment, comp.service, comp.engine);
    if (!db) {
      // Through the deployment's own start: the restored files are checked like any others before anything runs.
      await this.deployments.startServices(deployment, [comp.service]);
      if (signal?.aborted) throw new Error('restore cancelled');
      db = await this.dbTools.resolve(deployment, comp.service, comp.engine);
      if (!db) throw new Error(`service '${comp.service}' did not start`);
    }
    await this.dbTools.waitReady(db, this.options.readyTimeoutMs, signal);
    return db;
  }

  /** Dumps the target's current databases to a file so a failed restore can put them back. */
  private async safetyDump(db: DatabaseService, ctx: JobContext): Promise<string | null> {
    const databases = await this.dbTools.databases(db);
    if (!databases.length) return null;
    await mkdir(this.tmpDir(), { recursive: true, mode: 0o700 });
    const path = join(this.tmpDir(), `safety-${ctx.id}-${db.service}.sql`);
    const run = await this.dbTools.dumpSource(db, databases, ctx.signal).open();
    await pipeline(run.stdout, createWriteStream(path, { mode: 0o600 }));
    await run.finish();
    return path;
  }

  async archiveSize(id: string): Promise<number | null> {
    try {
      return (await stat(this.archivePath(id))).size;
    } catch {
      return null;
    }
  }
}
