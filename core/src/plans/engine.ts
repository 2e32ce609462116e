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

type Actor = { type: string; id: string; name: string };
type Fingerprints = { files: Record<string, string>; records: Record<string, string> };

interface StoredPlan {
  id: string;
  action: string;
  status: PlanStatus;
  resource: { type: string; id: string };
  request: { method: string; path: string; operation_id: string; params: Record<string, string>; query: Record<string, unknown>; body: unknown };
  changes: PlanChange[];
  summary: string;
  snapshot: Fingerprints;
  created_by: Actor;
  created_at: string;
  expires_at: string;
  applied_at?: string;
  applied_by?: Actor;
  apply_error?: { code: string; error: string };
}

export interface PlansDoc {
  plans: StoredPlan[];
}

interface PlanInvocation {
  route: RegisteredRoute;
  principal: Principal;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  path: string;
}

/** Re-runs a stored request: the same pipeline as HTTP, minus authentication (the principal is given). */
type Executor = (inv: PlanInvocation & { planId: string }) => Promise<Reply>;

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

async function fingerprint(snapshot: PlanSnapshot | undefined): Promise<Fingerprints> {
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

/** `file:<path>` and `record:<key>` for every fingerprint that differs. */
function drift(before: Fingerprints, now: Fingerprints): string[] {
  return (['files', 'records'] as const).flatMap((kind) =>
    Object.keys({ ...before[kind], ...now[kind] })
      .filter((k) => before[kind][k] !== now[kind][k])
      .map((k) => `${kind.slice(0, -1)}:${k}`),
  );
}

const actorOf = (p: Principal): Actor => ({ type: p.type, id: p.id, name: p.name });

/** The request object handed to plan callbacks (no raw socket: previews must not stream). */
const requestView = (inv: PlanInvocation) => ({
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
});

const effectiveStatus = (plan: StoredPlan): PlanStatus => (plan.status === 'available' && Date.parse(plan.expires_at) <= Date.now() ? 'expired' : plan.status);

export class PlanEngine {
  constructor(
    private readonly doc: Document<PlansDoc>,
    private readonly ttlSeconds: number,
    private readonly routeOf: (operationId: string) => RegisteredRoute | undefined,
    private readonly principalOf: (id: string) => PrincipalInfo | null,
  ) {}

  async create(inv: PlanInvocation): Promise<StoredPlan> {
    const support = inv.route.spec.plan!;
    const req = requestView(inv);
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

  /** The plan as shown to clients: secrets redacted, status with expiry applied. */
  view(plan: StoredPlan): Record<string, unknown> {
    const { method, path, query, body, operation_id } = plan.request;
    const hide = (v: unknown) => (v === undefined ? undefined : REDACTED);
    return {
      ...plan,
      status: effectiveStatus(plan),
      request: { method, path, query, body: redactBySchema(body, this.routeOf(operation_id)?.validate.body?.schema) },
      changes: plan.changes.map((c) =>
        c.sensitive
          ? { ...c, before: hide(c.before), after: hide(c.after), diff: hide(c.diff) }
          : { ...c, before: redactDeep(c.before), after: redactDeep(c.after) },
      ),
    };
  }

  list(principal: Principal, filter: { status?: PlanStatus }): Record<string, unknown>[] {
    return this.doc.data.plans
      .filter((p) => (principal.isAdmin || p.created_by.id === principal.id) && (!filter.status || effectiveStatus(p) === filter.status))
      .sort((a, b) => compareText(b.created_at, a.created_at))
      .map((p) => this.view(p));
  }

  get(id: string, principal: Principal): StoredPlan {
    const plan = this.doc.data.plans.find((p) => p.id === id);
    if (!plan || !(principal.isAdmin || plan.created_by.id === principal.id)) throw errors.notFound(`plan ${id} not found`);
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
    if (effectiveStatus(plan) === 'expired') {
      await this.update(id, (p) => (p.status = 'expired'));
      throw errors.gone(`plan ${id} expired at ${plan.expires_at}`, 'PLAN_EXPIRED');
    }
    if (plan.status !== 'available') throw errors.conflict(`plan ${id} is ${plan.status} and cannot be applied`, 'PLAN_NOT_AVAILABLE', { status: plan.status });
    const route = this.routeOf(plan.request.operation_id);
    if (!route) throw errors.conflict(`the operation ${plan.request.operation_id} is no longer available`, 'PLAN_NOT_AVAILABLE');
    const info = this.principalOf(plan.created_by.id);
    if (!info) throw errors.forbidden('the principal that created this plan can no longer act');
    const { params, query, body, path } = plan.request;
    const inv: PlanInvocation = { route, principal: principalFrom(info), params, query, body: body ?? undefined, path };

    // Claim the plan first, so two concurrent applies cannot both run it.
    const claimed = await this.update(id, (p) => {
      if (p.status !== 'available') return false;
      p.status = 'applying';
      return true;
    });
    if (!claimed) throw errors.conflict(`plan ${id} is already being applied`, 'PLAN_NOT_AVAILABLE');

    let drifted: string[];
    try {
      drifted = drift(plan.snapshot, await fingerprint(await route.spec.plan!.snapshot?.(requestView(inv))));
    } catch (err) {
      await this.update(id, (p) => (p.status = 'available'));
      throw err;
    }
    if (drifted.length > 0) {
      await this.update(id, (p) => (p.status = 'available'));
      const count = `${drifted.length} dependenc${drifted.length === 1 ? 'y' : 'ies'}`;
      throw errors.conflict(`plan ${id} is stale: ${count} changed since it was created`, 'PLAN_STALE', { drifted });
    }

    const ended = (p: StoredPlan, status: PlanStatus) => {
      p.status = status;
      p.applied_at = new Date().toISOString();
      p.applied_by = actorOf(caller);
    };
    let result: Reply;
    try {
      result = await execute({ ...inv, planId: id });
    } catch (err) {
      const e = err as { code?: string; message?: string; status?: number };
      const error = typeof e.status === 'number' && e.status < 500 ? (e.message ?? 'failed') : 'internal error';
      await this.update(id, (p) => {
        ended(p, 'failed');
        p.apply_error = { code: e.code ?? 'INTERNAL_ERROR', error };
      });
      throw err;
    }
    const applied = await this.doc.update((d) => {
      const p = d.plans.find((x) => x.id === id)!;
      ended(p, 'applied');
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

  /** Changes one stored plan (if it still exists); answers what `change` returned. */
  private update<T>(id: string, change: (plan: StoredPlan) => T): Promise<T | false> {
    return this.doc.update((d) => {
      const p = d.plans.find((x) => x.id === id);
      return p ? change(p) : false;
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
      for (const p of d.plans.filter((p) => p.status === 'applying')) {
        p.status = 'failed';
        p.apply_error = { code: 'INTERRUPTED', error: 'the agent stopped while this plan was being applied' };
      }
    });
  }
}
