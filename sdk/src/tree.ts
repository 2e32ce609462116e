/**
 * File operations inside a folder that containers may write to, done the way `openat(2)` with `O_NOFOLLOW` would:
 * relative to a directory the agent holds open, one path component at a time, never through a symbolic link.
 *
 * Node has no `*at` calls, so an open directory is addressed as `/proc/self/fd/<fd>/<name>`: the kernel resolves
 * `/proc/self/fd/<fd>` to exactly the directory the descriptor holds (not to a path that could have been swapped
 * since), then `<name>` inside it, and `O_NOFOLLOW` refuses a link in that last component. Directories and files are
 * first opened with `O_PATH`, which opens nothing for I/O (a FIFO or a device planted by a container is never
 * opened for real, so it can neither block nor trigger a driver), the kernel then tells what the object is (fstat),
 * and only a regular file is reopened for reading, through its own descriptor, so the object checked is the one read.
 *
 * Linux only (the agent's platform): `O_PATH` and `/proc/self/fd` are Linux's.
 */
import { constants, type Dirent, type Stats } from 'node:fs';
import { lstat, mkdir, open, readdir, readlink, rename, rmdir, symlink, unlink, type FileHandle } from 'node:fs/promises';
import { isAbsolute, normalize, relative, resolve, sep } from 'node:path';
import { HttpError } from './errors.js';

/** Linux's O_PATH (the same value on x86-64 and arm64): a descriptor that only names an object. */
export const O_PATH = 0o10000000;

const { O_DIRECTORY, O_NOFOLLOW, O_RDONLY, O_NONBLOCK, O_NOCTTY, O_WRONLY, O_CREAT, O_EXCL } = constants;

/** Answered when a path is a symlink, a special file or leads outside its folder. */
export const UNSAFE_FILE = 'UNSAFE_FILE';

export const unsafeFile = (shown: string, why: string) => new HttpError(409, UNSAFE_FILE, `'${shown}' ${why}; the agent does not follow it`, { path: shown });

/** Whether `path` is `folder` or lies below it (both absolute and normalised). */
export function isInside(folder: string, path: string): boolean {
  return path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);
}

const fdPath = (fd: number, name?: string) => (name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`);

/** A single path component: no separator, not `.` or `..`, not empty. */
export function assertComponent(name: string): void {
  if (!name || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) throw new Error(`invalid path component '${name}'`);
}

/**
 * The components of a path relative to a folder: `a/b/c` → `['a','b','c']`. Absolute paths inside the folder are
 * accepted when `root` is given; `..` that would leave the folder, or anything outside it, is refused (null).
 */
export function componentsOf(path: string, root?: string): string[] | null {
  let rel = path;
  if (isAbsolute(path)) {
    if (!root) return null;
    const r = relative(resolve(root), resolve(path));
    if (r === '') return [];
    rel = r;
  }
  const norm = normalize(rel);
  if (norm === '.' || norm === '') return [];
  if (isAbsolute(norm) || norm === '..' || norm.startsWith('..' + sep)) return null;
  return norm.split(sep).filter((c) => c !== '' && c !== '.');
}

/**
 * A directory held open (O_PATH): everything done through it concerns that directory, wherever it is moved and
 * whatever is put at its old path. Close it when done.
 */
export class Dir {
  private constructor(
    private readonly handle: FileHandle,
    /** Path relative to the tree's root, for messages (`.` for the root). */
    readonly shown: string,
  ) {}

  get fd(): number {
    return this.handle.fd;
  }

  /** Opens the root of a tree (the path is the agent's own: symlinks in it are resolved once, here). */
  static async openRoot(path: string): Promise<Dir> {
    return new Dir(await open(path, O_PATH | O_DIRECTORY), '.');
  }

  /** Opens `root/rel` one component at a time without following a link; 409 UNSAFE_FILE on a link or non-folder. */
  static async open(root: string, rel: string): Promise<Dir> {
    const parts = componentsOf(rel, root);
    if (parts === null) throw unsafeFile(rel, 'is outside the folder');
    let dir = await Dir.openRoot(root);
    try {
      for (const part of parts) {
        const next = await dir.dir(part);
        await dir.close();
        dir = next;
      }
      return dir;
    } catch (err) {
      await dir.close();
      throw err;
    }
  }

  private child(name: string): string {
    return this.shown === '.' ? name : `${this.shown}/${name}`;
  }

  /** The path of an entry as the kernel addresses it through this directory (for calls that take a path). */
  at(name: string): string {
    assertComponent(name);
    return fdPath(this.fd, name);
  }

  /** The directory's real path now (for messages and for comparing with a mount source). */
  realPath(): Promise<string> {
    return readlink(fdPath(this.fd));
  }

  /** A subdirectory, never through a link: ELOOP/ENOTDIR become 409 UNSAFE_FILE; ENOENT passes. */
  async dir(name: string): Promise<Dir> {
    try {
      return new Dir(await open(this.at(name), O_PATH | O_DIRECTORY | O_NOFOLLOW), this.child(name));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ELOOP' || code === 'ENOTDIR') throw unsafeFile(this.child(name), code === 'ELOOP' ? 'is a symbolic link' : 'is not a folder');
      throw err;
    }
  }

  /** Entries of the directory (names and types as the directory holds them now). */
  entries(): Promise<Dirent[]> {
    return readdir(fdPath(this.fd), { withFileTypes: true });
  }

  /** lstat of an entry: a link is described, never followed. */
  lstat(name: string): Promise<Stats> {
    return lstat(this.at(name));
  }

  readlink(name: string): Promise<string> {
    return readlink(this.at(name));
  }

  /**
   * Opens a regular file of this directory for reading. A link, FIFO, socket, device or folder in its place is
   * 409 UNSAFE_FILE and is never opened for I/O. Returns the handle and the file's stat (from the opened object).
   */
  async openFile(name: string): Promise<{ handle: FileHandle; stat: Stats }> {
    const shown = this.child(name);
    let pathHandle: FileHandle;
    try {
      pathHandle = await open(this.at(name), O_PATH | O_NOFOLLOW);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw unsafeFile(shown, 'is a symbolic link');
      throw err;
    }
    try {
      const stat = await pathHandle.stat();
      if (stat.isSymbolicLink()) throw unsafeFile(shown, 'is a symbolic link');
      if (!stat.isFile()) throw unsafeFile(shown, 'is not a regular file');
      // Reopening through the O_PATH descriptor opens exactly the inode that was checked.
      const handle = await open(fdPath(pathHandle.fd), O_RDONLY | O_NONBLOCK | O_NOCTTY);
      return { handle, stat };
    } finally {
      await pathHandle.close();
    }
  }

  /** Creates a new file (never an existing one, never through a link) for writing. */
  createFile(name: string, mode = 0o644): Promise<FileHandle> {
    return open(this.at(name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, mode);
  }

  async mkdir(name: string, mode = 0o755): Promise<void> {
    await mkdir(this.at(name), { mode });
  }

  symlink(target: string, name: string): Promise<void> {
    return symlink(target, this.at(name));
  }

  /** Removes a file or link (a link is removed itself, never what it points to). */
  unlink(name: string): Promise<void> {
    return unlink(this.at(name));
  }

  rmdir(name: string): Promise<void> {
    return rmdir(this.at(name));
  }

  /** Renames an entry of this directory into `to` (another open directory, or this one). */
  rename(name: string, to: Dir, newName: string): Promise<void> {
    return rename(this.at(name), to.at(newName));
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}

/**
 * Opens a regular file inside `folder` for reading, every component without following a link. `path` is relative
 * to the folder (or absolute inside it). 409 `UNSAFE_FILE` for a link, a FIFO, a device, a folder, or a path that
 * leaves the folder; ENOENT/ENOTDIR errors pass as they are.
 */
export async function openInside(folder: string, path: string): Promise<FileHandle> {
  const parts = componentsOf(path, folder);
  const shown = isAbsolute(path) ? path : path || '.';
  if (parts === null) throw unsafeFile(shown, 'is outside the folder');
  if (!parts.length) throw unsafeFile(shown, 'is not a regular file');
  const dir = await Dir.open(folder, parts.slice(0, -1).join('/'));
  try {
    return (await dir.openFile(parts[parts.length - 1]!)).handle;
  } finally {
    await dir.close();
  }
}

/** The text of a regular file inside `folder`, or null when it does not exist (see `openInside`). */
export async function readTextInside(folder: string, path: string): Promise<string | null> {
  let fh: FileHandle;
  try {
    fh = await openInside(folder, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw err;
  }
  try {
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

/**
 * Removes everything inside `dir` (an open directory) without following a link: subfolders are opened relative to
 * their parent, so a folder swapped for a link while this runs is unlinked as a link, never descended into.
 */
export async function emptyDir(dir: Dir): Promise<void> {
  for (const entry of await dir.entries()) {
    const name = entry.name;
    let sub: Dir | null = null;
    try {
      sub = await dir.dir(name);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') continue;
      if (!(err instanceof HttpError)) throw err;
      // A link or a file: removing the entry removes only the entry.
      await dir.unlink(name).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOENT') throw e;
      });
      continue;
    }
    try {
      await emptyDir(sub);
    } finally {
      await sub.close();
    }
    await dir.rmdir(name).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
  }
}

/** Removes `root/name` (a folder or a file) without following links anywhere below `root`. */
export async function removeInside(root: string, name: string): Promise<void> {
  assertComponent(name);
  const parent = await Dir.openRoot(root);
  try {
    let sub: Dir;
    try {
      sub = await parent.dir(name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      if (!(err instanceof HttpError)) throw err;
      await parent.unlink(name);
      return;
    }
    try {
      await emptyDir(sub);
    } finally {
      await sub.close();
    }
    await parent.rmdir(name);
  } finally {
    await parent.close();
  }
}
