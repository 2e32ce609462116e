/**
 * The route pipeline after authentication: permission → validation → deployment access → plan or handler.
 * HTTP requests and plan applies both go through it, so a plan runs exactly what a direct request would.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Reply, type AccessLevel, type Principal } from '@agent/sdk';
import type { RegisteredRoute } from '../openapi/registry.js';
import type { PlanEngine } from '../plans/engine.js';
export interface Invocation {
    route: RegisteredRoute;
    principal: Principal | null;
    params: Record<string, string>;
    query: Record<string, unknown>;
    body: unknown;
    ip: string;
    path: string;
    headers: Record<string, string | string[] | undefined>;
    /** Created on first use (most handlers never need it). */
    signal: () => AbortSignal;
    raw: {
        req: IncomingMessage;
        res: ServerResponse;
    };
    /** `?plan=true` was given. */
    wantsPlan: boolean;
    /** Set when running through plan apply. */
    planId?: string;
}
export interface ExecuteResult {
    reply: Reply;
    /** The deployment the request was about, when the route is deployment-scoped (for the audit record). */
    deployment: string | null;
}
/** Checks the permission a route (or socket) declares; throws 403. */
export declare function checkPermission(permission: string | null, principal: Principal | null): void;
/** Deployment-scoped access: 404 for a deployment the principal cannot see, 403 when its level is too low. */
export declare function checkDeployment(principal: Principal, name: string, needed: AccessLevel): void;
export declare function neededLevel(permission: string | null, declared: AccessLevel | undefined): AccessLevel;
export declare function execute(inv: Invocation, plans: PlanEngine, validateResponse?: (route: RegisteredRoute, data: unknown) => void): Promise<ExecuteResult>;
//# sourceMappingURL=execute.d.ts.map