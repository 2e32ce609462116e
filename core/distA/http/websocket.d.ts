/**
 * Websocket endpoints declared with `ctx.websocket`. The client upgrades, then sends its token (JWT or API key) as
 * the first text message; the same permission and deployment checks as HTTP apply, and a failure closes the
 * socket with 1008 (policy violation) and the reason. On success the server sends `{"type":"ready"}`.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Identity } from '../auth/identity.js';
import type { RouteRegistry } from '../openapi/registry.js';
import type { RootLogger } from '../log.js';
export declare function createSocketServer(registry: RouteRegistry, identity: Identity, log: RootLogger): {
    /** Returns false when no websocket route matches the path. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, ip: string): boolean;
    close(): void;
};
//# sourceMappingURL=websocket.d.ts.map