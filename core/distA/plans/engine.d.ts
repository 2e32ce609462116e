import { Reply, type Document, type PlanChange, type Principal, type PrincipalInfo } from '@agent/sdk';
import type { RegisteredRoute } from '../openapi/registry.js';
export type PlanStatus = 'available' | 'applying' | 'applied' | 'failed' | 'obsolete' | 'expired';
export interface StoredPlan {
    id: string;
    action: string;
    status: PlanStatus;
    resource: {
        type: string;
        id: string;
    };
    request: {
        method: string;
        path: string;
        operation_id: string;
        params: Record<string, string>;
        query: Record<string, unknown>;
        body: unknown;
    };
    changes: PlanChange[];
    summary: string;
    snapshot: {
        files: Record<string, string>;
        records: Record<string, string>;
    };
    created_by: {
        type: string;
        id: string;
        name: string;
    };
    created_at: string;
    expires_at: string;
    applied_at?: string;
    applied_by?: {
        type: string;
        id: string;
        name: string;
    };
    apply_error?: {
        code: string;
        error: string;
    };
}
export interface PlansDoc {
    plans: StoredPlan[];
}
export interface PlanInvocation {
    route: RegisteredRoute;
    principal: Principal;
    params: Record<string, string>;
    query: Record<string, unknown>;
    body: unknown;
    path: string;
}
/** Re-runs a stored request: the same pipeline as HTTP, minus authentication (the principal is given). */
export type Executor = (inv: PlanInvocation & {
    planId: string;
}) => Promise<Reply>;
export declare class PlanEngine {
    private readonly doc;
    private readonly ttlSeconds;
    private readonly routeOf;
    private readonly principalOf;
    constructor(doc: Document<PlansDoc>, ttlSeconds: number, routeOf: (operationId: string) => RegisteredRoute | undefined, principalOf: (id: string) => PrincipalInfo | null);
    create(inv: PlanInvocation): Promise<StoredPlan>;
    /** The request object handed to plan callbacks (no raw socket: previews must not stream). */
    private requestView;
    private visible;
    private effectiveStatus;
    /** The plan as shown to clients: secrets redacted, status with expiry applied. */
    view(plan: StoredPlan): Record<string, unknown>;
    list(principal: Principal, filter: {
        status?: PlanStatus;
    }): Record<string, unknown>[];
    get(id: string, principal: Principal): StoredPlan;
    discard(id: string, principal: Principal): Promise<void>;
    apply(id: string, caller: Principal, execute: Executor): Promise<Reply>;
    private setStatus;
    /** Forgets plans that ended (or expired) more than a week ago. */
    purge(): Promise<number>;
    /** Plans interrupted by a crash while applying are marked failed at start. */
    recover(): Promise<void>;
}
//# sourceMappingURL=engine.d.ts.map