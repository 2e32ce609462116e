import { WebSocketServer } from 'ws';
import { isHttpError } from '@agent/sdk';
import { checkDeployment, checkPermission, neededLevel } from './execute.js';
const AUTH_TIMEOUT_MS = 10_000;
const reason = (text) => Buffer.from(text).subarray(0, 120).toString();
function connection(ws) {
    const controller = new AbortController();
    ws.once('close', () => controller.abort());
    return {
        signal: controller.signal,
        send: (message) => new Promise((resolve) => {
            if (ws.readyState !== ws.OPEN)
                return resolve();
            ws.send(typeof message === 'string' ? message : JSON.stringify(message), () => resolve());
        }),
        close: (code = 1000, text = '') => {
            if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING)
                ws.close(code, reason(text));
        },
        onMessage: (listener) => {
            ws.on('message', (data, isBinary) => {
                if (!isBinary)
                    listener(data.toString());
            });
        },
    };
}
export function createSocketServer(registry, identity, log) {
    const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
    const match = (pathname) => {
        const rel = pathname.slice('/api'.length);
        for (const socket of registry.sockets) {
            const params = socket.match(rel);
            if (params)
                return { socket, params };
        }
        return null;
    };
    const serve = (ws, entry, params, query, ip) => {
        const timer = setTimeout(() => ws.close(1008, 'authentication timeout'), AUTH_TIMEOUT_MS);
        ws.once('message', (data, isBinary) => {
            clearTimeout(timer);
            void (async () => {
                try {
                    const token = isBinary ? '' : data.toString().trim().replace(/^Bearer\s+/i, '');
                    const principal = token ? await identity.authenticate(token, ip) : null;
                    if (!principal)
                        return ws.close(1008, 'invalid, expired or revoked token');
                    checkPermission(entry.permission, principal);
                    const paramsError = entry.validate.params(params);
                    if (paramsError)
                        throw paramsError;
                    const queryError = entry.validate.query(query);
                    if (queryError)
                        throw queryError;
                    const spec = entry.spec;
                    if (spec.deployment) {
                        const name = typeof spec.deployment === 'string' ? params[spec.deployment] : spec.deployment({ params, query: query });
                        if (name)
                            checkDeployment(principal, name, neededLevel(entry.permission, spec.deploymentLevel));
                    }
                    const conn = connection(ws);
                    await conn.send({ type: 'ready' });
                    await spec.handler(conn, { params, query: query, principal, ip });
                }
                catch (err) {
                    if (isHttpError(err))
                        ws.close(err.status >= 500 ? 1011 : 1008, reason(`${err.code}: ${err.message}`));
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
        upgrade(req, socket, head, ip) {
            const url = new URL(req.url ?? '/', 'http://agent');
            const found = match(url.pathname);
            if (!found)
                return false;
            const query = {};
            for (const [k, v] of url.searchParams)
                query[k] = v;
            wss.handleUpgrade(req, socket, head, (ws) => serve(ws, found.socket, found.params, query, ip));
            return true;
        },
        close() {
            for (const client of wss.clients)
                client.close(1001, 'agent shutting down');
            wss.close();
        },
    };
}
//# sourceMappingURL=websocket.js.map