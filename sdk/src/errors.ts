import type { ErrorCodes } from './http.js';

/**
 * Errors a handler throws to answer with `{error, code}` and a status.
 * Anything else thrown becomes a 500 `INTERNAL_ERROR` without details.
 */
export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  /** Extra fields merged into the error body, e.g. `drifted` on a stale plan. */
  readonly extra?: Record<string, unknown>;
  readonly headers?: Record<string, string>;

  constructor(status: number, code: string, message: string, extra?: Record<string, unknown>, headers?: Record<string, string>) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.code = code;
    this.extra = extra;
    this.headers = headers;
  }
}

export const isHttpError = (err: unknown): err is HttpError =>
  err instanceof HttpError ||
  (typeof err === 'object' &&
    err !== null &&
    (err as { name?: unknown }).name === 'HttpError' &&
    typeof (err as { status?: unknown }).status === 'number' &&
    typeof (err as { code?: unknown }).code === 'string');

/** Shorthands for the statuses every plugin uses. */
export const errors = {
  badRequest: (message: string, code = 'VALIDATION_FAILED', extra?: Record<string, unknown>) => new HttpError(400, code, message, extra),
  unauthorized: (message = 'authentication required', code = 'UNAUTHORIZED') => new HttpError(401, code, message),
  forbidden: (message = 'not allowed', code = 'FORBIDDEN') => new HttpError(403, code, message),
  notFound: (message: string, code = 'NOT_FOUND') => new HttpError(404, code, message),
  conflict: (message: string, code = 'CONFLICT', extra?: Record<string, unknown>) => new HttpError(409, code, message, extra),
  gone: (message: string, code = 'GONE') => new HttpError(410, code, message),
  tooLarge: (message: string, code = 'PAYLOAD_TOO_LARGE') => new HttpError(413, code, message),
  unavailable: (message: string, code = 'SERVICE_UNAVAILABLE') => new HttpError(503, code, message),
  badGateway: (message: string, code = 'BAD_GATEWAY') => new HttpError(502, code, message),
  internal: (message = 'internal error', code = 'INTERNAL_ERROR') => new HttpError(500, code, message),
};

/**
 * The answers of several sources in one `errors` declaration (`RouteSpec.errors`): each status with the codes of
 * every set, e.g. a route's own and those of the services it calls (`mergeErrors(ENGINE_ERRORS, { 409: ['X'] })`).
 */
export function mergeErrors(...sets: ErrorCodes[]): ErrorCodes {
  const out: Record<string, string[]> = {};
  for (const set of sets) for (const [status, codes] of Object.entries(set)) out[status] = [...new Set([...(out[status] ?? []), ...(codes ?? [])])];
  return out as ErrorCodes;
}
