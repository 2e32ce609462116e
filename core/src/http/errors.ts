/** Maps anything thrown while serving a request to `{error, code}` with the right status. */
import { isHttpError } from '@agent/sdk';

export interface ErrorAnswer {
  status: number;
  body: { error: string; code: string } & Record<string, unknown>;
  headers?: Record<string, string>;
  /** True for failures that are the agent's fault (logged with details). */
  internal: boolean;
}

const STATUS_CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT',
  410: 'GONE',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'TOO_MANY_REQUESTS',
  502: 'BAD_GATEWAY',
  503: 'SERVICE_UNAVAILABLE',
};

export function toErrorAnswer(err: unknown): ErrorAnswer {
  if (isHttpError(err)) {
    // A 503 names a part that is away (DOCKER_UNAVAILABLE, NGINX_UNAVAILABLE, …): its plugin says so once, rather
    // than the log getting a stack trace per request.
    return {
      status: err.status,
      body: { ...(err.extra ?? {}), error: err.message, code: err.code },
      headers: err.headers,
      internal: err.status >= 500 && err.status !== 503,
    };
  }
  const e = err as { status?: number; statusCode?: number; type?: string; message?: string; expose?: boolean };
  const status = e?.status ?? e?.statusCode;
  // Body parser errors (co-body / raw-body) carry a status and a type.
  if (e?.type === 'entity.too.large' || status === 413)
    return { status: 413, body: { error: 'request body too large', code: 'PAYLOAD_TOO_LARGE' }, internal: false };
  if (e?.type === 'entity.parse.failed' || (status === 400 && /JSON/i.test(e?.message ?? ''))) {
    return { status: 400, body: { error: `invalid JSON: ${(e.message ?? '').split('\n')[0]}`, code: 'INVALID_JSON' }, internal: false };
  }
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
    return { status: 415, body: { error: e.message ?? 'unsupported encoding', code: 'UNSUPPORTED_MEDIA_TYPE' }, internal: false };
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { status, body: { error: e.expose && e.message ? e.message : 'request refused', code: STATUS_CODES[status] ?? 'BAD_REQUEST' }, internal: false };
  }
  return { status: 500, body: { error: 'internal error', code: 'INTERNAL_ERROR' }, internal: true };
}
