/**
 * Taking over what an older edge kept (before this plugin existed): its rules (state document), its runtime
 * settings (the `edge` section) and its events (journal). Each step is done once and recorded where its data
 * goes, so a crash half-way repeats only what was not done; then the edge is told to release its copy.
 * All in `setup`: the rules before the edge's first render, so nginx never runs without them; the events before
 * the edge reads the access log (its start), so new events take ids after the old ones (which are kept).
 */
import type { Document, Logger, PluginSettings } from '@agent/sdk';
import type { LegacySecurityData } from '@agent/plugin-edge/api';
import { SecuritySettings } from './config.js';
import type { SecurityEvents } from './events.js';
import type { SecurityState } from './state.js';

const EVENTS_IMPORT = 'edge.security_events';

/** Rules, settings and events; the edge's copy is released in the background (null: nothing to take over). */
export async function takeOver(
  legacy: LegacySecurityData | null,
  doc: Document<SecurityState>,
  settings: PluginSettings<typeof SecuritySettings>,
  events: SecurityEvents,
  log: Logger,
): Promise<void> {
  if (!legacy) return;
  if (doc.data.imported_from_edge_at === null) {
    const s = legacy.state;
    // The settings first: the state's marker says both were taken.
    const known = Object.keys(SecuritySettings.properties);
    await settings.set(Object.fromEntries(Object.entries(legacy.settings).filter(([k]) => known.includes(k))) as Partial<SecuritySettings>);
    await doc.update((d) => {
      Object.assign(d, {
        next_id: Math.max(d.next_id, s.next_id),
        blocked: s.blocked,
        whitelist: s.whitelist,
        protected: s.protected,
        deployment_security: s.deployment_security,
        imported_from_edge_at: new Date().toISOString(),
      });
    });
    log.info('took over the security rules and settings an older edge kept', {
      blocked: s.blocked.length,
      whitelist: s.whitelist.length,
      protected_routes: s.protected.length,
      deployments: Object.keys(s.deployment_security).length,
    });
  }
  const rows = events.import(EVENTS_IMPORT, (after, limit) => legacy.events(after, limit));
  if (rows) log.info('took over the security events an older edge kept', { events: rows });
  // In the edge's apply queue: after its first render, which must not hold the start.
  legacy.release().catch((err: unknown) => log.warn('the edge did not release its copy of the security data', { error: (err as Error).message }));
}
