/** Runtime settings of the security plugin (`GET/PUT /api/settings/security`, also `security` in `PUT /api/settings`). */
import { Type, type Static } from '@agent/sdk';

export const SecuritySettings = Type.Object({
  realtime_capture: Type.Boolean({ default: true, description: 'follow the access log continuously (else scan it periodically)' }),
  auto_block: Type.Boolean({ default: false, description: 'block sources of detected attacks automatically' }),
  auto_block_duration: Type.Integer({ minimum: 60, maximum: 31_536_000, default: 3600, description: 'seconds an automatic block lasts' }),
  window_seconds: Type.Integer({ minimum: 5, maximum: 3600, default: 60, description: 'sliding window of the detectors' }),
  scan_threshold: Type.Integer({ minimum: 3, maximum: 100_000, default: 30, description: '4xx answers to one source within the window that count as a scan' }),
  auth_failure_threshold: Type.Integer({
    minimum: 2,
    maximum: 100_000,
    default: 5,
    description: 'failed logins on protected routes from one source within the window',
  }),
  rate_threshold: Type.Integer({
    minimum: 10,
    maximum: 10_000_000,
    default: 600,
    description: 'requests from one source within the window above which an event is raised',
  }),
  attack_paths: Type.Boolean({ default: true, description: 'raise events for requests of well-known attack paths' }),
  event_retention_days: Type.Integer({ minimum: 1, maximum: 3650, default: 30 }),
});
export type SecuritySettings = Static<typeof SecuritySettings>;
