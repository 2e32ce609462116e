/**
 * Plans: `?plan=true` previews a change without running it; `POST /api/plans/:id/apply` runs the stored request
 * as the original principal after checking expiry and the fingerprints of everything the change depends on.
 * Plans are stored in an encrypted document because they hold the original request.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { compareText, errors, principalFrom, Reply, type Document, type PlanChange, type PlanSnapshot, type Principal, type PrincipalInfo } from '@agent/sdk';
import type { RegisteredRoute } from '../openapi/registry.js';
import { REDACTED, redactBySchema, redactDeep } from './redact.js';

export type PlanStatus = 'available' | 'applying' | 'applied' | 'failed' | 'obsolete' | 'expired';

export interface StoredPlan {
  id: string;
  action: string;
  status: PlanStatus;
  resource: { type: string; id: string };
  request: { method: string; path: string; operation_id: string; params: Record<string, string>; query: Record<string, unknown>; body: unknown };
  changes: PlanChange[];
  summary: string;
  snapshot: { files: Record<string, string>; records: Record<string, string> };
  created_by: { type: string; id: string; name: string };
  created_at: string;
  expires_at: string;
  applied_at?: string;
  applied_by?: { type: string; id: string; name: string };
  apply_error?: { code: string; error: string };
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
export type Executor = (inv: PlanInvocation & { planId: string }) => Promise<Reply>;

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** JSON with sorted keys, so equal records hash equally. */
function stableJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  return `{${Object.keys(value)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`)
    .join(',')}}`;
}

async function fingerprint(snapshot: PlanSnapshot | undefined): Promise<StoredPlan['snapshot']> {
  const files: Record<string, string> = {};
  for (const path of snapshot?.files ?? []) {
    try {
      files[path] = sha256(await readFile(path));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
      files[path] = 'absent';
    }
  }
  const records: Record<string, string> = {};
  for (const [key, value] of Object.entries(snapshot?.records ?? {})) records[key] = value === undefined ? 'absent' : sha256(stableJson(value));
  return { files, records };
}

const actorOf = (p: Principal) => ({ type: p.type, id: p.id, name: p.name });

export class PlanEngine {
  constructor(
    private readonly doc: Document<PlansDoc>,
    private readonly ttlSeconds: number,
    private readonly routeOf: (operationId: string) => RegisteredRoute | undefined,
    private readonly principalOf: (id: string) => PrincipalInfo | null,
  ) {}

  async create(inv: PlanInvocation): Promise<StoredPlan> {
    const support = inv.route.spec.plan!;
    const req = this.requestView(inv);
    const [preview, snapshot] = await Promise.all([support.preview(req), support.snapshot?.(req)]);
    const now = Date.now();
    const plan: StoredPlan = {
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
  private requestView(inv: PlanInvocation) {
    return {
      params: inv.params,
      query: inv.query,
      body: inv.body,
      principal: inv.principal,
      ip: '',
      method: inv.route.method,
      path: inv.path,
      headers: {},
      signal: new AbortController().signal,
      raw: undefined as never,
    };
  }

  private visible(plan: StoredPlan, principal: Principal): boolean {
    return principal.isAdmin || plan.created_by.id === principal.id;
  }

  private effectiveStatus(plan: StoredPlan): PlanStatus {
    return plan.status === 'available' && Date.parse(plan.expires_at) <= Date.now() ? 'expired' : plan.status;
  }

  /** The plan as shown to clients: secrets redacted, status with expiry applied. */
  view(plan: StoredPlan): Record<string, unknown> {
    const route = this.routeOf(plan.request.operation_id);
    return {
      ...plan,
      status: this.effectiveStatus(plan),
      request: {
        method: plan.request.method,
        path: plan.request.path,
        query: plan.request.query,
        body: redactBySchema(plan.request.body, route?.validate.body?.schema),
      },
      changes: plan.changes.map((c) =>
        c.sensitive
          ? {
              ...c,
              before: c.before === undefined ? undefined : REDACTED,
              after: c.after === undefined ? undefined : REDACTED,
              diff: c.diff === undefined ? undefined : REDACTED,
            }
          : { ...c, before: redactDeep(c.before), after: redactDeep(c.after) },
      ),
    };
  }

  list(principal: Principal, filter: { status?: PlanStatus }): Record<string, unknown>[] {
    return this.doc.data.plans
      .filter((p) => this.visible(p, principal) && (!filter.status || this.effectiveStatus(p) === filter.status))
      .sort((a, b) => compareText(b.created_at, a.created_at))
      .map((p) => this.view(p));
  }

  get(id: string, principal: Principal): StoredPlan {
    const plan = this.doc.data.plans.find((p) => p.id === id);
    if (!plan || !this.visible(plan, principal)) throw errors.notFound(`plan ${id} not found`);
    return plan;
  }

  async discard(id: string, principal: Principal): Promise<void> {
    this.get(id, principal);
    await this.doc.update((d) => {
      d.plans = d.plans.filter((p) => p.id !== id);
    });
  }

  async apply(id: string, caller: Principal, execute: Executor): Promise<Reply> {
    const plan = this.get(id, caller);
    if (this.effectiveStatus(plan) === 'expired') {
      await this.setStatus(id, 'expired');
      throw errors.gone(`plan ${id} expired at ${plan.expires_at}`, 'PLAN_EXPIRED');
    }
    if (plan.status !== 'available') throw errors.conflict(`plan ${id} is ${plan.status} and cannot be applied`, 'PLAN_NOT_AVAILABLE', { status: plan.status });
    const route = this.routeOf(plan.request.operation_id);
    if (!route) throw errors.conflict(`the operation ${plan.request.operation_id} is no longer available`, 'PLAN_NOT_AVAILABLE');
    const info = this.principalOf(plan.created_by.id);
    if (!info) throw errors.forbidden('the principal that created this plan can no longer act');
    const original = principalFrom(info);
    const inv: PlanInvocation = {
      route,
      principal: original,
      params: plan.request.params,
      query: plan.request.query,
      body: plan.request.body ?? undefined,
      path: plan.request.path,
    };

    // Claim the plan first, so two concurrent applies cannot both run it.
    const claimed = await this.doc.update((d) => {
      const p = d.plans.find((x) => x.id === id);
      if (!p || p.status !== 'available') return false;
      p.status = 'applying';
      return true;
    });
    if (!claimed) throw errors.conflict(`plan ${id} is already being applied`, 'PLAN_NOT_AVAILABLE');

    try {
      const current = await fingerprint(await route.spec.plan!.snapshot?.(this.requestView(inv)));
      const drifted = [
        ...Object.keys({ ...plan.snapshot.files, ...current.files })
          .filter((k) => plan.snapshot.files[k] !== current.files[k])
          .map((k) => `file:${k}`),
        ...Object.keys({ ...plan.snapshot.records, ...current.records })
          .filter((k) => plan.snapshot.records[k] !== current.records[k])
          .map((k) => `record:${k}`),
      ];
      if (drifted.length > 0) {
        await this.setStatus(id, 'available');
        throw errors.conflict(
          `plan ${id} is stale: ${drifted.length} dependenc${drifted.length === 1 ? 'y' : 'ies'} changed since it was created`,
          'PLAN_STALE',
          { drifted },
        );
      }
    } catch (err) {
      if ((err as { code?: string }).code !== 'PLAN_STALE') await this.setStatus(id, 'available');
      throw err;
    }

    let result: Reply;
    try {
      result = await execute({ ...inv, planId: id });
    } catch (err) {
      const e = err as { code?: string; message?: string; status?: number };
      await this.doc.update((d) => {
        const p = d.plans.find((x) => x.id === id)!;
        p.status = 'failed';
        p.applied_at = new Date().toISOString();
        p.applied_by = actorOf(caller);
        p.apply_error = {
          code: e.code ?? 'INTERNAL_ERROR',
          error: typeof e.status === 'number' && e.status < 500 ? (e.message ?? 'failed') : 'internal error',
        };
      });
      throw err;
    }
    const applied = await this.doc.update((d) => {
      const p = d.plans.find((x) => x.id === id)!;
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
    return new Reply(result.status, {
      data: { plan: this.view(applied), result: result.body?.data ?? null },
      message: `plan applied${result.body?.message ? `: ${result.body.message}` : ''}`,
    });
  }

  private async setStatus(id: string, status: PlanStatus): Promise<void> {
    await this.doc.update((d) => {
      const p = d.plans.find((x) => x.id === id);
      if (p) p.status = status;
    });
  }

  /** Forgets plans that ended (or expired) more than a week ago. */
  async purge(): Promise<number> {
    const cutoff = Date.now() - 7 * 86400_000;
    return this.doc.update((d) => {
      const before = d.plans.length;
      d.plans = d.plans.filter((p) => Date.parse(p.applied_at ?? p.expires_at) > cutoff);
      return before - d.plans.length;
    });
  }

  /** Plans interrupted by a crash while applying are marked failed at start. */
  async recover(): Promise<void> {
    if (!this.doc.data.plans.some((p) => p.status === 'applying')) return;
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
