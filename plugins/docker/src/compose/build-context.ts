/**
 * A copy of a build context that only the agent can write. Compose reads a build context as root, walking folders
 * and opening files by path: a container of the project that writes into the context could swap a folder for a
 * link to `/` between two of those steps and have host files sent to the builder. So the guard copies the context
 * first, relative to open folders and never through a link (the SDK's `Dir`), into its private folder, and compose
 * builds from the copy. Links are copied as links (the builder resolves them inside the context), FIFOs, sockets
 * and devices are left out. The Dockerfile the builder gets is the one the copy holds, and it is checked there.
 */
import { pipeline } from 'node:stream/promises';
import { relative, sep } from 'node:path';
import { Dir, errors, HttpError } from '@agent/sdk';

/** A context larger than this is refused (the copy lives in the agent's data folder while the build runs). */
const MAX_BYTES = 8 * 1024 * 1024 * 1024;
const MAX_ENTRIES = 500_000;

export interface ContextCopy {
  files: number;
  bytes: number;
  skipped: string[];
}

/**
 * Top-level entries `.dockerignore` excludes outright (a plain relative path, no wildcard): not copied at all, so
 * the usual `node_modules`, `.git` or data folders cost nothing. Wildcard patterns are left to the builder, which
 * applies the copied `.dockerignore` itself; with any `!` exception line nothing is pruned (it could re-include).
 */
export function plainIgnores(text: string): Set<string> {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  if (lines.some((l) => l.startsWith('!'))) return new Set();
  const out = new Set<string>();
  for (const line of lines) {
    if (/[*?[\\]/.test(line)) continue;
    const clean = line.replace(/^\.?\/+/, '').replace(/\/+$/, '');
    if (clean && !clean.split('/').includes('..')) out.add(clean);
  }
  return out;
}

async function readDockerignore(dir: Dir): Promise<Set<string>> {
  try {
    const { handle, stat } = await dir.openFile('.dockerignore');
    try {
      if (stat.size > 1024 * 1024) return new Set();
      return plainIgnores(await handle.readFile('utf8'));
    } finally {
      await handle.close();
    }
  } catch {
    return new Set();
  }
}

/**
 * Copies the folder `source` (absolute, inside `root`, the project folder) into `target` (a new folder of the
 * agent's own). Every component below `root` is opened without following links.
 */
export async function copyContext(root: string, source: string, target: string): Promise<ContextCopy> {
  const rel = relative(root, source);
  if (rel.startsWith('..') || rel.startsWith(sep)) throw errors.internal(`build context '${source}' is outside '${root}'`);
  const from = await Dir.open(root, rel);
  const to = await Dir.openRoot(target);
  const stats: ContextCopy = { files: 0, bytes: 0, skipped: [] };
  try {
    const ignored = await readDockerignore(from);
    await copyDir(from, to, '', ignored, stats);
  } finally {
    await Promise.all([from.close(), to.close()]);
  }
  return stats;
}

async function copyDir(from: Dir, to: Dir, prefix: string, ignored: Set<string>, stats: ContextCopy): Promise<void> {
  for (const entry of await from.entries()) {
    const name = entry.name;
    const path = prefix ? `${prefix}/${name}` : name;
    if (ignored.has(path)) continue;
    if (++stats.files > MAX_ENTRIES) throw errors.badRequest(`build context has more than ${MAX_ENTRIES} entries`, 'BUILD_CONTEXT_TOO_LARGE');
    const st = await from.lstat(name).catch(() => null);
    if (!st) continue;
    if (st.isDirectory()) {
      let sub: Dir;
      try {
        sub = await from.dir(name);
      } catch (err) {
        // Swapped for a link or removed since it was listed: it is not copied.
        if (err instanceof HttpError || (err as NodeJS.ErrnoException).code === 'ENOENT') {
          stats.skipped.push(path);
          continue;
        }
        throw err;
      }
      try {
        await to.mkdir(name, 0o755);
        const dest = await to.dir(name);
        try {
          await copyDir(sub, dest, path, ignored, stats);
        } finally {
          await dest.close();
        }
      } finally {
        await sub.close();
      }
    } else if (st.isSymbolicLink()) {
      const target = await from.readlink(name).catch(() => null);
      if (target !== null) await to.symlink(target, name);
    } else if (st.isFile()) {
      let opened;
      try {
        opened = await from.openFile(name);
      } catch (err) {
        if (err instanceof HttpError || (err as NodeJS.ErrnoException).code === 'ENOENT') {
          stats.skipped.push(path);
          continue;
        }
        throw err;
      }
      try {
        stats.bytes += opened.stat.size;
        if (stats.bytes > MAX_BYTES) throw errors.badRequest(`build context is larger than ${MAX_BYTES} bytes`, 'BUILD_CONTEXT_TOO_LARGE');
        // Permission bits only: set-id bits are not the builder's business.
        const out = await to.createFile(name, opened.stat.mode & 0o777);
        await pipeline(opened.handle.createReadStream({ autoClose: false }), out.createWriteStream());
      } finally {
        await opened.handle.close();
      }
    } else {
      stats.skipped.push(path);
    }
  }
}
