/** Websocket follows (log streams): token as the first message, `{"type":"ready"}`, then JSON messages. */
import { loadWs } from './lazy.js';
import { AgentApiError, AgentConnectionError } from './errors.js';
import type { QueryValue } from './types.js';

export interface FollowOptions {
  /** ws:// or wss:// URL including the query. */
  url: string;
  token: string;
  query?: Record<string, QueryValue>;
  /** Each message after `ready`: parsed JSON, or the text when it is not JSON. */
  onMessage(message: unknown): void;
  /** Called once the server accepted the token. */
  onReady?(): void;
  /** Closing it ends the follow normally. */
  signal?: AbortSignal;
  /** How long to wait for the connection and the `ready` message (default 15 s). */
  readyTimeoutMs?: number;
}

/** `"FORBIDDEN: not allowed"` (the reason of a 1008/1011 close) → an API error with that code. */
function closeError(code: number, reason: string): Error {
  const m = /^([A-Z][A-Z0-9_]+): ([^]*)$/.exec(reason);
  if (code === 1008) {
    if (m) return new AgentApiError(m[1] === 'NOT_FOUND' ? 404 : m[1] === 'FORBIDDEN' ? 403 : 400, { error: m[2]!, code: m[1]! });
    return new AgentApiError(401, { error: reason || 'refused by the agent', code: 'UNAUTHORIZED' });
  }
  if (m) return new AgentApiError(500, { error: m[2]!, code: m[1]! });
  return new AgentApiError(500, { error: reason || `stream closed with code ${code}`, code: 'STREAM_CLOSED' });
}

export function followStream(options: FollowOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const WebSocket = loadWs().WebSocket;
    const ws = new WebSocket(options.url, { handshakeTimeout: options.readyTimeoutMs ?? 15_000 });
    let ready = false;
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(readyTimer);
      options.signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };
    const readyTimer = setTimeout(() => {
      finish(new AgentConnectionError(`the stream at ${options.url} did not become ready in time`));
      ws.terminate();
    }, options.readyTimeoutMs ?? 15_000);
    const onAbort = () => {
      finish();
      ws.close(1000, 'client done');
    };
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });

    ws.on('open', () => ws.send(options.token));
    ws.on('message', (data, isBinary) => {
      const text = isBinary ? Buffer.from(data as Buffer).toString('utf8') : data.toString();
      let message: unknown = text;
      try {
        message = JSON.parse(text);
      } catch {
        // not JSON: hand over the text
      }
      if (!ready) {
        if ((message as { type?: unknown })?.type === 'ready') {
          ready = true;
          clearTimeout(readyTimer);
          options.onReady?.();
          return;
        }
      }
      options.onMessage(message);
    });
    ws.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0;
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => {
        let body: { error?: string; code?: string } = {};
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON
        }
        finish(new AgentApiError(status, { error: body.error ?? (text.trim() || `HTTP ${status}`), code: body.code ?? `HTTP_${status}` }));
      });
    });
    ws.on('error', (err) => finish(new AgentConnectionError(`stream ${options.url}: ${err.message}`, { cause: err })));
    ws.on('close', (code, reasonBuf) => {
      const reason = reasonBuf.toString();
      if (code === 1000 || code === 1001 || code === 1005) return finish();
      finish(closeError(code, reason));
    });
  });
}
