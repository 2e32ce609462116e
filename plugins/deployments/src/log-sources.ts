/**
 * Log sources of a deployment: container output (`stdout`), built-in file sources of its kind (declared by the
 * template it came from) and custom ones. File paths are relative to the deployment folder; a file is opened
 * without following symlinks and only used when it really lies inside the folder (a container may write there).
 */
import type { FileHandle } from 'node:fs/promises';
import { isAbsolute, normalize } from 'node:path';
import { errors, isHttpError, openInside, UNSAFE_FILE } from '@agent/sdk';
import type { LogSourceSpec } from './files.js';
import type { Entry } from './records.js';

export const SOURCE_ID = '^[a-z0-9][a-z0-9_.-]{0,62}$';

export interface LogSourceView {
  id: string;
  name: string;
  type: 'container' | 'file';
  path: string | null;
  format: string | null;
  builtin: boolean;
}

export const CONTAINER_SOURCE: LogSourceView = {
  id: 'stdout',
  name: 'Container output (stdout and stderr)',
  type: 'container',
  path: null,
  format: null,
  builtin: true,
};

/** The built-in file sources of a deployment's kind (declared by the template it was created from). */
export interface KindSources {
  builtin(entry: Entry): LogSourceSpec[];
}

/** Every source of a deployment: container output, then the built-in file sources of its kind, then the custom ones. */
export function sourceViews(entry: Entry, kinds: KindSources): LogSourceView[] {
  const view = (s: LogSourceSpec, builtin: boolean): LogSourceView => ({
    id: s.id,
    name: s.name,
    type: 'file',
    path: s.path,
    format: s.format ?? null,
    builtin,
  });
  return [CONTAINER_SOURCE, ...kinds.builtin(entry).map((s) => view(s, true)), ...entry.record.log_sources.map((s) => view(s, false))];
}

/** The file source `id` of a deployment (null for container output); 404 when it has none of that id. */
export function fileSource(entry: Entry, kinds: KindSources, id: string): LogSourceView | null {
  if (id === 'stdout') return null;
  const found = sourceViews(entry, kinds).find((s) => s.id === id);
  if (!found) throw errors.notFound(`log source '${id}' not found (see GET /api/deployments/${entry.name}/log-sources)`);
  return found;
}

/** Problems with a relative path from a request (absolute, `..`, empty, control characters). */
export function relativePathProblem(path: string): string | null {
  if (!path || /[\0\r\n]/.test(path)) return 'must be a non-empty relative path';
  if (isAbsolute(path) || path.startsWith('~') || /^[A-Za-z]:/.test(path)) return 'must be relative to the deployment folder';
  if (path.split(/[\\/]/).includes('..')) return "must not contain '..'";
  const n = normalize(path);
  if (n === '.' || n.startsWith('..')) return 'must name a file inside the deployment folder';
  return null;
}

export function validateCustomSources(sources: LogSourceSpec[], builtinIds: Set<string>): void {
  const seen = new Set<string>();
  for (const [i, s] of sources.entries()) {
    if (s.id === 'stdout' || builtinIds.has(s.id))
      throw errors.badRequest(`body.sources[${i}].id: '${s.id}' is reserved by a built-in source`, 'VALIDATION_FAILED', { field: `sources[${i}].id` });
    if (seen.has(s.id)) throw errors.badRequest(`body.sources[${i}].id: '${s.id}' is given twice`, 'VALIDATION_FAILED', { field: `sources[${i}].id` });
    seen.add(s.id);
    const problem = relativePathProblem(s.path);
    if (problem) throw errors.badRequest(`body.sources[${i}].path: ${problem}`, 'INVALID_PATH', { field: `sources[${i}].path` });
  }
}

/** Opens a file source (each time it is read: a follow re-opens it), never through a symlink or out of the folder. */
export type SourceOpener = () => Promise<FileHandle>;

/** The opener of a file source; checks it once now (404 `LOG_FILE_MISSING`, 400 `INVALID_PATH` for a link or special file). */
export async function sourceOpener(dir: string, relative: string): Promise<SourceOpener> {
  const problem = relativePathProblem(relative);
  if (problem) throw errors.badRequest(`log source path ${problem}`, 'INVALID_PATH');
  const opener: SourceOpener = async () => {
    try {
      return await openInside(dir, relative);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw errors.notFound(`log file '${relative}' does not exist (yet)`, 'LOG_FILE_MISSING');
      if (isHttpError(err) && err.code === UNSAFE_FILE) throw errors.badRequest(`log source ${err.message}`, 'INVALID_PATH');
      throw err;
    }
  };
  await (await opener()).close();
  return opener;
}
