/**
 * Log sources of a deployment: container output (`stdout`), built-in file sources of its kind (declared by the
 * template it came from) and custom ones. File paths are relative to the deployment folder and resolved with
 * symlinks, so no source can read outside it.
 */
import { realpath } from 'node:fs/promises';
import { isAbsolute, join, normalize, sep } from 'node:path';
import { errors } from '@agent/sdk';
import type { LogSourceSpec } from './files.js';

export const SOURCE_ID = '^[a-z0-9][a-z0-9_.-]{0,62}$';

export interface LogSourceView {
  id: string;
  name: string;
  type: 'container' | 'file';
  path: string | null;
  format: string | null;
  builtin: boolean;
}

export const CONTAINER_SOURCE: LogSourceView = { id: 'stdout', name: 'Container output (stdout and stderr)', type: 'container', path: null, format: null, builtin: true };

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
    if (s.id === 'stdout' || builtinIds.has(s.id)) throw errors.badRequest(`body.sources[${i}].id: '${s.id}' is reserved by a built-in source`, 'VALIDATION_FAILED', { field: `sources[${i}].id` });
    if (seen.has(s.id)) throw errors.badRequest(`body.sources[${i}].id: '${s.id}' is given twice`, 'VALIDATION_FAILED', { field: `sources[${i}].id` });
    seen.add(s.id);
    const problem = relativePathProblem(s.path);
    if (problem) throw errors.badRequest(`body.sources[${i}].path: ${problem}`, 'INVALID_PATH', { field: `sources[${i}].path` });
  }
}

/** The absolute path of a file source, refusing anything (symlinks included) that leads outside the folder. */
export async function resolveSourceFile(dir: string, relative: string): Promise<string> {
  const problem = relativePathProblem(relative);
  if (problem) throw errors.badRequest(`log source path ${problem}`, 'INVALID_PATH');
  let real: string;
  let base: string;
  try {
    [real, base] = await Promise.all([realpath(join(dir, relative)), realpath(dir)]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw errors.notFound(`log file '${relative}' does not exist (yet)`, 'LOG_FILE_MISSING');
    throw err;
  }
  if (!real.startsWith(base + sep)) throw errors.badRequest(`log source '${relative}' resolves outside the deployment folder`, 'INVALID_PATH');
  return real;
}
