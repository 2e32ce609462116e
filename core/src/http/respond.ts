/**
 * Writing answers on node's response: JSON text with its length, Buffer and string bodies, piped streams, and no
 * body (or type) for statuses that have none. Node itself leaves the body out of an answer to HEAD.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Reply } from '@agent/sdk';
import type { ErrorAnswer } from './errors.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const BINARY_TYPE = 'application/octet-stream';
/** Statuses whose answers never carry a body. */
const EMPTY = new Set([204, 205, 304]);

/** False once the answer is complete or the client is gone: nothing more can be written. */
export const writable = (res: ServerResponse): boolean => !res.writableEnded && !res.destroyed;

/** A complete text answer of a known length; the content type is the caller's. */
export function sendText(res: ServerResponse, status: number, text: string): void {
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

/** Removes headers set for an answer that will not be sent (a stream that failed before its first byte). */
export function unsetHeaders(res: ServerResponse, headers: Record<string, string>): void {
  for (const k in headers) res.removeHeader(k);
}

const isStream = (body: unknown): body is Readable => typeof (body as Readable | null)?.pipe === 'function';

/**
 * Ties a streamed body to its response: destroyed when the response closes (complete, answered otherwise, or the
 * client gone), so a file or upstream is never left open; its errors go to `onError`.
 */
export function bindStream(body: Reply['stream'], res: ServerResponse, onError: (err: Error) => void): void {
  if (!isStream(body)) return;
  body.on('error', onError);
  if (res.destroyed) body.destroy();
  else res.once('close', () => body.destroy());
}

/** The default content type of a body the route gave none for. */
function defaultType(body: Readable | Buffer | string): string {
  if (typeof body !== 'string') return BINARY_TYPE;
  return /^\s*</.test(body) ? 'text/html; charset=utf-8' : 'text/plain; charset=utf-8';
}

/**
 * Writes a route's reply: `json` (its serialized body), else its stream (a Buffer or string is sent with its
 * length, a Readable piped), else no body (204). `head` leaves a stream unread.
 */
export function sendReply(res: ServerResponse, reply: Reply, json: string | null, head: boolean): void {
  const { stream } = reply;
  if (!writable(res)) return;
  for (const k in reply.headers) res.setHeader(k, reply.headers[k]!);
  const status = json === null && stream === undefined && !EMPTY.has(reply.status) ? 204 : reply.status;
  if (EMPTY.has(status)) {
    res.removeHeader('Content-Type');
    res.removeHeader('Content-Length');
    res.removeHeader('Transfer-Encoding');
    res.statusCode = status;
    res.end();
    return;
  }
  if (json !== null) {
    if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', JSON_TYPE);
    sendText(res, status, json);
    return;
  }
  if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', defaultType(stream!));
  if (typeof stream === 'string') return sendText(res, status, stream);
  res.statusCode = status;
  if (Buffer.isBuffer(stream)) {
    res.setHeader('Content-Length', stream.length);
    res.end(stream);
  } else if (head) res.end();
  else stream!.pipe(res);
}
