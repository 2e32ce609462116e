/** Routes of the global settings: detection thresholds and auto-block, real-time capture, a full refresh. */
import { operationRoute, type PluginContext } from '@agent/sdk';
import { SecuritySettings } from '../config.js';
import { CaptureBody, CaptureStatus, RefreshResult, SettingsPatch } from '../schemas.js';
import type { SecurityQueries } from '../queries.js';
import type { settingsOperations } from '../operations/settings.js';

export function settingsRoutes(ctx: PluginContext, queries: SecurityQueries, ops: ReturnType<typeof settingsOperations>): void {
  const common = { tag: 'security' } as const;
  ctx.route({
    ...common,
    method: 'GET',
    path: '/settings/security',
    permission: 'security:read',
    operationId: 'security.getSettings',
    summary: 'Security settings: detection thresholds, auto-block, durations',
    response: SecuritySettings,
    handler: () => queries.settings(),
  });

  ctx.route(
    operationRoute(ops.update, {
      ...common,
      method: 'PUT',
      path: '/settings/security',
      permission: 'security:write',
      operationId: 'security.updateSettings',
      summary: 'Update security settings',
      body: SettingsPatch,
      response: SecuritySettings,
      input: (req) => req.body,
    }),
  );

  ctx.route({
    ...common,
    method: 'GET',
    path: '/security/realtime-capture',
    permission: 'security:read',
    operationId: 'security.getRealtimeCapture',
    summary: 'Whether traffic and events are captured in real time (else by a periodic scan)',
    response: CaptureStatus,
    handler: () => queries.capture(),
  });

  ctx.route(
    operationRoute(ops.capture, {
      ...common,
      method: 'PUT',
      path: '/security/realtime-capture',
      permission: 'security:write',
      operationId: 'security.setRealtimeCapture',
      summary: 'Enable or disable real-time capture',
      body: CaptureBody,
      response: CaptureStatus,
      input: (req) => req.body,
      respond: () => queries.capture(),
    }),
  );

  ctx.route(
    operationRoute(ops.refresh, {
      ...common,
      method: 'POST',
      path: '/security/refresh',
      permission: 'security:write',
      operationId: 'security.refresh',
      summary: 'Regenerate every proxy file (vhosts and security includes), test and reload nginx',
      response: RefreshResult,
      input: () => ({}),
    }),
  );
}
