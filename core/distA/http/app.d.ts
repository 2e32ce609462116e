/**
 * The koa application: error envelope, CORS, the router built from the registry (auth → body → pipeline →
 * audit per route), the plugin proxy, and JSON 404/405 answers.
 */
import Koa from 'koa';
import { type Principal } from '@agent/sdk';
import type { CoreConfig } from '../config/config.js';
import type { RootLogger } from '../log.js';
import type { Identity } from '../auth/identity.js';
import type { RouteRegistry } from '../openapi/registry.js';
import type { PlanEngine } from '../plans/engine.js';
import type { CoreAuditLog } from '../audit/audit-log.js';
export interface HttpDeps {
    config: CoreConfig;
    log: RootLogger;
    identity: Identity;
    registry: RouteRegistry;
    plans: PlanEngine;
    audit: CoreAuditLog;
    /** Serves `/api/plugin/<name>/…`; resolves when the proxied answer is complete. */
    proxy: (ctx: Koa.Context) => Promise<void>;
    /** Development aid (tests): check `data` of successful answers against the route's response schema. */
    validateResponses: boolean;
}
/**
 * The principal behind an `Authorization: Bearer …` header; throws 401. Synchronous when the identity answers
 * from its caches (every request but a token's first), so the hot path awaits nothing.
 */
export declare function authenticateHeader(header: string | undefined, ip: string, identity: Identity): Principal | Promise<Principal>;
/** The first literal path segment names the resource type in audit records. */
export declare const resourceTypeOf: (path: string) => string;
export declare function auditActor(principal: Principal): {
    actor_type: 'user' | 'api_key' | 'system';
    actor_id: string;
    actor_name: string;
};
export declare function createHttpApp(deps: HttpDeps): Koa;
//# sourceMappingURL=app.d.ts.map