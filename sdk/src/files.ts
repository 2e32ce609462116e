/**
 * Files inside a folder that a container may write to (a deployment folder bind-mounted into its own containers).
 * Such a container can replace any file with a symlink, a FIFO or a device between two reads of the agent, so
 * these helpers never follow a symlink and never block: the file is opened first (no symlink in its last
 * component, non-blocking), then the kernel says where the opened file really is (`/proc/self/fd`), and only a
 * regular file whose real path lies inside the folder is used. Checks and reads concern the same opened file, so
 * nothing can be swapped in between.
 */
import { constants } from 'node:fs';
import { open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { HttpError } from './errors.js';

/** Answered when a path is a symlink, a special file or leads outside its folder. */
export const UNSAFE_FILE = 'UNSAFE_FILE';

const unsafe = (shown: string, why: string) => new HttpError(409, UNSAFE_FILE, `'${shown}' ${why}; the agent does not follow it`, { path: shown });

/** Whether `path` is `folder` or lies below it (both absolute and normalised). */
export function isInside(folder: string, path: string): boolean {
  return path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);
}

/**
 * Opens a regular file inside `folder` for reading. `path` is relative to the folder (or absolute inside it).
 * Throws 409 `UNSAFE_FILE` for a symlink, a FIFO, a device, a folder, or a file whose real path is outside;
 * ENOENT errors are passed on as they are.
 */
export async function openInside(folder: string, path: string): Promise<FileHandle> {
  const base = await realpath(folder);
  const target = isAbsolute(path) ? resolve(path) : resolve(base, path);
  const shown = isAbsolute(path) ? path : relative(base, target) || '.';
  if (!isInside(base, target) && !isInside(resolve(folder), target)) throw unsafe(shown, 'is outside the folder');
  let fh: FileHandle;
  try {
    // O_NONBLOCK: a FIFO planted in place of a file must not hang the agent in open().
    fh = await open(target, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw unsafe(shown, 'is a symbolic link');
    throw err;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw unsafe(shown, 'is not a regular file');
    // A symlink in a folder component was followed by open(); where the file really is settles it.
    const real = await readlink(`/proc/self/fd/${fh.fd}`);
    if (!isInside(base, real)) throw unsafe(shown, 'resolves outside the folder');
    return fh;
  } catch (err) {
    await fh.close();
    throw err;
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
