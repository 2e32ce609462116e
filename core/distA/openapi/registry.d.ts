/**
 * The route registry: every HTTP route, websocket and app route the enabled plugins declared, with compiled
 * validators. It feeds the router, the plan engine and `/api/openapi.json`.
 */
import type { AppRouteSpec, HttpMethod, RouteSpec, WebSocketSpec } from '@agent/sdk';
import { type Validator } from './validation.js';
export interface RegisteredRoute {
    kind: 'http';
    /** The operationId was derived from method and path (not given by the plugin). */
    derived?: boolean;
    plugin: string;
    tag: string;
    operationId: string;
    method: HttpMethod;
    /** Koa path below `/api`. */
    path: string;
    /** null for public routes. */
    permission: string | null;
    spec: RouteSpec<any, any, any>;
    validate: {
        params: Validator;
        query: Validator;
        body: Validator | null;
    };
}
export interface RegisteredSocket {
    kind: 'websocket';
    plugin: string;
    tag: string;
    operationId: string;
    path: string;
    permission: string;
    spec: WebSocketSpec<any, any>;
    validate: {
        params: Validator;
        query: Validator;
    };
    match: (path: string) => Record<string, string> | null;
}
export interface RegisteredAppRoute {
    kind: 'app';
    plugin: string;
    tag: string;
    operationId: string;
    method: HttpMethod;
    /** Path inside the app. */
    path: string;
    permission: string;
    spec: AppRouteSpec;
    validate: {
        params: Validator;
        query: Validator;
    };
    match: (path: string) => Record<string, string> | null;
}
export declare const pathParams: (path: string) => string[];
/**
 * `GET /deployments` → `list`, `GET /deployments/:name` → `get`, `POST /deployments/:name/start` → `start`,
 * `GET /security/events/:id` → `securityEventsGet` (the tag's own first segment is dropped).
 */
export declare function deriveOperationName(tag: string, method: HttpMethod, path: string): string;
/** A path matcher for koa-style paths (`/metrics/:id`), used where the router is not (sockets, app routes). */
export declare function pathMatcher(path: string): (candidate: string) => Record<string, string> | null;
export declare class RouteRegistry {
    readonly routes: RegisteredRoute[];
    readonly sockets: RegisteredSocket[];
    readonly appRoutes: RegisteredAppRoute[];
    private readonly ids;
    private readonly keys;
    private claimId;
    /** Compiles a route without registering it (plugins commit their routes only when setup succeeds). */
    prepareRoute(plugin: string, spec: RouteSpec<any, any, any>): RegisteredRoute;
    prepareSocket(plugin: string, spec: WebSocketSpec<any, any>): RegisteredSocket;
    prepareAppRoute(plugin: string, spec: AppRouteSpec): RegisteredAppRoute;
    /** Registers prepared entries atomically: all or none (duplicate ids or method+path refuse the batch). */
    commit(entries: (RegisteredRoute | RegisteredSocket | RegisteredAppRoute)[]): void;
    /** Withdraws every entry of a plugin (one that failed to start). */
    removePlugin(plugin: string): void;
    byOperationId(operationId: string): RegisteredRoute | undefined;
    forPlugin(plugin: string): {
        routes: RegisteredRoute[];
        sockets: RegisteredSocket[];
        appRoutes: RegisteredAppRoute[];
    };
}
//# sourceMappingURL=registry.d.ts.map