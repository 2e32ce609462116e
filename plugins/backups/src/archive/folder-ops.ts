/**
 * File operations of backups and restores inside deployment folders, whose subfolders containers may write while
 * the agent works in them. Everything goes through the SDK's `Dir` (directories held open, one component at a time,
 * never through a link): a subfolder swapped for a link is never entered, a FIFO or device is never opened, and what
 * is read or written is the object that was checked, not whatever a path names a moment later.
 */
import { fstat as fstatCallback, type Dirent, type Stats } from 'node:fs';
import { lstat, readlink, type FileHandle } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { promisify } from 'node:util';
import { Dir, isHttpError, UNSAFE_FILE } from '@agent/sdk';

const fstat = promisify(fstatCallback);

/** Bits a restore never sets: setuid, setgid, sticky. */
export const SPECIAL_BITS = 0o7000;

/** An entry of a folder, opened: a regular file (open for reading), a folder (held open) or a link (its text). */
export type OpenedEntry =
  | { type: 'file'; stat: Stats; handle: FileHandle }
  | { type: 'directory'; stat: Stats; dir: Dir }
  | { type: 'symlink'; stat: Stats; target: string }
  | { type: 'special'; stat: Stats };

type Kind = OpenedEntry['type'];

const kindOfStat = (st: Stats): Kind => (st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'special');
const kindOfDirent = (d: Dirent): Kind | null => (d.isFile() ? 'file' : d.isDirectory() ? 'directory' : d.isSymbolicLink() ? 'symlink' : null);
const errCode = (err: unknown) => (err as NodeJS.ErrnoException)?.code;

/**
 * Opens `name` of `dir` as what it is now. The type the directory listing gave is a hint: every open checks what it
 * finds (openFile refuses anything but a regular file, dir() anything but a folder, readlink anything but a link),
 * and an entry replaced in between is looked at again. Null when it disappeared or kept changing (`onChanged`).
 */
export async function openEntry(dir: Dir, name: string, hint: Dirent | null, onChanged: () => void): Promise<OpenedEntry | null> {
  let kind: Kind | null = hint ? kindOfDirent(hint) : null;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      if (kind === null) kind = kindOfStat(await dir.lstat(name));
      if (kind === 'file') {
        const { handle, stat } = await dir.openFile(name);
        return { type: 'file', stat, handle };
      }
      if (kind === 'directory') {
        const sub = await dir.dir(name);
        try {
          return { type: 'directory', stat: await fstat(sub.fd), dir: sub };
        } catch (err) {
          await sub.close();
          throw err;
        }
      }
      const stat = await dir.lstat(name);
      if (kindOfStat(stat) !== kind) throw Object.assign(new Error('changed'), { code: 'EINVAL' });
      if (kind === 'symlink') return { type: 'symlink', stat, target: await dir.readlink(name) };
      return { type: 'special', stat };
    } catch (err) {
      const code = errCode(err);
      if (code === 'ENOENT') return null;
      // Replaced by something else since it was listed (a link, a FIFO, a folder): look again.
      if (!(isHttpError(err) && err.code === UNSAFE_FILE) && code !== 'EINVAL' && code !== 'ENOTDIR') throw err;
      kind = null;
    }
  }
  onChanged();
  return null;
}

/** Entries of an open directory in a stable order (the archive's order). */
export async function sortedEntries(dir: Dir): Promise<Dirent[]> {
  return (await dir.entries()).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * Whether the link at `linkRel` (relative to `root`) stays inside `root` when the kernel resolves it: every link
 * on the way is followed as the kernel would (relative to where it sits, chains included, at most 40 hops), and
 * the link is refused the moment any step leaves the folder (`..` above it or an absolute target), even if a later
 * step would come back. A missing component ends the lookup: the rest is taken as text, as nothing there can be a
 * link yet. Only for a folder no container can reach (the staging folder of a restore): the answer holds because
 * nobody else changes the tree meanwhile.
 */
export async function linkStaysInside(root: string, linkRel: string): Promise<boolean> {
  const todo = linkRel.split('/');
  const at: string[] = [];
  let hops = 0;
  let missing = false;
  while (todo.length) {
    const part = todo.shift()!;
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (!at.length) return false;
      at.pop();
      continue;
    }
    const path = join(root, ...at, part);
    const st = missing ? null : await lstat(path).catch(() => null);
    if (st?.isSymbolicLink()) {
      if (++hops > 40) return false;
      const target = await readlink(path);
      if (posix.isAbsolute(target)) return false;
      todo.unshift(...target.split('/'));
      continue;
    }
    if (!st) missing = true;
    at.push(part);
  }
  return true;
}

/**
 * Removes every link below `root` that does not stay inside it (see `linkStaysInside`); returns the removed links'
 * paths. Walks with `Dir`, so it never enters a link itself.
 */
export async function dropEscapingLinks(root: string): Promise<{ rel: string; target: string }[]> {
  // All links are judged first, then removed: removing one first would turn a link that leads out through it
  // into a dangling one that reads as inside.
  const escaping: { dir: string; name: string; rel: string; target: string }[] = [];
  const visit = async (dir: Dir, rel: string): Promise<void> => {
    for (const entry of await sortedEntries(dir)) {
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isSymbolicLink()) {
        if (!(await linkStaysInside(root, childRel))) escaping.push({ dir: rel, name: entry.name, rel: childRel, target: await dir.readlink(entry.name) });
      } else if (entry.isDirectory()) {
        const sub = await dir.dir(entry.name);
        try {
          await visit(sub, childRel);
        } finally {
          await sub.close();
        }
      }
    }
  };
  const top = await Dir.openRoot(root);
  try {
    await visit(top, '');
  } finally {
    await top.close();
  }
  for (const link of escaping) {
    const dir = await Dir.open(root, link.dir);
    try {
      await dir.unlink(link.name);
    } finally {
      await dir.close();
    }
  }
  return escaping.map(({ rel, target }) => ({ rel, target }));
}

const COPY_CHUNK = 1024 * 1024;

/** Copies an open regular file into a new file of `to` (created with O_EXCL|O_NOFOLLOW: never through a link). */
async function copyFile(from: FileHandle, stat: Stats, to: Dir, name: string): Promise<void> {
  const out = await to.createFile(name, stat.mode & 0o777);
  try {
    const buffer = Buffer.allocUnsafe(COPY_CHUNK);
    for (;;) {
      const { bytesRead } = await from.read(buffer, 0, COPY_CHUNK, null);
      if (bytesRead === 0) break;
      await out.write(buffer, 0, bytesRead);
    }
    await out.utimes(stat.atime, stat.mtime);
  } finally {
    await out.close();
  }
}

/**
 * Copies `name` of `from` (a file, a folder with everything below it, or a link as a link) to `name` of `to`,
 * neither side ever through a link: FIFOs, sockets and devices are skipped, setuid/setgid/sticky bits dropped.
 * Returns how many links it created (the caller checks where they lead).
 */
export async function copyEntry(from: Dir, to: Dir, name: string, hint: Dirent | null, rel: string, warnings: string[]): Promise<number> {
  const entry = await openEntry(from, name, hint, () => warnings.push(`${rel} was not carried over: it kept changing while it was read`));
  if (!entry) return 0;
  if (entry.stat.mode & SPECIAL_BITS) warnings.push(`${rel}: setuid, setgid and sticky bits were not carried over`);
  switch (entry.type) {
    case 'file':
      try {
        await copyFile(entry.handle, entry.stat, to, name);
      } finally {
        await entry.handle.close();
      }
      return 0;
    case 'symlink':
      await to.symlink(entry.target, name);
      return 1;
    case 'special':
      warnings.push(`${rel} was not carried over: FIFOs, sockets and devices are never restored`);
      return 0;
    case 'directory': {
      let links = 0;
      try {
        await to.mkdir(name, (entry.stat.mode & 0o777) | 0o700);
        const sub = await to.dir(name);
        try {
          for (const child of await sortedEntries(entry.dir)) links += await copyEntry(entry.dir, sub, child.name, child, `${rel}/${child.name}`, warnings);
        } finally {
          await sub.close();
        }
      } finally {
        await entry.dir.close();
      }
      return links;
    }
  }
}
