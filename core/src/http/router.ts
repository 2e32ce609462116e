/**
 * The route table: paths like `/deployments/:name` compiled by path-to-regexp, with the options and the param
 * decoding the kernel has always had (case-insensitive, optional trailing slash, `+` read as a space, a malformed
 * escape passed on as it is), and a GET route answering HEAD too.
 */
import { pathToRegexp, type Key } from 'path-to-regexp';

interface Entry<T> {
  regexp: RegExp;
  keys: Key[];
  /** In `Allow` order: HEAD before GET. */
  methods: string[];
  value: T;
}

/** A path param as the client meant it; a value that does not decode is kept as sent (validation judges it). */
function decodeParam(text: string): string {
  if (!text.includes('%') && !text.includes('+')) return text;
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/**
 * Routes grouped by their first path segment below the prefix, so a request only tests the few routes of its
 * group; routes whose first segment is a param are tested for every path no group claims.
 */
export class RouteTable<T> {
  private readonly groups = new Map<string, Entry<T>[]>();
  private readonly fallback: Entry<T>[] = [];

  constructor(private readonly prefix: string) {}

  add(path: string, method: string, value: T): void {
    const first = path.split('/')[1] ?? '';
    const keys: Key[] = [];
    const regexp = pathToRegexp(path === '/' ? this.prefix : this.prefix + path, keys, { sensitive: false, strict: false, end: true });
    const methods = method === 'GET' ? ['HEAD', 'GET'] : [method];
    const entry: Entry<T> = { regexp, keys, methods, value };
    if (first.startsWith(':')) {
      this.fallback.push(entry);
      return;
    }
    let list = this.groups.get(first);
    if (!list) this.groups.set(first, (list = []));
    list.push(entry);
  }

  /**
   * The route for `method` at `path` (which starts with the prefix and a slash), else the methods other routes at
   * that path accept (`Allow`), else null.
   */
  find(method: string, path: string): { value: T; params: Record<string, string> } | string[] | null {
    const start = this.prefix.length + 1;
    const end = path.indexOf('/', start);
    const list = this.groups.get(path.slice(start, end < 0 ? undefined : end)) ?? this.fallback;
    let allowed: string[] | null = null;
    for (const entry of list) {
      const match = entry.regexp.exec(path);
      if (!match) continue;
      if (!entry.methods.includes(method)) {
        (allowed ??= []).push(...entry.methods);
        continue;
      }
      const params: Record<string, string> = {};
      entry.keys.forEach((key, i) => {
        if (match[i + 1]) params[key.name] = decodeParam(match[i + 1]!);
      });
      return { value: entry.value, params };
    }
    return allowed && [...new Set(allowed)];
  }
}
