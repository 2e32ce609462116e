/**
 * The plugin proxy: `/api/plugin/<name>/<path>` → the app plugin's own server. The core normalises the path,
 * forwards only routes the app declared, authenticates, checks the declared permission, then forwards with the
 * principal in a signed `x-agent-principal` header (the caller's token is not passed on). Websockets included.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type Koa from 'koa';
import type { Identity } from '../auth/identity.js';
import type { CoreAuditLog } from '../audit/audit-log.js';
import type { RouteRegistry } from '../openapi/registry.js';
import type { AppHost } from './app-host.js';
import type { RootLogger } from '../log.js';
/** Rejects encoded separators/dots, dot segments, empty segments and backslashes in the raw path. */
export declare function unsafePath(rawPath: string): boolean;
export declare function createPluginProxy(deps: {
    registry: RouteRegistry;
    identity: Identity;
    apps: AppHost;
    audit: CoreAuditLog;
    log: RootLogger;
}): {
    http(ctx: Koa.Context): Promise<void>;
    /** Handles an upgrade under `/api/plugin/`; returns false when the path is not ours. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, ip: string): boolean;
    close(): void;
};
//# sourceMappingURL=proxy.d.ts.map