/**
 * Plans: `?plan=true` previews a change without running it; `POST /api/plans/:id/apply` runs the stored request
 * as the original principal after checking expiry and the fingerprints of everything the change depends on.
 * Plans are stored in an encrypted document because they hold the original request.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { errors, principalFrom, Reply, compareText } from '@agent/sdk';
import { REDACTED, redactBySchema, redactDeep } from './redact.js';
const sha256 = (data) => createHash('sha256').update(data).digest('hex');
/** JSON with sorted keys, so equal records hash equally. */
function stableJson(value) {
    if (value === null || typeof value !== 'object')
        return JSON.stringify(value) ?? 'null';
    if (Array.isArray(value))
        return `[${value.map(stableJson).join(',')}]`;
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${stableJson(value[k])}`).join(',')}}`;
}
async function fingerprint(snapshot) {
    const files = {};
    for (const path of snapshot?.files ?? []) {
        try {
            files[path] = sha256(await readFile(path));
        }
        catch (err) {
            const code = err.code;
            if (code !== 'ENOENT' && code !== 'ENOTDIR')
                throw err;
            files[path] = 'absent';
        }
    }
    const records = {};
    for (const [key, value] of Object.entries(snapshot?.records ?? {}))
        records[key] = value === undefined ? 'absent' : sha256(stableJson(value));
    return { files, records };
}
const actorOf = (p) => ({ type: p.type, id: p.id, name: p.name });
export class PlanEngine {
    doc;
    ttlSeconds;
    routeOf;
    principalOf;
    constructor(doc, ttlSeconds, routeOf, principalOf) {
        this.doc = doc;
        this.ttlSeconds = ttlSeconds;
        this.routeOf = routeOf;
        this.principalOf = principalOf;
    }
    async create(inv) {
        const support = inv.route.spec.plan;
        const req = this.requestView(inv);
        const [preview, snapshot] = await Promise.all([support.preview(req), support.snapshot?.(req)]);
        const now = Date.now();
        const plan = {
            id: randomUUID(),
            action: inv.route.operationId,
            status: 'available',
            resource: support.resource(req),
            request: { method: inv.route.method, path: inv.path, operation_id: inv.route.operationId, params: inv.params, query: inv.query, body: inv.body ?? null },
            changes: preview.changes,
            summary: preview.summary ?? `${inv.route.spec.summary} (${preview.changes.length} change${preview.changes.length === 1 ? '' : 's'})`,
            snapshot: await fingerprint(snapshot),
            created_by: actorOf(inv.principal),
            created_at: new Date(now).toISOString(),
            expires_at: new Date(now + this.ttlSeconds * 1000).toISOString(),
        };
        await this.doc.update((d) => {
            d.plans.push(plan);
        });
        return plan;
    }
    /** The request object handed to plan callbacks (no raw socket: previews must not stream). */
    requestView(inv) {
        return {
            params: inv.params, query: inv.query, body: inv.body, principal: inv.principal, ip: '', method: inv.route.method,
            path: inv.path, headers: {}, signal: new AbortController().signal,
            raw: undefined,
        };
    }
    visible(plan, principal) {
        return principal.isAdmin || plan.created_by.id === principal.id;
    }
    effectiveStatus(plan) {
        return plan.status === 'available' && Date.parse(plan.expires_at) <= Date.now() ? 'expired' : plan.status;
    }
    /** The plan as shown to clients: secrets redacted, status with expiry applied. */
    view(plan) {
        const route = this.routeOf(plan.request.operation_id);
        return {
            ...plan,
            status: this.effectiveStatus(plan),
            request: { method: plan.request.method, path: plan.request.path, query: plan.request.query, body: redactBySchema(plan.request.body, route?.validate.body?.schema) },
            changes: plan.changes.map((c) => c.sensitive
                ? { ...c, before: c.before === undefined ? undefined : REDACTED, after: c.after === undefined ? undefined : REDACTED, diff: c.diff === undefined ? undefined : REDACTED }
                : { ...c, before: redactDeep(c.before), after: redactDeep(c.after) }),
        };
    }
    list(principal, filter) {
        return this.doc.data.plans
            .filter((p) => this.visible(p, principal) && (!filter.status || this.effectiveStatus(p) === filter.status))
            .sort((a, b) => compareText(b.created_at, a.created_at))
            .map((p) => this.view(p));
    }
    get(id, principal) {
        const plan = this.doc.data.plans.find((p) => p.id === id);
        if (!plan || !this.visible(plan, principal))
            throw errors.notFound(`plan ${id} not found`);
        return plan;
    }
    async discard(id, principal) {
        this.get(id, principal);
        await this.doc.update((d) => {
            d.plans = d.plans.filter((p) => p.id !== id);
        });
    }
    async apply(id, caller, execute) {
        const plan = this.get(id, caller);
        if (this.effectiveStatus(plan) === 'expired') {
            await this.setStatus(id, 'expired');
            throw errors.gone(`plan ${id} expired at ${plan.expires_at}`, 'PLAN_EXPIRED');
        }
        if (plan.status !== 'available')
            throw errors.conflict(`plan ${id} is ${plan.status} and cannot be applied`, 'PLAN_NOT_AVAILABLE', { status: plan.status });
        const route = this.routeOf(plan.request.operation_id);
        if (!route)
            throw errors.conflict(`the operation ${plan.request.operation_id} is no longer available`, 'PLAN_NOT_AVAILABLE');
        const info = this.principalOf(plan.created_by.id);
        if (!info)
            throw errors.forbidden('the principal that created this plan can no longer act');
        const original = principalFrom(info);
        const inv = { route, principal: original, params: plan.request.params, query: plan.request.query, body: plan.request.body ?? undefined, path: plan.request.path };
        // Claim the plan first, so two concurrent applies cannot both run it.
        const claimed = await this.doc.update((d) => {
            const p = d.plans.find((x) => x.id === id);
            if (!p || p.status !== 'available')
                return false;
            p.status = 'applying';
            return true;
        });
        if (!claimed)
            throw errors.conflict(`plan ${id} is already being applied`, 'PLAN_NOT_AVAILABLE');
        try {
            const current = await fingerprint(await route.spec.plan.snapshot?.(this.requestView(inv)));
            const drifted = [
                ...Object.keys({ ...plan.snapshot.files, ...current.files }).filter((k) => plan.snapshot.files[k] !== current.files[k]).map((k) => `file:${k}`),
                ...Object.keys({ ...plan.snapshot.records, ...current.records }).filter((k) => plan.snapshot.records[k] !== current.records[k]).map((k) => `record:${k}`),
            ];
            if (drifted.length > 0) {
                await this.setStatus(id, 'available');
                throw errors.conflict(`plan ${id} is stale: ${drifted.length} dependenc${drifted.length === 1 ? 'y' : 'ies'} changed since it was created`, 'PLAN_STALE', { drifted });
            }
        }
        catch (err) {
            if (err.code !== 'PLAN_STALE')
                await this.setStatus(id, 'available');
            throw err;
        }
        let result;
        try {
            result = await execute({ ...inv, planId: id });
        }
        catch (err) {
            const e = err;
            await this.doc.update((d) => {
                const p = d.plans.find((x) => x.id === id);
                p.status = 'failed';
                p.applied_at = new Date().toISOString();
                p.applied_by = actorOf(caller);
                p.apply_error = { code: e.code ?? 'INTERNAL_ERROR', error: typeof e.status === 'number' && e.status < 500 ? (e.message ?? 'failed') : 'internal error' };
            });
            throw err;
        }
        const applied = await this.doc.update((d) => {
            const p = d.plans.find((x) => x.id === id);
            p.status = 'applied';
            p.applied_at = new Date().toISOString();
            p.applied_by = actorOf(caller);
            for (const other of d.plans) {
                if (other.id !== id && other.status === 'available' && other.resource.type === p.resource.type && other.resource.id === p.resource.id) {
                    other.status = 'obsolete';
                }
            }
            return p;
        });
        return new Reply(result.status, { data: { plan: this.view(applied), result: result.body?.data ?? null }, message: `plan applied${result.body?.message ? `: ${result.body.message}` : ''}` });
    }
    async setStatus(id, status) {
        await this.doc.update((d) => {
            const p = d.plans.find((x) => x.id === id);
            if (p)
                p.status = status;
        });
    }
    /** Forgets plans that ended (or expired) more than a week ago. */
    async purge() {
        const cutoff = Date.now() - 7 * 86400_000;
        return this.doc.update((d) => {
            const before = d.plans.length;
            d.plans = d.plans.filter((p) => Date.parse(p.applied_at ?? p.expires_at) > cutoff);
            return before - d.plans.length;
        });
    }
    /** Plans interrupted by a crash while applying are marked failed at start. */
    async recover() {
        if (!this.doc.data.plans.some((p) => p.status === 'applying'))
            return;
        await this.doc.update((d) => {
            for (const p of d.plans) {
                if (p.status === 'applying') {
                    p.status = 'failed';
                    p.apply_error = { code: 'INTERRUPTED', error: 'the agent stopped while this plan was being applied' };
                }
            }
        });
    }
}
//# sourceMappingURL=engine.js.map