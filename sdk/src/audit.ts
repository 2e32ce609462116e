/**
 * The audit journal as the kernel sees it: where it writes one record per mutating request, login and piece of
 * background work. One plugin provides it (the access plugin, always loaded); searching and reading the journal
 * is that plugin's own contract (`@agent/plugin-access/api`).
 */
import { createServiceRef } from './services.js';

export interface AuditEventInput {
  actor_type: 'user' | 'api_key' | 'system';
  actor_id: string;
  actor_name?: string;
  action: string;
  resource_type: string;
  resource_id?: string | null;
  deployment?: string | null;
  success: boolean;
  status?: number | null;
  client_ip?: string | null;
  /** Redacted by the kernel before it reaches the sink (secret-looking keys masked). */
  detail?: Record<string, unknown> | null;
}

/**
 * What a plugin provides to be the agent's audit journal. The kernel answers a mutating request only once the
 * promise of its record resolved, so "acknowledged" implies "recorded": the promise resolves when the record is
 * durable (committed and synced to disk), and concurrent records share one commit. It rejects when the record
 * could not be written. At its plugin's stop, every record accepted so far is committed.
 */
export interface AuditSink {
  record(event: AuditEventInput): Promise<void>;
}

export const auditSink = createServiceRef<AuditSink>('agent.audit-sink', 'the audit journal the kernel writes its records to');
