/** Validation of paths and glob patterns that come from requests or archives. */
import picomatch from 'picomatch';

/** Why a relative path is unsafe (absolute, `..`, empty segments, control characters), or null. */
export function unsafeRelativePath(path: string): string | null {
  if (path === '') return 'is empty';
  if (path.includes('\0')) return 'contains a NUL byte';
  if (path.startsWith('/') || /^[A-Za-z]:[\\/]/.test(path)) return 'must be relative';
  if (path.includes('\\')) return 'must use / as separator';
  const segments = path.split('/');
  if (segments.some((s) => s === '..')) return "must not contain '..'";
  if (segments.some((s, i) => s === '' && i !== segments.length - 1)) return 'must not contain empty segments';
  return null;
}

/** Why an exclude pattern is rejected, or null. Patterns are relative to the deployment folder. */
export function invalidExcludePattern(pattern: string): string | null {
  if (pattern.trim() === '') return 'is empty';
  if (pattern.length > 512) return 'is longer than 512 characters';
  const stripped = pattern.replace(/^\.\//, '').replace(/\/+$/, '');
  if (stripped === '' || stripped === '.') return 'matches the whole deployment folder';
  const problem = unsafeRelativePath(stripped);
  return problem;
}

/**
 * A matcher for exclude patterns (glob semantics, relative to the deployment folder): a pattern without a slash
 * matches a name at any depth (`*.log`, `node_modules`); with a slash it matches from the folder root
 * (`data/cache/**`). An excluded directory excludes everything below it.
 */
export function excludeMatcher(patterns: string[]): (relPath: string) => boolean {
  const anywhere: string[] = [];
  const rooted: string[] = [];
  for (const raw of patterns) {
    const p = raw.replace(/^\.\//, '').replace(/\/+$/, '');
    (p.includes('/') ? rooted : anywhere).push(p);
  }
  const opts = { dot: true };
  const byName = anywhere.length ? picomatch(anywhere, { ...opts, basename: true }) : null;
  const byPath = rooted.length ? picomatch(rooted, opts) : null;
  return (relPath) => (byName?.(relPath) ?? false) || (byPath?.(relPath) ?? false);
}
