/**
 * The security rules, events and settings an older edge kept (before the security plugin existed): blocked
 * addresses, whitelist, protected routes and per-deployment rules in the state document, the `security_events`
 * table in the journal, the thresholds in the `edge` runtime settings, and the rendered files in `security/`.
 * They stay as they are until the security plugin takes them (`legacySecurity()`), then go: an agent started with
 * `!security` keeps them for later, renders none of them, and removes the old `security/` files from nginx.
 */
import { Type, type Document, type PluginContext, type SqlDatabase } from '@agent/sdk';
import type { LegacySecurityData } from './api.js';
import type { EdgeConfig } from './config.js';
import { LEGACY_SECURITY_KEYS, type EdgeState } from './state.js';

/** The runtime settings an older edge declared (they were the security thresholds, and the capture mode). */
const LegacySettings = Type.Object({
  realtime_capture: Type.Boolean({ default: true, description: 'moved to the security plugin' }),
  auto_block: Type.Boolean({ default: false, description: 'moved to the security plugin' }),
  auto_block_duration: Type.Integer({ minimum: 60, maximum: 31_536_000, default: 3600, description: 'moved to the security plugin' }),
  window_seconds: Type.Integer({ minimum: 5, maximum: 3600, default: 60, description: 'moved to the security plugin' }),
  scan_threshold: Type.Integer({ minimum: 3, maximum: 100_000, default: 30, description: 'moved to the security plugin' }),
  auth_failure_threshold: Type.Integer({ minimum: 2, maximum: 100_000, default: 5, description: 'moved to the security plugin' }),
  rate_threshold: Type.Integer({ minimum: 10, maximum: 10_000_000, default: 600, description: 'moved to the security plugin' }),
  attack_paths: Type.Boolean({ default: true, description: 'moved to the security plugin' }),
  event_retention_days: Type.Integer({ minimum: 1, maximum: 3650, default: 30, description: 'moved to the security plugin' }),
});

type Legacy = Partial<Record<(typeof LEGACY_SECURITY_KEYS)[number], unknown>>;

/**
 * The handover, or null when this edge holds nothing of the old layout. Called in setup: while the old data is
 * here, the `edge` settings section is declared as it was (its stored values stay valid and readable; a section
 * declared with fewer keys would refuse every later update), and the old `security/` folder counts as the agent's
 * (removed at the next change unless the security plugin renders it again).
 */
export function legacySecurity(
  ctx: PluginContext<EdgeConfig>,
  doc: Document<EdgeState>,
  db: SqlDatabase,
  exclusive: <T>(fn: () => Promise<T>) => Promise<T>,
): (() => LegacySecurityData | null) | null {
  const data = doc.data as EdgeState & Legacy;
  const hasTable = !!db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'security_events'").get();
  if (!LEGACY_SECURITY_KEYS.some((k) => k in data) && !hasTable) return null;
  const settings = ctx.settings(LegacySettings);
  if (!data.contributors.includes('security')) data.contributors.push('security');
  let released = false;
  const handover: LegacySecurityData = {
    state: {
      next_id: data.next_id,
      blocked: (data.blocked as unknown[] | undefined) ?? [],
      whitelist: (data.whitelist as unknown[] | undefined) ?? [],
      protected: (data.protected as unknown[] | undefined) ?? [],
      deployment_security: (data.deployment_security as Record<string, unknown> | undefined) ?? {},
    },
    settings: settings.get(),
    events: (afterId, limit) =>
      hasTable ? (db.prepare('SELECT * FROM security_events WHERE id > ? ORDER BY id LIMIT ?').all(afterId, limit) as Record<string, unknown>[]) : [],
    // In the proxy's queue: a change in flight saves a copy of the document taken before, which still has the keys.
    release: () =>
      exclusive(async () => {
        if (released) return;
        await doc.update((d) => {
          for (const k of LEGACY_SECURITY_KEYS) delete (d as EdgeState & Legacy)[k];
        });
        db.exec('DROP TABLE IF EXISTS security_events');
        released = true;
        ctx.log.info('the security rules and events of an older edge were handed to the security plugin');
      }),
  };
  return () => (released ? null : handover);
}
