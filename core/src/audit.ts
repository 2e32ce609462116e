/**
 * Where the kernel writes audit records (requests, logins, plans applied, background work of plugins): the
 * `auditSink` a plugin provides (the access plugin, always loaded), taken from the service directory once the
 * plugins are set up. Details are redacted here, before they leave the kernel.
 */
import { auditSink, type AuditEventInput, type AuditSink, type Logger } from '@agent/sdk';
import { redactDeep } from './plans/redact.js';
import type { ServiceDirectory } from './plugins/services.js';
import type { JournalSync } from './store/journal.js';

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
}
