/**
 * Websocket endpoints declared with `ctx.websocket`. The client upgrades, then sends its token (JWT or API key) as
 * the first text message; the same permission and deployment checks as HTTP apply, and a failure closes the
 * socket with 1008 (policy violation) and the reason. On success the server sends `{"type":"ready"}`. An open
 * socket whose rights are taken away (`LiveConnections`) is closed with 4401 (credential no longer accepted) or
 * 4403 (no longer allowed) and the reason.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { isHttpError, type HttpError, type Principal, type PrincipalDirectory, type WebSocketConnection } from '@agent/sdk';
import type { RouteRegistry, RegisteredSocket } from '../openapi/registry.js';
import type { RootLogger } from '../log.js';
import { admit, checkScope, readmit } from '../auth/checks.js';
import type { LiveConnections } from '../auth/live.js';

const AUTH_TIMEOUT_MS = 10_000;
/** How long a revoked peer has to answer the close handshake before its connection is cut. */
const REVOKED_CLOSE_MS = 1000;

const reason = (text: string) => Buffer.from(text).subarray(0, 120).toString();

/** The handler's side of a socket, and `revoke`, which closes it when its rights are taken away. */
function connection(ws: WebSocket): WebSocketConnection & { revoke(why: HttpError): void } {
  const controller = new AbortController();
  ws.once('close', () => controller.abort());
  // Messages sent in the same tick leave in one socket write (a log follower often gets several lines at once):
  // one write per message is most of the cost of a busy stream.
  const socket = (ws as unknown as { _socket?: Duplex })._socket;
  let corked = false;
  const uncork = () => {
    corked = false;
    socket?.uncork();
  };
  return {
    signal: controller.signal,
    send: (message) =>
      new Promise<void>((resolve) => {
        if (ws.readyState !== ws.OPEN) return resolve();
        if (socket && !corked) {
          corked = true;
          socket.cork();
          process.nextTick(uncork);
        }
        const text = typeof message === 'string' || message instanceof Uint8Array ? message : JSON.stringify(message);
        ws.send(text, { binary: false }, () => resolve());
      }),
    close: (code = 1000, text = '') => {
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, reason(text));
    },
    onMessage: (listener) => {
      ws.on('message', (data, isBinary) => {
        if (!isBinary) listener(data.toString());
      });
    },
    revoke: (why) => {
      if (ws.readyState !== ws.OPEN) return;
      // The close frame first: a handler that closes on abort must not get its own code out before this one.
      ws.close(why.status === 401 ? 4401 : 4403, reason(`${why.code}: ${why.message}`));
      controller.abort();
      // Nothing is sent once closing began; a peer that never answers the handshake is cut off.
      setTimeout(() => ws.terminate(), REVOKED_CLOSE_MS).unref();
    },
  };
}

export function createSocketServer(registry: RouteRegistry, principals: PrincipalDirectory, live: LiveConnections, log: RootLogger) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });

  const serve = (ws: WebSocket, entry: RegisteredSocket, params: Record<string, string>, query: Record<string, unknown>, ip: string) => {
    const timer = setTimeout(() => ws.close(1008, 'authentication timeout'), AUTH_TIMEOUT_MS);
    ws.once('message', (data, isBinary) => {
      clearTimeout(timer);
      void (async () => {
        try {
          const token = isBinary
            ? ''
            : String(data)
                .replace(/^\s*(Bearer\s+)?/i, '')
                .trim();
          const principal = token ? await principals.authenticate(token, ip) : null;
          if (!principal) return ws.close(1008, 'invalid, expired or revoked token');
          admit(entry, principal, params, query);
          const { spec } = entry;
          const found: unknown = typeof spec.deployment === 'function' ? spec.deployment({ params, query: query as never }) : undefined;
          if (typeof spec.deployment === 'function') checkScope(principal, found, entry);
          // The client may have left while its token was checked.
          if (ws.readyState !== ws.OPEN) return;
          const conn = connection(ws);
          const admitted = (now: Principal) => readmit(entry, now, params, query, found);
          ws.once('close', live.track(principal, { bearer: token, ip, admit: admitted, end: conn.revoke }));
          await conn.send({ type: 'ready' });
          await spec.handler(conn, { params, query: query as never, principal, ip });
        } catch (err) {
          if (isHttpError(err)) ws.close(err.status >= 500 ? 1011 : 1008, reason(`${err.code}: ${err.message}`));
          else {
            log.error({ err, path: entry.path }, 'websocket handler failed');
            ws.close(1011, 'internal error');
          }
        }
      })();
    });
  };

  return {
    /** Returns false when no websocket route matches the path. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, ip: string): boolean {
      const url = new URL(req.url ?? '/', 'http://agent');
      for (const entry of registry.sockets) {
        const params = entry.match(url.pathname.slice('/api'.length));
        if (!params) continue;
        const query: Record<string, unknown> = Object.fromEntries(url.searchParams);
        wss.handleUpgrade(req, socket, head, (ws) => serve(ws, entry, params, query, ip));
        return true;
      }
      return false;
    },
    close(): void {
      for (const client of wss.clients) client.close(1001, 'agent shutting down');
      wss.close();
    },
  };
}
