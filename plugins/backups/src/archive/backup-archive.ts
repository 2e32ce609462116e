/**
 * The backup archive: one gzip-compressed tar stream holding
 *   files/<path>                          the deployment folder (minus exclude patterns)
 *   databases/<service>.sql.part-000001…  logical dumps, cut into parts because a tar entry needs its size up
 *                                         front and a dump's size is only known at its end
 *   manifest.json                         last: every component with its size and SHA-256
 * Everything is streamed: memory holds at most one dump part, never the archive.
 *
 * node-tar (`tar`) writes and reads the tar stream. The writer hands its `Pack` entries the agent opened itself
 * (through `Dir`, see folder-ops.ts), so node-tar never opens a path of the deployment folder; a restore extracts
 * with node-tar's `Unpack` (which refuses `..`, absolute names and writing through links) behind our own filter
 * (no devices or FIFOs, hard links only to files stored earlier, no setuid/setgid/sticky bits), into a fresh
 * staging folder no container can reach, and finally removes the links that resolve outside of it.
 */
import { createHash, type Hash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, type FileHandle } from 'node:fs/promises';
import { posix, resolve } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { Header, Pack, Parser, ReadEntry, Unpack, type WriteEntry } from 'tar';
import { Dir } from '@agent/sdk';
import { dropEscapingLinks, openEntry, sortedEntries, SPECIAL_BITS } from './folder-ops.js';
import { excludeMatcher, unsafeRelativePath } from './paths.js';

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

/** Entries of `files/` are the deployment folder; `files/<path>`. */
const FILES = 'files/';
/** How many entries may wait inside node-tar's Pack at once (each holds its header, at most one body chunk). */
const MAX_QUEUED_ENTRIES = 64;
const ZEROS = Buffer.alloc(READ_CHUNK);
/** Regular-file entry types (`0`, the old `\0`, and contiguous files, which every reader treats as files). */
const FILE_TYPES = new Set(['File', 'OldFile', 'ContiguousFile']);

/**
 * One line of the `files` component's SHA-256 per entry, followed by the content of a regular file: type (`f` file,
 * `d` folder, `l` symlink, `h` hard link, else node-tar's type name), path below `files/`, size, mode and link
 * target, as stored in the archive. The same lines as the archives written before node-tar, so those still verify.
 */
export const describeEntry = (type: string, path: string, size: number, mode: number, link: string): string =>
  `${type}\0${path}\0${size}\0${(mode & 0o7777).toString(8)}\0${link}\n`;

/**
 * Groups small chunks (tar headers, small files) into larger ones so the compressor is not fed 512-byte writes;
 * large chunks pass as they are, without a copy. Its buffer (several read chunks) lets the folder be read and
 * hashed on the main thread while zlib compresses earlier chunks on the threadpool.
 */
class Coalesce extends Transform {
  private pending: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly min: number,
    buffer: number,
  ) {
    super({ writableHighWaterMark: buffer, readableHighWaterMark: buffer });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (chunk.length >= this.min) {
      this.release();
      this.push(chunk);
    } else {
      this.pending.push(chunk);
      this.size += chunk.length;
      if (this.size >= this.min) this.release();
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    this.release();
    done();
  }

  private release(): void {
    if (!this.size) return;
    this.push(this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.size));
    this.pending = [];
    this.size = 0;
  }
}

interface EntryHeader {
  path: string;
  type: 'File' | 'Directory' | 'SymbolicLink';
  mode: number;
  size: number;
  /** Seconds since the epoch. */
  mtime: number;
  uid?: number;
  gid?: number;
  linkpath?: string;
}

interface OpenTarEntry {
  /** The mode node-tar wrote in the header (it makes readable folders listable): what the SHA-256 covers. */
  mode: number;
  /** Writes body bytes (exactly the header's size in total), waiting while the archive's consumer is busy. */
  write(chunk: Buffer): Promise<void>;
  end(): void;
}

/**
 * Feeds node-tar's `Pack` with entries whose bodies we stream ourselves (a `ReadEntry` per entry, the way node-tar
 * copies entries from one archive into another): node-tar encodes headers (ustar, pax for long names and sizes)
 * and never opens a path. Memory stays bounded: a body waits on its entry's backpressure, and no more than
 * MAX_QUEUED_ENTRIES entries wait inside the Pack.
 */
class TarWriter {
  readonly pack: Pack;
  private added: WriteEntry | null = null;
  /** Entries the Pack has not finished, oldest first (they finish in order). */
  private readonly queued: WriteEntry[] = [];
  private readonly finished = new WeakSet<WriteEntry>();

  constructor(private readonly signal: AbortSignal) {
    this.pack = new Pack({
      // Called synchronously while `write` wraps our entry (a WriteEntryTar, typed as node-tar's WriteEntry).
      onWriteEntry: (entry) => {
        this.added = entry;
        this.queued.push(entry);
        entry.once('end', () => {
          this.finished.add(entry);
          while (this.queued.length && this.finished.has(this.queued[0]!)) this.queued.shift();
        });
      },
    });
  }

  async add(header: EntryHeader): Promise<OpenTarEntry> {
    while (this.queued.length >= MAX_QUEUED_ENTRIES) await once(this.queued[0]!, 'end', { signal: this.signal });
    this.signal.throwIfAborted();
    const entry = new ReadEntry(new Header({ ...header, mtime: new Date(header.mtime * 1000) }));
    this.added = null;
    this.pack.write(entry);
    const wrapped = this.added as WriteEntry | null;
    if (!wrapped) throw new Error(`node-tar did not take the entry '${header.path}'`);
    return {
      // The header node-tar built while wrapping the entry (it makes readable folders listable).
      mode: wrapped.header?.mode ?? header.mode,
      write: async (chunk) => {
        if (!entry.write(chunk)) await once(entry, 'drain', { signal: this.signal });
      },
      end: () => entry.end(),
    };
  }
}

interface WriteContext {
  tar: TarWriter;
  warnings: string[];
  signal: AbortSignal;
  counted(bytes: number): void;
}

/** The deployment folder as `files/…` entries, read through `Dir` (never through a link); returns its component. */
async function writeFolder(ctx: WriteContext, folder: string, exclude: string[]): Promise<FilesComponent> {
  const isExcluded = excludeMatcher(exclude);
  const hash = createHash('sha256');
  const comp: FilesComponent = { name: 'files', type: 'files', entries: 0, size: 0, sha256: '' };

  const visit = async (dir: Dir, rel: string): Promise<void> => {
    for (const dirent of await sortedEntries(dir)) {
      ctx.signal.throwIfAborted();
      const childRel = rel ? `${rel}/${dirent.name}` : dirent.name;
      if (isExcluded(childRel)) continue;
      const entry = await openEntry(dir, dirent.name, dirent, () => ctx.warnings.push(`skipped ${childRel}: it kept changing while it was read`));
      if (!entry) continue;
      if (entry.type === 'special') {
        ctx.warnings.push(`skipped ${childRel}: FIFOs, sockets and devices are not backed up`);
        continue;
      }
      const base = { mode: entry.stat.mode & 0o7777, mtime: Math.floor(entry.stat.mtimeMs / 1000), uid: entry.stat.uid, gid: entry.stat.gid };
      comp.entries++;
      if (entry.type === 'directory') {
        try {
          const tarEntry = await ctx.tar.add({ ...base, path: `${FILES}${childRel}/`, type: 'Directory', size: 0 });
          tarEntry.end();
          hash.update(describeEntry('d', childRel, 0, tarEntry.mode, ''));
          await visit(entry.dir, childRel);
        } finally {
          await entry.dir.close();
        }
      } else if (entry.type === 'symlink') {
        // Stored as its text: never followed.
        const tarEntry = await ctx.tar.add({ ...base, path: `${FILES}${childRel}`, type: 'SymbolicLink', size: 0, linkpath: entry.target });
        tarEntry.end();
        hash.update(describeEntry('l', childRel, 0, tarEntry.mode, entry.target));
      } else {
        try {
          comp.size += await writeFile(ctx, entry.handle, entry.stat.size, childRel, base, hash);
        } finally {
          await entry.handle.close();
        }
      }
    }
  };

  const top = await Dir.openRoot(folder);
  try {
    await visit(top, '');
  } finally {
    await top.close();
  }
  comp.sha256 = hash.digest('hex');
  return comp;
}

/**
 * One regular file, from its open handle. The header's size is the size when it was opened; a file that shrinks
 * meanwhile is padded with zeros, one that grows is cut (a tar entry cannot change its size): the archive stays
 * valid either way, with a warning.
 */
async function writeFile(
  ctx: WriteContext,
  handle: FileHandle,
  size: number,
  rel: string,
  base: { mode: number; mtime: number; uid: number; gid: number },
  hash: Hash,
): Promise<number> {
  const tarEntry = await ctx.tar.add({ ...base, path: `${FILES}${rel}`, type: 'File', size });
  hash.update(describeEntry('f', rel, size, tarEntry.mode, ''));
  let done = 0;
  while (done < size) {
    const want = Math.min(READ_CHUNK, size - done);
    // A fresh buffer per chunk: node-tar and zlib keep a reference until it is compressed.
    const buffer = Buffer.allocUnsafe(want);
    const { bytesRead } = await handle.read(buffer, 0, want, done);
    if (bytesRead === 0) break;
    const chunk = bytesRead === want ? buffer : buffer.subarray(0, bytesRead);
    hash.update(chunk);
    done += bytesRead;
    ctx.counted(bytesRead);
    await tarEntry.write(chunk);
  }
  if (done < size) {
    ctx.warnings.push(`${rel} shrank while it was read; padded with zeros to ${size} bytes`);
    while (done < size) {
      const zeros = ZEROS.subarray(0, Math.min(ZEROS.length, size - done));
      hash.update(zeros);
      done += zeros.length;
      await tarEntry.write(zeros);
    }
  } else if ((await handle.read(Buffer.alloc(1), 0, 1, size)).bytesRead > 0) {
    ctx.warnings.push(`${rel} grew while it was read; cut at ${size} bytes`);
  }
  tarEntry.end();
  return size;
}

/** A database dump in parts of DUMP_PART_SIZE (a part's size must be known before its header is written). */
async function writeDump(ctx: WriteContext, dump: DumpSource): Promise<DatabaseComponent> {
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
  const flush = async () => {
    comp.parts++;
    const tarEntry = await ctx.tar.add({
      path: `databases/${dump.service}.sql.part-${String(comp.parts).padStart(6, '0')}`,
      type: 'File',
      mode: 0o600,
      mtime: Math.floor(Date.now() / 1000),
      size: pendingSize,
    });
    for (const chunk of pending) await tarEntry.write(chunk);
    tarEntry.end();
    pending = [];
    pendingSize = 0;
  };
  for await (const chunk of running.stdout) {
    ctx.signal.throwIfAborted();
    hash.update(chunk);
    comp.size += chunk.length;
    ctx.counted(chunk.length);
    pending.push(chunk);
    pendingSize += chunk.length;
    if (pendingSize >= DUMP_PART_SIZE) await flush();
  }
  await running.finish();
  if (pendingSize > 0) await flush();
  comp.sha256 = hash.digest('hex');
  return comp;
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
  const step = (name: string) => {
    progress.step = name;
    report(true);
  };

  // One signal for both halves: a failure of either (or the job's cancellation) stops the other.
  const stop = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
  let firstError: unknown = null;
  const failed = (err: unknown) => {
    firstError ??= err;
    stop.abort(err);
    throw err;
  };

  const tar = new TarWriter(signal);
  const ctx: WriteContext = {
    tar,
    warnings,
    signal,
    counted: (bytes) => {
      progress.bytes += bytes;
      report();
    },
  };
  const partial = `${opts.output}.partial`;
  const archiveHash = createHash('sha256');
  const written = { bytes: 0 };
  const coalesce = new Coalesce(256 * 1024, 8 * READ_CHUNK);
  tar.pack.on('error', (err: unknown) => coalesce.destroy(err as Error));
  tar.pack.pipe(coalesce);
  const output = pipeline(
    coalesce,
    createGzip({ level: opts.level ?? 6, chunkSize: 256 * 1024 }),
    hashTap(archiveHash, written),
    createWriteStream(partial, { mode: 0o600 }),
    { signal },
  );

  const produce = async () => {
    if (opts.includeFiles) {
      step('files');
      components.push(await writeFolder(ctx, opts.folder, opts.exclude));
    }
    for (const dump of opts.dumps) {
      signal.throwIfAborted();
      step(`database ${dump.service}`);
      components.push(await writeDump(ctx, dump));
    }
    step('manifest');
    const manifest: Manifest = { format: FORMAT, ...opts.meta, exclude_patterns: opts.exclude, components, warnings };
    const body = Buffer.from(JSON.stringify(manifest, null, 2));
    const tarEntry = await tar.add({ path: 'manifest.json', type: 'File', mode: 0o644, mtime: Math.floor(Date.now() / 1000), size: body.length });
    await tarEntry.write(body);
    tarEntry.end();
    tar.pack.end();
  };

  // Both halves settle before the partial file is removed, so nothing writes to it afterwards.
  await Promise.allSettled([produce().catch(failed), output.catch(failed)]);
  if (firstError !== null) {
    await rm(partial, { force: true });
    throw firstError;
  }
  try {
    await rename(partial, opts.output);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
  step('done');
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

const isAbort = (err: unknown) => (err as Error)?.name === 'AbortError';

const asArchiveError = (err: unknown): Error =>
  err instanceof ArchiveError || isAbort(err) ? (err as Error) : new ArchiveError(`the archive is corrupted: ${(err as Error).message}`);

/**
 * Decompresses the archive (Node's zlib, on the threadpool) and feeds the tar stream to node-tar parsers chunk by
 * chunk, waiting while one holds back (an extraction writing to disk); yields after each chunk. Ends at the first
 * parser error (a damaged tar stream: ArchiveError), gzip error (ArchiveError) or `refused()` answer (a refusal
 * decided while parsing, thrown as it is).
 */
async function* pumpArchive(path: string, parsers: Parser[], refused: () => Error | null, signal?: AbortSignal): AsyncGenerator<void> {
  const source = createReadStream(path, { highWaterMark: READ_CHUNK });
  const gunzip = createGunzip({ chunkSize: 256 * 1024 });
  source.on('error', (err) => gunzip.destroy(err));
  source.pipe(gunzip);
  let broken: Error | null = null;
  let reject: (err: Error) => void = () => undefined;
  const failure = new Promise<never>((_, r) => (reject = r));
  failure.catch(() => undefined);
  for (const parser of parsers) {
    parser.on('error', (err: Error) => {
      broken ??= err;
      reject(err);
    });
  }
  const check = () => {
    if (broken) throw asArchiveError(broken);
    const refusal = refused();
    if (refusal) throw refusal;
  };
  const wait = async (pending: Promise<unknown>) => {
    try {
      await Promise.race([pending, failure]);
    } catch (err) {
      check();
      throw err;
    }
  };
  try {
    const chunks = (gunzip as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await chunks.next();
      } catch (err) {
        throw asArchiveError(err);
      }
      if (next.done) break;
      for (const parser of parsers) {
        signal?.throwIfAborted();
        const flowing = parser.write(next.value);
        check();
        if (!flowing) await wait(once(parser, 'drain', { signal }));
      }
      yield;
    }
    const closed = Promise.all(parsers.map((parser) => once(parser, 'close')));
    // Ending a parser that never saw a tar entry fails it at once (TAR_BAD_ARCHIVE): check() below then throws before
    // `closed` is awaited, and its rejection, left unhandled, would end the agent (a gzip of anything but a tar).
    closed.catch(() => undefined);
    for (const parser of parsers) parser.end();
    check();
    await wait(closed);
    check();
  } finally {
    source.destroy();
    gunzip.destroy();
  }
}

/** What a restore does with one `files/` entry. */
interface Decision {
  /** The path below `files/`. */
  rel: string;
  extract: boolean;
  /** Why the whole archive is refused (an entry our writer never produces: a forged or damaged archive). */
  refuse?: string;
  /** What the restore changed or left out (the folder held it, the restore does not bring it back as it was). */
  warning?: string;
}

/**
 * The rules for `files/` entries. Decisions depend on the entries before (a hard link may only point to a regular
 * file stored earlier), so each pass over the archive has its own instance.
 */
class FilesPolicy {
  /** Paths (below files/) of the regular files stored so far and not replaced since. */
  private readonly regular = new Set<string>();

  decide(entry: ReadEntry): Decision {
    const rel = entry.path.slice(FILES.length).replace(/\/+$/, '');
    const problem = unsafeRelativePath(rel);
    if (problem) return { rel, extract: false, refuse: `unsafe path '${entry.path}' in the archive: ${problem}` };
    const type = entry.type;
    const setId = (entry.mode ?? 0) & SPECIAL_BITS ? `${rel}: setuid, setgid and sticky bits removed` : undefined;
    if (FILE_TYPES.has(type)) {
      this.regular.add(rel);
      return { rel, extract: true, warning: setId };
    }
    this.regular.delete(rel);
    if (type === 'Directory') return { rel, extract: true, warning: setId };
    if (type === 'SymbolicLink') {
      const target = entry.linkpath ?? '';
      const resolved = posix.normalize(posix.join(posix.dirname(rel), target));
      if (posix.isAbsolute(target) || resolved === '..' || resolved.startsWith('../')) {
        return { rel, extract: false, warning: `symlink ${rel} -> ${target} not restored: it points outside the deployment folder` };
      }
      // Links that leave the folder only through other links are removed after the extraction (dropEscapingLinks).
      return { rel, extract: true };
    }
    if (type === 'Link') {
      const target = entry.linkpath ?? '';
      const targetRel = target.startsWith(FILES) ? target.slice(FILES.length) : null;
      if (targetRel === null || unsafeRelativePath(targetRel) || !this.regular.has(targetRel)) {
        return {
          rel,
          extract: false,
          refuse: `hard link '${entry.path}' -> '${target}': a hard link may only point to a regular file stored before it in the archive`,
        };
      }
      this.regular.add(rel);
      return { rel, extract: true };
    }
    if (type === 'CharacterDevice' || type === 'BlockDevice' || type === 'FIFO') {
      return { rel, extract: false, warning: `${rel} not restored: devices and FIFOs are never restored` };
    }
    return { rel, extract: false, warning: `${rel} not restored: unsupported entry type ${type}` };
  }
}

const typeLetter = (type: string) => (FILE_TYPES.has(type) ? 'f' : type === 'Directory' ? 'd' : type === 'SymbolicLink' ? 'l' : type === 'Link' ? 'h' : type);

/** The verifying pass: every entry hashed against the manifest, the policy applied, the manifest read. */
class ArchiveCheck {
  refusal: ArchiveError | null = null;
  readonly warnings: string[] = [];
  private readonly policy = new FilesPolicy();
  private readonly filesHash = createHash('sha256');
  private readonly files = { entries: 0, size: 0 };
  private readonly dbs = new Map<string, { hash: Hash; size: number; parts: number }>();
  private manifestSeen = false;
  private manifestText: string | null = null;
  private bytes = 0;
  private lastReport = 0;

  constructor(
    /** Whether the files are extracted: only then do the policy's warnings say something. */
    private readonly extracting: boolean,
    private readonly onProgress?: (progress: Progress) => void,
  ) {}

  private refuse(message: string, entry: ReadEntry): void {
    this.refusal ??= new ArchiveError(message);
    entry.resume();
  }

  private counted(bytes: number): void {
    this.bytes += bytes;
    if (Date.now() - this.lastReport > 250) {
      this.lastReport = Date.now();
      this.onProgress?.({ bytes: this.bytes, step: 'verifying' });
    }
  }

  /** Each entry of the archive, in order (node-tar's onReadEntry); bodies are consumed synchronously. */
  entry(entry: ReadEntry): void {
    if (this.refusal) return void entry.resume();
    if (this.manifestSeen) return this.refuse(`unexpected entry '${entry.path}' after the manifest`, entry);
    if (entry.path === 'manifest.json' && FILE_TYPES.has(entry.type)) {
      this.manifestSeen = true;
      if (entry.size > MANIFEST_LIMIT) return this.refuse('manifest too large', entry);
      const chunks: Buffer[] = [];
      entry.on('data', (chunk: Buffer) => chunks.push(chunk));
      entry.on('end', () => (this.manifestText = Buffer.concat(chunks).toString('utf8')));
      return;
    }
    if (entry.path.startsWith(FILES)) return this.file(entry);
    const part = PART_NAME.exec(entry.path);
    if (part && FILE_TYPES.has(entry.type)) {
      const service = part[1]!;
      const db = this.dbs.get(service) ?? { hash: createHash('sha256'), size: 0, parts: 0 };
      this.dbs.set(service, db);
      db.parts++;
      if (Number(part[2]) !== db.parts) return this.refuse(`dump part '${entry.path}' out of order`, entry);
      entry.on('data', (chunk: Buffer) => {
        db.hash.update(chunk);
        db.size += chunk.length;
        this.counted(chunk.length);
      });
      return;
    }
    this.refuse(`unexpected entry '${entry.path}' in the archive`, entry);
  }

  private file(entry: ReadEntry): void {
    const decision = this.policy.decide(entry);
    if (decision.refuse) return this.refuse(decision.refuse, entry);
    if (decision.warning && this.extracting) this.warnings.push(decision.warning);
    const isFile = FILE_TYPES.has(entry.type);
    const link = entry.type === 'SymbolicLink' || entry.type === 'Link' ? (entry.linkpath ?? '') : '';
    this.files.entries++;
    this.filesHash.update(describeEntry(typeLetter(entry.type), decision.rel, isFile ? entry.size : 0, entry.mode ?? 0, link));
    if (!isFile) return void entry.resume();
    this.files.size += entry.size;
    entry.on('data', (chunk: Buffer) => {
      this.filesHash.update(chunk);
      this.counted(chunk.length);
    });
  }

  /** The manifest, once every entry was read, checked against what the archive held. */
  finish(): Manifest {
    if (this.manifestText === null) throw new ArchiveError('the archive has no manifest (incomplete or not a backup)');
    let manifest: Manifest;
    try {
      manifest = JSON.parse(this.manifestText) as Manifest;
    } catch {
      throw new ArchiveError('the manifest is not valid JSON');
    }
    if (manifest.format !== FORMAT || !Array.isArray(manifest.components)) throw new ArchiveError(`unknown archive format '${String(manifest.format)}'`);
    const filesDigest = this.filesHash.digest('hex');
    const seenDbs = new Set<string>();
    for (const comp of manifest.components) {
      if (comp.type === 'files') {
        if (comp.entries !== this.files.entries || comp.size !== this.files.size || comp.sha256 !== filesDigest) {
          throw new ArchiveError('checksum mismatch in component files: the archive is corrupted');
        }
      } else if (comp.type === 'database') {
        const db = this.dbs.get(comp.service);
        const digest = db ? db.hash.digest('hex') : createHash('sha256').digest('hex');
        if ((db?.size ?? 0) !== comp.size || (db?.parts ?? 0) !== comp.parts || digest !== comp.sha256) {
          throw new ArchiveError(`checksum mismatch in component ${comp.name}: the archive is corrupted`);
        }
        seenDbs.add(comp.service);
      } else throw new ArchiveError('unknown component in the manifest');
    }
    if (!manifest.components.some((c) => c.type === 'files') && this.files.entries > 0) throw new ArchiveError('files not listed in the manifest');
    for (const service of this.dbs.keys()) if (!seenDbs.has(service)) throw new ArchiveError(`dump of '${service}' not listed in the manifest`);
    manifest.warnings = [...(Array.isArray(manifest.warnings) ? manifest.warnings : []), ...this.warnings];
    return manifest;
  }
}

/**
 * The extracting pass: node-tar's Unpack into the fresh staging folder, behind FilesPolicy. node-tar refuses
 * `..` and absolute names and any entry whose path, or hard link target, goes through a link created earlier
 * (the archive is then refused). It also refuses a symlink whose target text goes through an earlier link, which
 * a folder may legitimately hold (`config -> current/config` with `current -> releases/2`): those are created
 * last, relative to the opened parent folder, and every link is then checked where it resolves.
 */
class Extraction {
  readonly unpack: Unpack;
  problem: Error | null = null;
  private readonly policy = new FilesPolicy();
  private readonly deferred: { rel: string; target: string }[] = [];
  private closed = false;

  constructor(private readonly root: string) {
    this.unpack = new Unpack({
      cwd: root,
      strip: 1, // files/<path> → <path>; a hard link's target too
      // Files belong to the agent, as the hand-written extraction left them: no owner taken from the archive.
      preserveOwner: false,
      filter: (path, entry) => this.admit(path, entry as ReadEntry),
      onwarn: (code, message, data) => this.onWarn(code, message, data),
    });
    this.unpack.on('close', () => (this.closed = true));
  }

  private admit(path: string, entry: ReadEntry): boolean {
    if (!path.startsWith(FILES)) return false; // dumps and the manifest are only verified
    if (!this.policy.decide(entry).extract) return false;
    // Never setuid, setgid or sticky: the agent (root) creates what a container wrote.
    if (typeof entry.mode === 'number') entry.mode &= 0o777;
    return true;
  }

  private onWarn(code: string, message: string, data: Record<string, unknown>): void {
    const entry = data.entry as ReadEntry | undefined;
    const shown = entry ? `${FILES}${entry.path}` : '?';
    const link = typeof data.symlink === 'string' ? data.symlink : null;
    // A link on the way to the entry itself is writing through it; a link on the way to a symlink's target is not.
    const through = link !== null && String(entry?.absolute ?? '').startsWith(`${link}/`);
    if (data.code === 'TAR_SYMLINK_ERROR' && !through && entry?.type === 'SymbolicLink' && entry.linkpath) {
      this.deferred.push({ rel: entry.path, target: entry.linkpath });
      return;
    }
    if (this.problem) return;
    if (data.code === 'TAR_SYMLINK_ERROR') {
      const shownLink = link ? `the symbolic link '${FILES}${posix.relative(this.root, link)}'` : 'a symbolic link';
      this.problem = new ArchiveError(`the archive is unsafe: '${shown}' would be written through ${shownLink} stored before it`);
    } else if (code === 'TAR_ENTRY_INVALID' || code === 'TAR_BAD_ARCHIVE' || code === 'TAR_ABORT') {
      this.problem = new ArchiveError(`the archive is corrupted: ${message}`);
    } else this.problem = new Error(`extracting '${shown}' failed: ${message}`);
  }

  /** After a failure: lets node-tar finish what it started (the caller removes the folder next). */
  async settle(): Promise<void> {
    if (this.closed) return;
    const closed = once(this.unpack, 'close').catch(() => undefined);
    this.unpack.on('error', () => undefined);
    this.unpack.end();
    await Promise.race([closed, new Promise((r) => setTimeout(r, 30_000).unref())]);
  }

  /** After a complete extraction: the deferred links, then every link that resolves outside is removed. */
  async finish(): Promise<string[]> {
    const warnings: string[] = [];
    for (const link of this.deferred) {
      try {
        // Its folder opened one component at a time: a link where a folder should be refuses it.
        const dir = await Dir.open(this.root, posix.dirname(link.rel));
        try {
          await dir.symlink(link.target, posix.basename(link.rel));
        } finally {
          await dir.close();
        }
      } catch (err) {
        warnings.push(`symlink ${link.rel} -> ${link.target} not restored: ${(err as Error).message}`);
      }
    }
    for (const dropped of await dropEscapingLinks(this.root)) {
      warnings.push(`symlink ${dropped.rel} -> ${dropped.target} not restored: it resolves outside the deployment folder`);
    }
    return warnings;
  }
}

export interface VerifyOptions {
  /** Extracts `files/` into this folder (which must not exist yet, and no container may reach). */
  extractTo?: string;
  signal?: AbortSignal;
  onProgress?(progress: Progress): void;
}

/**
 * Reads the whole archive and checks every component against the manifest (sizes and SHA-256), optionally
 * extracting the files to a fresh folder on the way. Throws ArchiveError when anything does not match or the
 * archive holds what no backup holds (names leaving the folder, hard links elsewhere, writing through a link).
 * What the restore leaves out or changes is in the returned manifest's warnings.
 */
export async function verifyArchive(path: string, opts: VerifyOptions = {}): Promise<Manifest> {
  const root = opts.extractTo ? resolve(opts.extractTo) : null;
  const check = new ArchiveCheck(root !== null, opts.onProgress);
  const parser = new Parser({ strict: true, onReadEntry: (entry) => check.entry(entry) });
  let extraction: Extraction | null = null;
  if (root) {
    await mkdir(root, { recursive: false, mode: 0o755 });
    extraction = new Extraction(root);
  }
  // The verifying parser sees each chunk first: a refusal it decides stops the extraction before that chunk.
  const parsers: Parser[] = extraction ? [parser, extraction.unpack] : [parser];
  try {
    for await (const _ of pumpArchive(path, parsers, () => check.refusal ?? extraction?.problem ?? null, opts.signal)) void _;
  } catch (err) {
    await extraction?.settle();
    throw err;
  }
  const manifest = check.finish();
  if (extraction) manifest.warnings.push(...(await extraction.finish()));
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
  let passed = false;
  const ready: Buffer[] = [];
  const parser = new Parser({
    strict: true,
    onReadEntry: (entry) => {
      const part = PART_NAME.exec(entry.path);
      if (!part || part[1] !== component.service || !FILE_TYPES.has(entry.type)) {
        if (started) passed = true;
        return void entry.resume();
      }
      started = true;
      entry.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        size += chunk.length;
        ready.push(chunk);
      });
    },
  });
  let held: Buffer | null = null;
  for await (const _ of pumpArchive(path, [parser], () => null)) {
    void _;
    for (const chunk of ready.splice(0)) {
      // Keep one chunk back so a corrupted dump never reaches its end in the database.
      if (held) yield held;
      held = chunk;
    }
    if (passed) break;
  }
  if (size !== component.size || hash.digest('hex') !== component.sha256) {
    throw new ArchiveError(`checksum mismatch in component ${component.name}: the archive is corrupted`);
  }
  if (held) yield held;
}
