/**
 * The `{error, code}` answer of anything thrown while serving a request, written on node's response (koa's
 * `onerror`, the plugin proxy) or on a socket whose upgrade is refused.
 */
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { isHttpError } from '@agent/sdk';

const JSON_TYPE = 'application/json; charset=utf-8';

export interface ErrorAnswer {
  status: number;
  body: { error: string; code: string } & Record<string, unknown>;
  headers?: Record<string, string>;
  /** True for failures that are the agent's fault (logged with details). */
  internal: boolean;
}

/** The codes of client errors thrown by libraries (the body parser, an HTTP client) rather than as `HttpError`. */
const CODES: Record<number, string> = {
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
};

const clientError = (status: number, error: string, code: string): ErrorAnswer => ({ status, body: { error, code }, internal: false });

/** Maps anything thrown while serving a request to `{error, code}` with the right status. */
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
  const e = err as { status?: number; statusCode?: number; type?: string; message?: string; expose?: boolean; code?: string };
  // The client went away while its body was read: nobody is left to answer, and it is not the agent's fault.
  if (e?.type === 'request.aborted' || e?.code === 'ECONNRESET' || e?.code === 'ECONNABORTED' || e?.code === 'ERR_STREAM_PREMATURE_CLOSE')
    return clientError(400, 'the client closed the request before its body was read', 'REQUEST_ABORTED');
  const status = e?.status ?? e?.statusCode;
  // Body parser errors (co-body / raw-body) carry a status and a type.
  if (e?.type === 'entity.too.large' || status === 413) return clientError(413, 'request body too large', 'PAYLOAD_TOO_LARGE');
  if (e?.type === 'entity.parse.failed' || (status === 400 && /JSON/i.test(e?.message ?? ''))) {
    return clientError(400, `invalid JSON: ${(e.message ?? '').split('\n')[0]}`, 'INVALID_JSON');
  }
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
    return clientError(415, e.message ?? 'unsupported encoding', 'UNSUPPORTED_MEDIA_TYPE');
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return clientError(status, e.expose && e.message ? e.message : 'request refused', CODES[status] ?? 'BAD_REQUEST');
  }
  return { status: 500, body: { error: 'internal error', code: 'INTERNAL_ERROR' }, internal: true };
}

/** A complete text answer of a known length; the content type is the caller's. */
function sendText(res: ServerResponse, status: number, text: string): void {
  res.statusCode = status;
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** The `{error, code}` answer; its own headers (`Retry-After`, …) join those already set (CORS, `Allow`). */
export function sendError(res: ServerResponse, answer: ErrorAnswer): void {
  if (answer.headers) for (const k in answer.headers) res.setHeader(k, answer.headers[k]!);
  res.setHeader('Content-Type', JSON_TYPE);
  sendText(res, answer.status, JSON.stringify(answer.body));
}

/** The `{error, code}` answer to an upgrade request that is refused (no HTTP response exists there), then the end. */
export function refuseUpgrade(socket: Duplex, err: unknown): void {
  const { status, body } = toErrorAnswer(err);
  const text = JSON.stringify(body);
  const head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}`;
  socket.end(`${head}\r\nconnection: close\r\n\r\n${text}`);
}
