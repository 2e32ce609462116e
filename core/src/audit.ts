/**
 * Where the kernel writes audit records (requests, logins, plans applied, background work of plugins): the
 * `auditSink` a plugin provides (the access plugin, always loaded), taken from the service directory once the
 * plugins are set up. Details are redacted here, before they leave the kernel. Also: what the record of one call of
 * a route says, the same for a request, a plan applied and an app route behind the proxy.
 */
import { auditSink, errors, type AuditEventInput, type AuditSink, type Logger, type Principal } from '@agent/sdk';
import type { RegisteredRoute } from './openapi/registry.js';
import { redactDeep } from './plans/redact.js';
import type { ServiceDirectory } from './plugins/services.js';
import type { JournalSync } from './store/journal.js';

/** The error of a mutation whose audit record could not be written: it was made, but is not answered as a success. */
const auditFailed = () => errors.internal('the change was made but its audit record could not be written', 'AUDIT_FAILED');

export function auditActor(principal: Principal): { actor_type: 'user' | 'api_key' | 'system'; actor_id: string; actor_name: string } {
  return { actor_type: principal.type, actor_id: principal.id, actor_name: principal.name };
}

/**
 * The name of what a route with `creates` made: that property of the answer's data, else of the request body
 * (a failed create still names what it tried). Null without `creates` or a usable value.
 */
export function createdName(property: string | undefined, ...sources: unknown[]): string | null {
  if (!property) return null;
  for (const source of sources) {
    const value = source !== null && typeof source === 'object' ? (source as Record<string, unknown>)[property] : undefined;
    if ((typeof value === 'string' && value !== '') || typeof value === 'number') return String(value);
  }
  return null;
}

/**
 * The audit record of one call of a route, made by a request or by a plan applied: what it acted on (the first
 * path param, else what it created; for a route that creates a deployment, that deployment) and how it ended. The
 * resource type is the first literal segment of the route's path.
 */
export function routeAuditEvent(call: {
  route: RegisteredRoute;
  principal: Principal;
  params: Record<string, string>;
  status: number;
  deployment: string | null;
  created: string | null;
  ip: string;
  action?: string;
  detail: Record<string, unknown> | null;
}): AuditEventInput {
  const { route, created, status } = call;
  return {
    ...auditActor(call.principal),
    action: call.action ?? route.operationId,
    resource_type: route.path.split('/').find((s) => s && !s.startsWith(':')) ?? 'api',
    resource_id: Object.values(call.params)[0] ?? created,
    deployment: call.deployment ?? (route.spec.tenancy === 'create' ? created : null),
    success: status < 400,
    status,
    client_ip: call.ip,
    detail: call.detail,
  };
}

export class AuditWriter {
  private sink: AuditSink | undefined;

  constructor(
    private readonly services: ServiceDirectory,
    private readonly journals: JournalSync,
    private readonly log: Logger,
  ) {}

  /** Takes the sink after the plugins are set up; without one the agent cannot account for anything and refuses to run. */
  connect(why: () => string): void {
    this.sink = this.services.get<AuditSink>(auditSink.id);
    if (!this.sink) throw new Error(`no audit journal: no running plugin provides '${auditSink.id}' (${why()})`);
  }

  /**
   * Resolves once the record is durable, and with it the change it records: a record is written after its change,
   * so the journals are synced with it. A failure is logged here too, so a caller that does not wait loses only the
   * error.
   */
  record(event: AuditEventInput): Promise<void> {
    // Background work of a plugin may start before `connect` (its own start): the directory has the sink by then.
    const sink = (this.sink ??= this.services.get<AuditSink>(auditSink.id));
    if (!sink) return Promise.reject(new Error(`no audit journal: no running plugin provides '${auditSink.id}'`));
    const written = sink.record(event.detail ? { ...event, detail: redactDeep(event.detail) as Record<string, unknown> } : event);
    const synced = this.journals.sync();
    const pending = Promise.all([written, synced]).then(() => undefined);
    pending.catch((err: unknown) => this.log.error('audit record not written', { action: event.action, error: String(err) }));
    return pending;
  }

  /**
   * The record of a call that is answered once it is durable: a call that succeeded but could not be recorded
   * fails with AUDIT_FAILED; a failed call is answered as it failed, recorded or not.
   */
  settle(event: AuditEventInput): Promise<void> {
    return this.record(event).catch(() => {
      if (event.success) throw auditFailed();
    });
  }
}
