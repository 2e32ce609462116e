/**
 * Changes of the audit journal as operations: deleting aged events now, and running the retention job now. Their
 * only check is the permission (`audit:write`), which the kernel makes before either runs.
 */
import { defineOperation, Type, type JobHandle } from '@agent/sdk';
import type { AuditReads } from '../audit/reads.js';
import { CleanupQuery } from '../audit/schemas.js';

export type AuditOperations = ReturnType<typeof auditOperations>;

export function auditOperations(reads: AuditReads, retention: JobHandle) {
  const cleanup = defineOperation({
    name: 'audit.cleanup',
    input: CleanupQuery,
    resource: () => ({ type: 'audit', id: 'events' }),
    prepare: ({ older_than }) => {
      const cutoff = new Date(Date.now() - older_than * 1000);
      return {
        value: cutoff.getTime(),
        preview: { summary: `delete the audit events older than ${cutoff.toISOString()}`, changes: [{ type: 'audit', id: 'events', actions: ['delete'] }] },
      };
    },
    apply: (cutoff) => ({ events_deleted: reads.deleteOlderThan(cutoff), older_than: new Date(cutoff).toISOString() }),
  });

  const retentionRun = defineOperation({
    name: 'audit.retentionRun',
    input: Type.Object({}),
    resource: () => ({ type: 'audit', id: 'events' }),
    prepare: () => ({ value: null, preview: { summary: 'run the audit retention job now', changes: [{ type: 'audit', id: 'events', actions: ['delete'] }] } }),
    apply: async () => {
      const execution = await retention.runNow();
      return { status: execution.status, output: execution.output, error: execution.error };
    },
  });

  return { cleanup, retentionRun };
}
