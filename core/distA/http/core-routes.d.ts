/** The routes the core serves itself: health, auth, the live OpenAPI document, plans and the plugin list. */
import { type DeploymentsService, type RouteSpec } from '@agent/sdk';
import type { Identity } from '../auth/identity.js';
import type { LoginLimiter } from '../auth/login-limiter.js';
import type { CoreAuditLog } from '../audit/audit-log.js';
import type { PlanEngine } from '../plans/engine.js';
import type { PluginRecord } from '../plugins/host.js';
import type { AppState } from '../plugins/app-host.js';
import type { RouteRegistry } from '../openapi/registry.js';
export interface CoreRouteDeps {
    version: string;
    startedAt: number;
    identity: Identity;
    limiter: LoginLimiter;
    audit: CoreAuditLog;
    plans: PlanEngine;
    registry: RouteRegistry;
    tokenTtl: number;
    openapi: () => string;
    plugins: () => PluginRecord[];
    appState: (name: string) => AppState | undefined;
    /** The deployments service, when a plugin provides it. */
    deployments: () => DeploymentsService | undefined;
}
export declare function coreRoutes(d: CoreRouteDeps): RouteSpec<any, any, any>[];
//# sourceMappingURL=core-routes.d.ts.map