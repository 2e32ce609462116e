/**
 * Websocket endpoints declared with `ctx.websocket`. The client upgrades, then sends its token (JWT or API key) as
 * the first text message; the same permission and deployment checks as HTTP apply, and a failure closes the
 * socket with 1008 (policy violation) and the reason. On success the server sends `{"type":"ready"}`.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { isHttpError, type PrincipalDirectory, type WebSocketConnection } from '@agent/sdk';
import type { RouteRegistry, RegisteredSocket } from '../openapi/registry.js';
import type { RootLogger } from '../log.js';
import { admit, checkScope } from '../auth/checks.js';

const AUTH_TIMEOUT_MS = 10_000;

const reason = (text: string) => Buffer.from(text).subarray(0, 120).toString();

function connection(ws: WebSocket): WebSocketConnection {
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
  };
}

export function createSocketServer(registry: RouteRegistry, principals: PrincipalDirectory, log: RootLogger) {
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
          if (typeof spec.deployment === 'function') checkScope(principal, spec.deployment({ params, query: query as never }), entry);
          const conn = connection(ws);
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
