/**
 * Multipart bodies, for the routes that declare `multipart` only (a user's uploads: an archive to restore, files of
 * a deployment), read by koa-body's formidable. The route's permission is checked before a byte is read, so a
 * principal without it cannot fill the disk. Files are written into a folder of the request's own below
 * `<data_dir>/uploads` (0700: never a /tmp shared with other users of the host), with their SHA-256 computed on
 * the way, and that folder is removed once the request is answered, whatever happened.
 */
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Context, Middleware } from 'koa';
import { koaBody } from 'koa-body';
import typeis from 'type-is';
import { errors, HttpError, type Principal, type UploadedFile } from '@agent/sdk';
import type { RegisteredRoute } from '../openapi/registry.js';
import { checkPermission } from '../auth/checks.js';

/** What the route stack keeps of a multipart request (part of its `ctx.state`). */
export interface MultipartState {
  principal: Principal | null;
  body: unknown;
  files?: Record<string, UploadedFile>;
}

/** Room for the parts' headers and boundaries when a declared length is compared with the limits. */
const FRAMING = 64 * 1024;
/** formidable's error codes (FormidableError.code) of limits exceeded. */
const TOO_MANY_FILES = 1015;
const FILE_TOO_LARGE = new Set([1009, 1016]);

/** The folder uploads go to; whatever a crash left there is removed (one agent per data folder). */
export function uploadsFolder(dataDir: string): string {
  const dir = join(dataDir, 'uploads');
  rmSync(dir, { recursive: true, force: true });
  return dir;
}

/** Removes a request's folder; retried once in a while, as a write formidable abandoned may still be closing. */
async function removeFolder(dir: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await rm(dir, { recursive: true, force: true });
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 50 * attempt));
    }
  }
}

/** A formidable failure, or the client gone midway, as the client's error (not the agent's: nothing to log). */
function refusal(ctx: Context, err: unknown, maxFileSize: number): unknown {
  const e = err as { code?: unknown; httpCode?: unknown; message?: string };
  if (typeof e?.code !== 'number' || typeof e.httpCode !== 'number') {
    // The socket's errors (reset, a request cut off) come through the request; a disk's stay the agent's (500).
    const cut = typeof e?.code === 'string' && (e.code.startsWith('HPE_') || e.code === 'ECONNRESET');
    if (cut || ctx.req.readableAborted) return errors.badRequest('the client went away before the body was complete', 'REQUEST_ABORTED');
    return err;
  }
  if (e.code === TOO_MANY_FILES) return errors.tooLarge('too many files in the upload');
  if (FILE_TOO_LARGE.has(e.code)) return errors.tooLarge(`the uploaded file is larger than ${maxFileSize} bytes`);
  if (e.httpCode === 413) return errors.tooLarge('the form fields are too large');
  return errors.badRequest(`invalid multipart body: ${e.message ?? 'unreadable'}`, 'INVALID_MULTIPART');
}

/** One file per declared field, nothing else (`refused`: the file parts that were not written). */
function declaredFiles(received: Record<string, unknown>, names: readonly string[], refused: Map<string, number>): Record<string, UploadedFile> {
  for (const [name, extra] of refused) {
    throw errors.badRequest(names.includes(name) ? `body.${name}: one file expected, got ${extra + 1}` : `body.${name}: unexpected file`);
  }
  const out: Record<string, UploadedFile> = {};
  for (const [name, value] of Object.entries(received)) {
    const f = value as { filepath: string; size: number; hash?: unknown; originalFilename?: string | null; mimetype?: string | null };
    out[name] = { path: f.filepath, size: f.size, sha256: String(f.hash), filename: f.originalFilename ?? null, contentType: f.mimetype ?? null };
  }
  for (const name of names) if (!out[name]) throw errors.badRequest(`body.${name}: a file is required`);
  return out;
}

/**
 * Reads a multipart body into `state.body` (the fields) and `state.files`, runs the rest of the route's stack, then
 * removes the files. Anything but `multipart/form-data` is 415.
 */
export function multipartBody(route: RegisteredRoute, opts: { uploads: string; fieldsLimit: number; state: (ctx: Context) => MultipartState }): Middleware {
  const { files: names, maxFileSize } = route.spec.multipart!;
  const maxTotal = maxFileSize * names.length;
  return async (ctx, next) => {
    const state = opts.state(ctx);
    let dir: string | null = null;
    const refused = new Map<string, number>();
    try {
      // The permission first: a principal without it learns nothing from how its body would have been read.
      checkPermission(route.permission, state.principal);
      if (!typeis(ctx.req, ['multipart/form-data'])) throw new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'the body must be multipart/form-data');
      if (Number(ctx.get('Content-Length') || 0) > maxTotal + opts.fieldsLimit + FRAMING) {
        throw errors.tooLarge(`the upload is larger than ${maxFileSize} bytes`);
      }
      await mkdir(opts.uploads, { recursive: true, mode: 0o700 });
      dir = await mkdtemp(join(opts.uploads, 'req-'));
      await koaBody(formOptions(dir, refused))(ctx, async () => undefined);
    } catch (err) {
      // Refused before the body was read to its end: the rest is not worth reading (it may be gigabytes).
      if (!ctx.req.complete) ctx.set('Connection', 'close');
      if (dir) await removeFolder(dir);
      throw refusal(ctx, err, maxFileSize);
    }
    try {
      const request = ctx.request as { body?: unknown; files?: Record<string, unknown> };
      state.body = request.body;
      state.files = declaredFiles(request.files ?? {}, names, refused);
      await next();
    } finally {
      await removeFolder(dir!);
    }
  };

  /**
   * formidable's options; file parts of undeclared or repeated fields are counted in `refused`, never written. The
   * rest is koa-body's defaults: only multipart reaches it (415 above), read for POST, PUT and PATCH, failures thrown.
   */
  function formOptions(uploadDir: string, refused: Map<string, number>): Parameters<typeof koaBody>[0] {
    const taken = new Set<string>();
    return {
      multipart: true,
      formidable: {
        uploadDir,
        maxFileSize,
        maxTotalFileSize: maxTotal,
        maxFiles: names.length,
        maxFields: 100,
        maxFieldsSize: opts.fieldsLimit,
        // An empty file is the handler's to judge (an empty archive is a corrupt one, not a malformed request).
        allowEmptyFiles: true,
        minFileSize: 0,
        hashAlgorithm: 'sha256',
        filter: ({ name }) => {
          const field = name ?? '';
          if (names.includes(field) && !taken.has(field)) return !!taken.add(field);
          refused.set(field, (refused.get(field) ?? 0) + 1);
          return false;
        },
      },
    };
  }
}
