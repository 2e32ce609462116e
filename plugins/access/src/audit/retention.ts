/** The retention of the audit journal: a live setting and the daily job that deletes older events. */
import type { JobHandle, PluginContext } from '@agent/sdk';
import type { AuditReads } from './reads.js';
import { AuditSettings } from './schemas.js';

const DAY_MS = 86_400_000;

export function auditRetention(ctx: PluginContext, reads: AuditReads): JobHandle {
  const settings = ctx.settings(AuditSettings);
  return ctx.job({
    name: 'audit-retention',
    cron: '23 3 * * *',
    description: 'deletes audit events older than the retention setting',
    run: async (run) => {
      const days = settings.get().retention_days;
      if (days === 0) {
        run.output('retention is 0: events are kept forever');
        return;
      }
      const deleted = reads.deleteOlderThan(Date.now() - days * DAY_MS);
      run.output(`${deleted} events older than ${days} days deleted`);
      await ctx.audit({ action: 'audit.retention', resource_type: 'audit', success: true, detail: { events_deleted: deleted, retention_days: days } });
    },
  });
}
