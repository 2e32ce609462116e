/**
 * The backup archive: one gzip-compressed tar stream holding
 *   files/<path>                          the deployment folder (minus exclude patterns)
 *   databases/<service>.sql.part-000001…  logical dumps, cut into parts because a tar entry needs its size up
 *                                         front and a dump's size is only known at its end
 *   manifest.json                         last: every component with its size and SHA-256
 * Everything is streamed: memory holds at most one dump part, never the archive.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readlink, realpath, rename, rm, symlink, utimes } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { excludeMatcher, unsafeRelativePath } from './paths.js';
import { readTar, writeTar, type TarInput } from './tar-stream.js';
import { isHttpError, isInside, openInside, UNSAFE_FILE } from '@agent/sdk';

export const FORMAT = 'agent-backup/1';
/** Dumps are cut into parts of this size (each part is held in memory once while written). */
export const DUMP_PART_SIZE = 4 * 1024 * 1024;
const MANIFEST_LIMIT = 16 * 1024 * 1024;
const READ_CHUNK = 1024 * 1024;

export type DatabaseEngine = 'mysql' | 'postgres';

export interface FilesComponent {
  name: 'files';
  type: 'files';
  entries: number;
  size: number;
  sha256: string;
}

export interface DatabaseComponent {
  name: string;
  type: 'database';
  service: string;
  engine: DatabaseEngine;
  databases: string[];
  parts: number;
  size: number;
  sha256: string;
}

export type Component = FilesComponent | DatabaseComponent;

export interface Manifest {
  format: typeof FORMAT;
  id: string;
  deployment: string;
  created_at: string;
  description: string;
  /** Names of the compose and .env files inside `files/` (null when not included). */
  compose_file: string | null;
  env_file: string | null;
  exclude_patterns: string[];
  components: Component[];
  warnings: string[];
}

/** A database dump to include: `open` starts the dump program and streams its output. */
export interface DumpSource {
  service: string;
  engine: DatabaseEngine;
  databases: string[];
  open(): Promise<{ stdout: AsyncIterable<Buffer>; finish(): Promise<void> }>;
}

export interface Progress {
  /** Uncompressed bytes processed so far. */
  bytes: number;
  step: string;
}

export class ArchiveError extends Error {
  override readonly name = 'ArchiveError';
}

export interface WriteOptions {
  folder: string;
  includeFiles: boolean;
  exclude: string[];
  dumps: DumpSource[];
  meta: Pick<Manifest, 'id' | 'deployment' | 'created_at' | 'description' | 'compose_file' | 'env_file'>;
  /** Final path; the archive is written to `<output>.partial` and renamed only when complete. */
  output: string;
  level?: number;
  signal?: AbortSignal;
  onProgress?(progress: Progress): void;
}

export interface WrittenArchive {
  manifest: Manifest;
  /** Compressed size and SHA-256 of the archive file. */
  size: number;
  sha256: string;
}

const describe = (type: string, path: string, size: number, mode: number, link: string) =>
  `${type}\0${path}\0${size}\0${(mode & 0o7777).toString(8)}\0${link}\n`;

interface WalkItem {
  rel: string;
  abs: string;
  type: 'file' | 'directory' | 'symlink';
  size: number;
  mode: number;
  mtime: number;
}

/**
 * The folder's entries in a stable order, skipping excluded paths (and everything below an excluded folder). The
 * folder may be written by its containers while it is walked: a subfolder swapped for a symlink is not entered.
 */
async function* walk(root: string, isExcluded: (rel: string) => boolean, warnings: string[], rel = '', realRoot?: string): AsyncGenerator<WalkItem> {
  const base0 = realRoot ?? (await realpath(root));
  const dir = rel ? join(root, rel) : root;
  const names = (await readdir(dir)).sort();
  if (rel && !isInside(base0, await realpath(dir).catch(() => ''))) {
    warnings.push(`skipped ${rel}: it was replaced by a link out of the folder while it was read`);
    return;
  }
  for (const name of names) {
    const childRel = rel ? `${rel}/${name}` : name;
    if (isExcluded(childRel)) continue;
    const abs = join(dir, name);
    let st;
    try {
      st = await lstat(abs);
    } catch {
      continue; // removed while walking
    }
    const base = { rel: childRel, abs, size: 0, mode: st.mode, mtime: Math.floor(st.mtimeMs / 1000) };
    if (st.isDirectory()) {
      yield { ...base, type: 'directory' };
      yield* walk(root, isExcluded, warnings, childRel, base0);
    } else if (st.isFile()) yield { ...base, type: 'file', size: st.size };
    else if (st.isSymbolicLink()) yield { ...base, type: 'symlink' };
    else warnings.push(`skipped special file ${childRel}`);
  }
}

/** Reads a file of the folder without following a symlink swapped in after the walk, in the file or a folder above it. */
async function* fileBody(root: string, rel: string): AsyncGenerator<Buffer> {
  let handle;
  try {
    handle = await openInside(root, rel);
  } catch (err) {
    // Removed (or replaced by a symlink or special file) since the walk: recorded as a file that shrank.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR' || (isHttpError(err) && err.code === UNSAFE_FILE))
      return;
    throw err;
  }
  try {
    yield* handle.createReadStream({ highWaterMark: READ_CHUNK, autoClose: false }) as AsyncIterable<Buffer>;
  } finally {
    await handle.close();
  }
}

/** Buffers small chunks (tar headers) into larger ones so the compressor is not fed 512-byte writes. */
async function* coalesce(source: AsyncIterable<Buffer>, min = 256 * 1024): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let size = 0;
  for await (const chunk of source) {
    if (chunk.length >= min) {
      if (size) yield pending.length === 1 ? pending[0]! : Buffer.concat(pending, size);
      pending = [];
      size = 0;
      yield chunk;
      continue;
    }
    pending.push(chunk);
    size += chunk.length;
    if (size >= min) {
      yield Buffer.concat(pending, size);
      pending = [];
      size = 0;
    }
  }
  if (size) yield Buffer.concat(pending, size);
}

function hashTap(hash: Hash, count: { bytes: number }): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      count.bytes += chunk.length;
      done(null, chunk);
    },
  });
}

/** Writes the archive; on any failure the partial file is removed and nothing is left at `output`. */
export async function writeBackupArchive(opts: WriteOptions): Promise<WrittenArchive> {
  const warnings: string[] = [];
  const components: Component[] = [];
  const progress: Progress = { bytes: 0, step: 'starting' };
  let lastReport = 0;
  const report = (force = false) => {
    const now = Date.now();
    if (force || now - lastReport > 250) {
      lastReport = now;
      opts.onProgress?.({ ...progress });
    }
  };

  async function* entries(): AsyncGenerator<TarInput> {
    if (opts.includeFiles) {
      progress.step = 'files';
      report(true);
      const hash = createHash('sha256');
      const comp: FilesComponent = { name: 'files', type: 'files', entries: 0, size: 0, sha256: '' };
      for await (const item of walk(opts.folder, excludeMatcher(opts.exclude), warnings)) {
        opts.signal?.throwIfAborted();
        const path = `files/${item.rel}`;
        comp.entries++;
        if (item.type === 'directory') {
          hash.update(describe('d', item.rel, 0, item.mode, ''));
          yield { path: `${path}/`, type: 'directory', mode: item.mode, mtime: item.mtime };
        } else if (item.type === 'symlink') {
          const link = await readlink(item.abs);
          hash.update(describe('l', item.rel, 0, item.mode, link));
          yield { path, type: 'symlink', mode: item.mode, mtime: item.mtime, linkname: link };
        } else {
          hash.update(describe('f', item.rel, item.size, item.mode, ''));
          comp.size += item.size;
          const body = (async function* () {
            let written = 0;
            for await (const chunk of fileBody(opts.folder, item.rel)) {
              // Hash exactly what the tar entry will hold (a growing file is cut at its walked size).
              const part = written + chunk.length > item.size ? chunk.subarray(0, item.size - written) : chunk;
              written += part.length;
              hash.update(part);
              progress.bytes += part.length;
              report();
              yield chunk;
            }
            if (written < item.size) {
              hash.update(Buffer.alloc(item.size - written));
              warnings.push(`${item.rel} shrank while it was read; padded with zeros`);
            }
          })();
          yield {
            path,
            type: 'file',
            mode: item.mode,
            mtime: item.mtime,
            size: item.size,
            body,
            onSizeMismatch: (actual) => {
              if (actual > item.size) warnings.push(`${item.rel} grew while it was read; cut at ${item.size} bytes`);
            },
          };
        }
      }
      comp.sha256 = hash.digest('hex');
      components.push(comp);
    }
    for (const dump of opts.dumps) {
      opts.signal?.throwIfAborted();
      progress.step = `database ${dump.service}`;
      report(true);
      const comp: DatabaseComponent = {
        name: `database:${dump.service}`,
        type: 'database',
        service: dump.service,
        engine: dump.engine,
        databases: dump.databases,
        parts: 0,
        size: 0,
        sha256: '',
      };
      const hash = createHash('sha256');
      const running = await dump.open();
      let pending: Buffer[] = [];
      let pendingSize = 0;
      const part = (): TarInput => {
        comp.parts++;
        const data = pending;
        const size = pendingSize;
        pending = [];
        pendingSize = 0;
        return {
          path: `databases/${dump.service}.sql.part-${String(comp.parts).padStart(6, '0')}`,
          type: 'file',
          mode: 0o600,
          mtime: Math.floor(Date.now() / 1000),
          size,
          body: (async function* () {
            yield* data;
          })(),
        };
      };
      for await (const chunk of running.stdout) {
        opts.signal?.throwIfAborted();
        hash.update(chunk);
        comp.size += chunk.length;
        progress.bytes += chunk.length;
        report();
        pending.push(chunk);
        pendingSize += chunk.length;
        if (pendingSize >= DUMP_PART_SIZE) yield part();
      }
      await running.finish();
      if (pendingSize > 0) yield part();
      comp.sha256 = hash.digest('hex');
      components.push(comp);
    }
    progress.step = 'manifest';
    report(true);
    const manifest: Manifest = { format: FORMAT, ...opts.meta, exclude_patterns: opts.exclude, components, warnings };
    const body = Buffer.from(JSON.stringify(manifest, null, 2));
    yield {
      path: 'manifest.json',
      type: 'file',
      mode: 0o644,
      mtime: Math.floor(Date.now() / 1000),
      size: body.length,
      body: (async function* () {
        yield body;
      })(),
    };
  }

  const partial = `${opts.output}.partial`;
  const archiveHash = createHash('sha256');
  const written = { bytes: 0 };
  try {
    await pipeline(
      Readable.from(coalesce(writeTar(entries()))),
      createGzip({ level: opts.level ?? 6, chunkSize: 256 * 1024 }),
      hashTap(archiveHash, written),
      createWriteStream(partial, { mode: 0o600 }),
      { signal: opts.signal },
    );
    await rename(partial, opts.output);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
  progress.step = 'done';
  report(true);
  const manifest: Manifest = { format: FORMAT, ...opts.meta, exclude_patterns: opts.exclude, components, warnings };
  return { manifest, size: written.bytes, sha256: archiveHash.digest('hex') };
}

/** SHA-256 and size of a file, streamed. */
export async function hashFile(path: string, signal?: AbortSignal): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: READ_CHUNK, signal }) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    size += chunk.length;
  }
  return { sha256: hash.digest('hex'), size };
}

const PART_NAME = /^databases\/([a-z0-9][a-z0-9_.-]{0,62})\.sql\.part-(\d{6})$/;

const asArchiveError = (err: unknown): Error =>
  err instanceof ArchiveError || (err as Error)?.name === 'AbortError'
    ? (err as Error)
    : new ArchiveError(`the archive is corrupted: ${(err as Error).message}`);

/** The archive's tar entries, decompressed on the fly; gzip and tar errors become ArchiveError. */
async function* archiveEntries(path: string) {
  const gunzip = createGunzip({ chunkSize: 256 * 1024 });
  const source = createReadStream(path, { highWaterMark: READ_CHUNK });
  source.on('error', (err) => gunzip.destroy(err));
  source.pipe(gunzip);
  // Errors surface wherever the stream is read (also inside entry bodies): all become ArchiveError.
  const guarded = (async function* () {
    try {
      yield* gunzip as AsyncIterable<Buffer>;
    } catch (err) {
      throw asArchiveError(err);
    }
  })();
  try {
    for await (const entry of readTar(guarded)) {
      const body = entry.body;
      yield {
        ...entry,
        body: (async function* () {
          try {
            yield* body;
          } catch (err) {
            throw asArchiveError(err);
          }
        })(),
      };
    }
  } catch (err) {
    throw asArchiveError(err);
  } finally {
    source.destroy();
    gunzip.destroy();
  }
}

export interface VerifyOptions {
  /** Extracts `files/` into this folder (which must not exist yet); symlinks leaving it are skipped. */
  extractTo?: string;
  signal?: AbortSignal;
  onProgress?(progress: Progress): void;
}

/**
 * Reads the whole archive and checks every component against the manifest (sizes and SHA-256), optionally
 * extracting the files to a fresh folder on the way. Throws ArchiveError when anything does not match.
 */
export async function verifyArchive(path: string, opts: VerifyOptions = {}): Promise<Manifest> {
  const filesHash = createHash('sha256');
  const files = { entries: 0, size: 0 };
  const dbs = new Map<string, { hash: Hash; size: number; parts: number }>();
  const links: { at: string; target: string; rel: string }[] = [];
  const warnings: string[] = [];
  let manifestText: string | null = null;
  const progress: Progress = { bytes: 0, step: 'verifying' };
  let last = 0;
  const root = opts.extractTo ? resolve(opts.extractTo) : null;
  if (root) await mkdir(root, { recursive: false, mode: 0o755 });

  for await (const entry of archiveEntries(path)) {
    opts.signal?.throwIfAborted();
    if (manifestText !== null) throw new ArchiveError(`unexpected entry '${entry.path}' after the manifest`);
    if (entry.path === 'manifest.json' && entry.type === 'file') {
      if (entry.size > MANIFEST_LIMIT) throw new ArchiveError('manifest too large');
      const chunks: Buffer[] = [];
      for await (const c of entry.body) chunks.push(c);
      manifestText = Buffer.concat(chunks).toString('utf8');
      continue;
    }
    if (entry.path.startsWith('files/')) {
      const rel = entry.path.slice('files/'.length).replace(/\/$/, '');
      const problem = unsafeRelativePath(rel);
      if (problem) throw new ArchiveError(`unsafe path '${entry.path}' in the archive: ${problem}`);
      files.entries++;
      const target = root ? join(root, ...rel.split('/')) : null;
      if (entry.type === 'directory') {
        filesHash.update(describe('d', rel, 0, entry.mode, ''));
        if (target) await mkdir(target, { recursive: true, mode: (entry.mode & 0o7777) | 0o700 });
      } else if (entry.type === 'symlink') {
        filesHash.update(describe('l', rel, 0, entry.mode, entry.linkname));
        if (target) links.push({ at: target, target: entry.linkname, rel });
      } else if (entry.type === 'file') {
        filesHash.update(describe('f', rel, entry.size, entry.mode, ''));
        files.size += entry.size;
        const counted = (async function* () {
          for await (const chunk of entry.body) {
            filesHash.update(chunk);
            progress.bytes += chunk.length;
            if (Date.now() - last > 250) {
              last = Date.now();
              opts.onProgress?.({ ...progress });
            }
            yield chunk;
          }
        })();
        if (target) {
          await mkdir(dirname(target), { recursive: true, mode: 0o755 });
          // 'wx': never write through something that already exists there (a symlink from an earlier entry).
          await pipeline(Readable.from(counted), createWriteStream(target, { flags: 'wx', mode: entry.mode & 0o7777 }));
          await utimes(target, entry.mtime, entry.mtime).catch(() => undefined);
        } else for await (const _ of counted) void _;
      } else throw new ArchiveError(`unsupported entry type for '${entry.path}'`);
      continue;
    }
    const part = PART_NAME.exec(entry.path);
    if (part && entry.type === 'file') {
      const service = part[1]!;
      const db = dbs.get(service) ?? { hash: createHash('sha256'), size: 0, parts: 0 };
      dbs.set(service, db);
      db.parts++;
      if (Number(part[2]) !== db.parts) throw new ArchiveError(`dump part '${entry.path}' out of order`);
      for await (const chunk of entry.body) {
        db.hash.update(chunk);
        db.size += chunk.length;
        progress.bytes += chunk.length;
      }
      continue;
    }
    throw new ArchiveError(`unexpected entry '${entry.path}' in the archive`);
  }

  if (manifestText === null) throw new ArchiveError('the archive has no manifest (incomplete or not a backup)');
  let manifest: Manifest;
  try {
    manifest = JSON.parse(manifestText) as Manifest;
  } catch {
    throw new ArchiveError('the manifest is not valid JSON');
  }
  if (manifest.format !== FORMAT || !Array.isArray(manifest.components)) throw new ArchiveError(`unknown archive format '${String(manifest.format)}'`);
  const filesDigest = filesHash.digest('hex');
  const seenDbs = new Set<string>();
  for (const comp of manifest.components) {
    if (comp.type === 'files') {
      if (comp.entries !== files.entries || comp.size !== files.size || comp.sha256 !== filesDigest) {
        throw new ArchiveError('checksum mismatch in component files: the archive is corrupted');
      }
    } else if (comp.type === 'database') {
      const db = dbs.get(comp.service);
      const digest = db ? db.hash.digest('hex') : createHash('sha256').digest('hex');
      if ((db?.size ?? 0) !== comp.size || (db?.parts ?? 0) !== comp.parts || digest !== comp.sha256) {
        throw new ArchiveError(`checksum mismatch in component ${comp.name}: the archive is corrupted`);
      }
      seenDbs.add(comp.service);
    } else throw new ArchiveError('unknown component in the manifest');
  }
  if (!manifest.components.some((c) => c.type === 'files') && files.entries > 0) throw new ArchiveError('files not listed in the manifest');
  for (const service of dbs.keys()) if (!seenDbs.has(service)) throw new ArchiveError(`dump of '${service}' not listed in the manifest`);

  if (root) {
    // Symlinks last, so no file of the archive is ever written through one; links leaving the folder are dropped.
    for (const link of links) {
      const resolved = resolve(dirname(link.at), link.target);
      if (link.target.startsWith('/') || (resolved !== root && !resolved.startsWith(root + sep))) {
        warnings.push(`skipped symlink ${link.rel} -> ${link.target} (points outside the deployment)`);
        continue;
      }
      await mkdir(dirname(link.at), { recursive: true });
      await symlink(link.target, link.at);
    }
  }
  manifest.warnings = [...(manifest.warnings ?? []), ...warnings];
  return manifest;
}

/**
 * The dump of one database service, streamed from the archive (parts concatenated), checked against the
 * manifest's SHA-256 when it ends. A mismatch throws before the last chunk is returned to the consumer.
 */
export async function* databaseDump(path: string, component: DatabaseComponent): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  let size = 0;
  let started = false;
  let held: Buffer | null = null;
  for await (const entry of archiveEntries(path)) {
    const part = PART_NAME.exec(entry.path);
    if (!part || part[1] !== component.service) {
      if (started) break;
      continue;
    }
    started = true;
    for await (const chunk of entry.body) {
      hash.update(chunk);
      size += chunk.length;
      // Keep one chunk back so a corrupted dump never reaches its end in the database.
      if (held) yield held;
      held = chunk;
    }
  }
  if (size !== component.size || hash.digest('hex') !== component.sha256) {
    throw new ArchiveError(`checksum mismatch in component ${component.name}: the archive is corrupted`);
  }
  if (held) yield held;
}
