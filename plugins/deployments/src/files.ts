/**
 * The on-disk layout of a deployment: `<root>/<name>/` with the compose file, `.env` and `.agent.json`
 * (agent metadata). Every write is atomic (temp file + rename), and a new deployment folder is assembled under a
 * temporary name and renamed into place, so a crash never leaves half a deployment.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export const COMPOSE_NAMES = ['docker-compose.yml', 'docker-compose.yaml', 'compose.yaml', 'compose.yml'];
export const DEFAULT_COMPOSE = 'docker-compose.yml';
export const ENV_FILE = '.env';
export const META_FILE = '.agent.json';

export interface LogSourceSpec {
  id: string;
  name: string;
  path: string;
  format?: string;
}

export interface DeploymentMeta {
  created_at: string;
  created_by: string | null;
  /** Template the deployment was created from, if any (its kind, for built-in log sources). */
  template: string | null;
  compose_file: string;
  log_sources: LogSourceSpec[];
  /** Set when the deployment was deleted but its folder kept: the folder is not rediscovered. */
  deleted_at?: string | null;
}

export const tmpName = (base: string) => `${base}.tmp-${randomBytes(6).toString('hex')}`;

export async function writeAtomic(path: string, content: string, mode = 0o644): Promise<void> {
  const tmp = tmpName(path);
  try {
    await writeFile(tmp, content, { mode });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

export async function readText(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

export function findComposeFile(dir: string): string | null {
  for (const name of COMPOSE_NAMES) if (existsSync(join(dir, name))) return name;
  return null;
}

export async function readMeta(dir: string): Promise<DeploymentMeta | null> {
  const text = await readText(join(dir, META_FILE));
  if (text === null) return null;
  try {
    const raw = JSON.parse(text) as Partial<DeploymentMeta>;
    return {
      created_at: typeof raw.created_at === 'string' ? raw.created_at : new Date().toISOString(),
      created_by: raw.created_by ?? null,
      template: raw.template ?? null,
      compose_file: typeof raw.compose_file === 'string' && COMPOSE_NAMES.includes(raw.compose_file) ? raw.compose_file : DEFAULT_COMPOSE,
      log_sources: Array.isArray(raw.log_sources) ? raw.log_sources : [],
      deleted_at: raw.deleted_at ?? null,
    };
  } catch {
    return null;
  }
}

export const writeMeta = (dir: string, meta: DeploymentMeta) => writeAtomic(join(dir, META_FILE), JSON.stringify(meta, null, 2) + '\n');

/** Writes a whole new deployment folder (files → temp folder → rename); throws EEXIST-like errors if taken. */
export async function createFolder(root: string, name: string, files: Record<string, { content: string; mode?: number }>): Promise<string> {
  const final = join(root, name);
  const staging = join(root, `.staging-${name}-${randomBytes(6).toString('hex')}`);
  await mkdir(staging, { mode: 0o750 });
  try {
    for (const [file, { content, mode }] of Object.entries(files)) await writeFile(join(staging, file), content, { mode: mode ?? 0o644 });
    await rename(staging, final);
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    throw err;
  }
  return final;
}

/** Replaces files in an existing folder, each atomically (used when re-creating over a kept folder). */
export async function replaceFiles(dir: string, files: Record<string, { content: string; mode?: number }>): Promise<void> {
  for (const [file, { content, mode }] of Object.entries(files)) await writeAtomic(join(dir, file), content, mode);
}

export async function folderCreatedAt(dir: string): Promise<string> {
  const s = await stat(dir);
  return (s.birthtimeMs > 0 ? s.birthtime : s.mtime).toISOString();
}
