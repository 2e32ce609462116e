/** Settings changes (thresholds, auto-block, capture), refresh of the proxy files and cleanup of events, as operations. */
import { defineOperation, Type, type Static } from '@agent/sdk';
import { CaptureBody, CleanupBody, SettingsPatch } from '../schemas.js';
import type { SecurityRuntime } from '../runtime.js';

export function settingsOperations(rt: SecurityRuntime) {
  const global = (id: string, summary: string) => ({ summary, changes: [{ type: 'security-settings', id, actions: ['update' as const] }] });

  const update = defineOperation({
    name: 'security.updateSettings',
    input: SettingsPatch,
    resource: () => ({ type: 'security-settings', id: 'security' }),
    prepare: (patch) => ({ value: patch, preview: global('security', 'security settings') }),
    apply: async (patch: Static<typeof SettingsPatch>) => {
      await rt.settings.set(patch);
      return rt.settings.get();
    },
  });

  const capture = defineOperation({
    name: 'security.setRealtimeCapture',
    input: CaptureBody,
    resource: () => ({ type: 'security-settings', id: 'realtime_capture' }),
    prepare: (input) => ({ value: input.enabled, preview: global('realtime_capture', `real-time capture ${input.enabled ? 'on' : 'off'}`) }),
    apply: (enabled) => rt.settings.set({ realtime_capture: enabled }),
  });

  /** Regenerates every proxy file, tests, reloads, reads the access log: what went wrong is in `errors`. */
  const refresh = defineOperation({
    name: 'security.refresh',
    input: Type.Object({}),
    resource: () => ({ type: 'proxy', id: '*' }),
    prepare: () => ({ value: null, preview: { summary: 'regenerate, test and reload the proxy configuration', changes: [] } }),
    apply: async () => {
      try {
        await rt.rules.sweep();
        const { applied } = await rt.rules.proxy.mutate(() => undefined, { force: true });
        await rt.traffic.readNew();
        return { regenerated: applied.changed, removed: applied.removed, reloaded: applied.reloaded, errors: [] };
      } catch (err) {
        return { regenerated: [], removed: [], reloaded: false, errors: [(err as Error).message] };
      }
    },
  });

  const cleanup = defineOperation({
    name: 'security.cleanup',
    input: CleanupBody,
    resource: () => ({ type: 'security-events', id: '*' }),
    prepare: (input) => ({ value: Date.now() - input.older_than * 1000, preview: { summary: `remove events older than ${input.older_than} s`, changes: [] } }),
    apply: (before) => ({ events_deleted: rt.events.cleanup(before) }),
  });

  return { update, capture, refresh, cleanup };
}
