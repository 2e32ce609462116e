/**
 * The static site a plugin serves at `/` (`ctx.site`, the web console): `GET`/`HEAD` of paths outside `/api`,
 * answered from the site's folder with the headers every page of the agent carries. Kept here rather than in the
 * plugin because those headers and the path checks are the kernel's promise for everything on its origin.
 */
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { extname, join, posix, sep } from 'node:path';
import type { Context, Middleware } from 'koa';
import type { SiteSpec } from '@agent/sdk';

/**
 * Same origin only, no inline script or style (no `'unsafe-inline'`), no framing (clickjacking: the console has
 * buttons that apply plans), no plugins, no `<base>` rewriting. `connect-src 'self'` covers the websockets of the
 * same host and port. (Styles set through the CSSOM, and constructed style sheets, are not inline styles.)
 */
export const SITE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const SITE_HEADERS: Record<string, string> = {
  'Content-Security-Policy': SITE_CSP,
  'X-Content-Type-Options': 'nosniff',
  // The console's URLs name deployments: they are nobody else's business.
  'Referrer-Policy': 'no-referrer',
  // For browsers that predate frame-ancestors.
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

const IMMUTABLE = 'public, max-age=31536000, immutable';

/** The path below the site's root a request names, or null when it tries to leave it (`..`, NUL, a bad escape). */
function relativePath(path: string): string | null {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return null;
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return null;
  const normal = posix.normalize(decoded);
  if (normal.split('/').includes('..')) return null;
  return normal.replace(/^\/+/, '');
}

async function fileAt(root: string, rel: string): Promise<{ path: string; size: number; mtime: Date } | null> {
  try {
    // A link inside the folder that points out of it is not followed out.
    const path = await realpath(join(root, rel));
    if (path !== root && !path.startsWith(root + sep)) return null;
    const info = await stat(path);
    return info.isFile() ? { path, size: info.size, mtime: info.mtime } : null;
  } catch {
    return null;
  }
}

/**
 * The site's middleware: answers `GET`/`HEAD` outside `/api`; anything else goes on (the kernel's JSON 404/405).
 * Files built precompressed beside the original (`x.js.br`, `x.js.gz`) are sent when the client accepts them.
 */
export function siteMiddleware(spec: SiteSpec): Middleware {
  const fallback = spec.fallback ?? 'index.html';
  const immutable = (spec.immutable ?? []).map((folder) => folder.replace(/^\/+|\/+$/g, '') + '/');
  let root: Promise<string> | null = null;
  const rootPath = () => (root ??= realpath(spec.root));

  const send = async (ctx: Context, rel: string, cache: string | null): Promise<boolean> => {
    const base = await rootPath().catch(() => null);
    if (!base) return false;
    const file = await fileAt(base, rel);
    if (!file) return false;
    let path = file.path;
    let size = file.size;
    ctx.vary('Accept-Encoding');
    for (const [encoding, suffix] of [
      ['br', '.br'],
      ['gzip', '.gz'],
    ] as const) {
      if (ctx.acceptsEncodings(encoding, 'identity') !== encoding) continue;
      const packed = await fileAt(base, rel + suffix);
      if (!packed) continue;
      path = packed.path;
      size = packed.size;
      ctx.set('Content-Encoding', encoding);
      break;
    }
    ctx.set(SITE_HEADERS);
    ctx.set('Cache-Control', cache ?? 'no-cache');
    // koa's table (mime-types), with a charset for text; a type it does not know is sent as bytes.
    ctx.type = extname(file.path);
    if (!ctx.type) ctx.type = 'application/octet-stream';
    if (!cache) {
      // Revalidated at every load: answered 304 while unchanged.
      ctx.lastModified = file.mtime;
      ctx.etag = `W/"${file.size.toString(16)}-${file.mtime.getTime().toString(16)}"`;
      ctx.status = 200;
      if (ctx.fresh) {
        ctx.status = 304;
        return true;
      }
    }
    ctx.status = 200;
    if (ctx.method === 'GET') ctx.body = createReadStream(path);
    ctx.length = size;
    return true;
  };

  return async (ctx, next) => {
    if ((ctx.method !== 'GET' && ctx.method !== 'HEAD') || ctx.path === '/api' || ctx.path.startsWith('/api/')) return next();
    const rel = relativePath(ctx.path);
    if (rel === null) return next();
    const hashed = immutable.some((folder) => rel.startsWith(folder));
    if (rel !== '' && (await send(ctx, rel, hashed ? IMMUTABLE : null))) return;
    // A file that is not there (a hashed asset of an older build, a typo) is a 404; any other path is one of the
    // single-page app's own routes.
    if (hashed || extname(rel) !== '') return next();
    if (!(await send(ctx, fallback, null))) return next();
  };
}
