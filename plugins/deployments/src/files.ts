/**
 * The on-disk layout of a deployment: `<root>/<name>/` with the compose file and `.env`. The folder may be
 * bind-mounted into the deployment's own containers, so it is untrusted: files are read without following
 * symlinks (`readTextInside`), written as temp file + rename (a rename replaces a planted symlink, it never writes
 * through it), and nothing the agent decides on (metadata, exceptions) is kept there. A new deployment folder is
 * assembled under a temporary name and renamed into place, so a crash never leaves half a deployment.
 */
import { randomBytes } from 'node:crypto';
import { lstatSync } from 'node:fs';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readTextInside } from '@agent/sdk';

export const COMPOSE_NAMES = ['docker-compose.yml', 'docker-compose.yaml', 'compose.yaml', 'compose.yml'];
export const DEFAULT_COMPOSE = 'docker-compose.yml';
export const ENV_FILE = '.env';
/** Where metadata was kept before it moved to the plugin's own document; read once to migrate, then removed. */
export const LEGACY_META_FILE = '.agent.json';

export interface LogSourceSpec {
  id: string;
  name: string;
  path: string;
  format?: string;
}

export const tmpName = (base: string) => `${base}.tmp-${randomBytes(6).toString('hex')}`;

export async function writeAtomic(path: string, content: string, mode = 0o644): Promise<void> {
  const tmp = tmpName(path);
  try {
    await writeFile(tmp, content, { mode, flag: 'wx' });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** A file of a deployment folder (never through a symlink; 409 UNSAFE_FILE otherwise), or null when missing. */
export const readFolderFile = (dir: string, name: string): Promise<string | null> => readTextInside(dir, name);

/** The compose file of a folder: the first of the usual names that is a regular file. */
export function findComposeFile(dir: string): string | null {
  for (const name of COMPOSE_NAMES) {
    try {
      if (lstatSync(join(dir, name)).isFile()) return name;
    } catch {
      /* not there */
    }
  }
  return null;
}

/** Metadata an older agent wrote into the folder (untrusted: only used to migrate creation facts). */
export async function readLegacyMeta(dir: string): Promise<Record<string, unknown> | null> {
  try {
    const text = await readTextInside(dir, LEGACY_META_FILE);
    return text === null ? null : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    return null;
  }
}

/** Writes a whole new deployment folder (files → temp folder → rename); throws EEXIST-like errors if taken. */
export async function createFolder(root: string, name: string, files: Record<string, { content: string; mode?: number }>): Promise<string> {
  const final = join(root, name);
  const staging = join(root, `.staging-${name}-${randomBytes(6).toString('hex')}`);
  await mkdir(staging, { mode: 0o750 });
  try {
    for (const [file, { content, mode }] of Object.entries(files)) await writeFile(join(staging, file), content, { mode: mode ?? 0o644, flag: 'wx' });
    await rename(staging, final);
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    throw err;
  }
  return final;
}

export async function folderCreatedAt(dir: string): Promise<string> {
  const s = await stat(dir);
  return (s.birthtimeMs > 0 ? s.birthtime : s.mtime).toISOString();
}
