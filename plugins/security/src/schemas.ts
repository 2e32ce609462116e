/** Request and response schemas of the security routes. */
import { deploymentName, deploymentOrRetired, MAX_SECONDS, Nullable, Pagination, RecordId, Secret, Seconds, Type } from '@agent/sdk';
import { TimeQuery } from './access.js';
import { SecuritySettings } from './config.js';

export const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'ALL'] as const;

export const Blocked = Type.Object({
  ip: Type.String(),
  reason: Type.String(),
  deployment: Nullable(Type.String()),
  auto: Type.Boolean(),
  created_at: Type.String(),
  expires_at: Nullable(Type.String()),
  remaining_seconds: Nullable(Type.Integer()),
});
export const BlockBody = Type.Object({
  ip: Type.String({ maxLength: 64, description: 'IP address (or CIDR range)' }),
  reason: Type.String({ maxLength: 500 }),
  duration: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_SECONDS, description: 'seconds; omitted: permanent' })),
  deployment: Type.Optional(deploymentName({ description: 'only block for this deployment' })),
});
export const IpParams = Type.Object({ ip: Type.String({ maxLength: 64 }) });
export const UnblockQuery = Type.Object({ deployment: Type.Optional(deploymentName({ description: 'remove only the block tied to this deployment' })) });

export const Whitelist = Type.Object({ id: Type.Integer(), type: Type.String(), value: Type.String(), description: Type.String(), created_at: Type.String() });
export const WhitelistBody = Type.Object({
  type: Type.Union([Type.Literal('ip'), Type.Literal('cidr'), Type.Literal('path')]),
  value: Type.String({ maxLength: 512 }),
  description: Type.Optional(Type.String({ maxLength: 500, default: '' })),
});
export const IdParams = Type.Object({ id: RecordId() });

export const Protected = Type.Object({
  id: Type.Integer(),
  path: Type.String(),
  method: Type.String(),
  auth_type: Type.String(),
  username: Type.String(),
  deployment: Type.String(),
  enabled: Type.Boolean(),
  created_at: Type.String(),
  updated_at: Type.String(),
});
const ProtectedFields = {
  path: Type.String({ maxLength: 512, description: 'URL path prefix to protect' }),
  method: Type.Union(
    METHODS.map((m) => Type.Literal(m)),
    { description: 'HTTP method, or ALL' },
  ),
  auth_type: Type.Literal('basic'),
  credentials: Secret({ maxLength: 200, description: '<user>:<password> (stored as a bcrypt hash)' }),
  deployment: deploymentName(),
};
export const ProtectedCreate = Type.Object({ ...ProtectedFields, enabled: Type.Optional(Type.Boolean({ default: true })) });
export const ProtectedUpdate = Type.Partial(Type.Object({ ...ProtectedFields, enabled: Type.Boolean() }));

export const DepSecurity = Type.Object({
  enabled: Type.Boolean(),
  blocked_ips: Type.Array(Type.String({ maxLength: 64 }), { maxItems: 1000 }),
  protected_paths: Type.Array(Type.Object({ pattern: Type.String({ maxLength: 512 }), enabled: Type.Boolean() }), { maxItems: 200 }),
  rate_limits: Type.Array(
    Type.Object({
      path: Type.String({ maxLength: 512 }),
      rate: Type.Integer({ minimum: 1, maximum: 100_000, description: 'requests per second per source' }),
      burst: Type.Integer({ minimum: 0, maximum: 100_000 }),
      enabled: Type.Boolean(),
    }),
    { maxItems: 50 },
  ),
});
export const NameParams = Type.Object({ name: deploymentName() });

export const SettingsPatch = Type.Partial(SecuritySettings);
export const CaptureStatus = Type.Object({ enabled: Type.Boolean(), mode: Type.String(), source: Type.String() });
export const CaptureBody = Type.Object({ enabled: Type.Boolean() });
export const RefreshResult = Type.Object({
  regenerated: Type.Array(Type.String()),
  removed: Type.Array(Type.String()),
  reloaded: Type.Boolean(),
  errors: Type.Array(Type.String()),
});

export const EventSchema = Type.Object({
  id: Type.Integer(),
  time: Type.String(),
  type: Type.String(),
  severity: Type.String(),
  source_ip: Type.String(),
  deployment: Nullable(Type.String()),
  host: Type.String(),
  path: Type.String(),
  details: Type.Record(Type.String(), Type.Unknown()),
  auto_blocked: Type.Boolean(),
});
export const EventQuery = Type.Object({
  type: Type.Optional(Type.Union(['scan', 'auth_failure', 'attack_path', 'blocked_ip_hit', 'rate_limit'].map((t) => Type.Literal(t)))),
  source_ip: Type.Optional(Type.String({ maxLength: 64 })),
  deployment: Type.Optional(deploymentOrRetired()),
  start_time: TimeQuery(),
  end_time: TimeQuery(),
  ...Pagination(50, 1000),
});
export const PageQuery = Type.Object(Pagination(50, 1000));
export const Stats = Type.Object({
  events: Type.Object({
    total: Type.Integer(),
    last_24h: Type.Integer(),
    auto_blocked: Type.Integer(),
    by_type: Type.Record(Type.String(), Type.Integer()),
    by_severity: Type.Record(Type.String(), Type.Integer()),
    top_ips: Type.Array(Type.Object({ ip: Type.String(), events: Type.Integer(), last_seen: Type.String() })),
  }),
  blocked_ips: Type.Integer(),
  auto_blocked_ips: Type.Integer(),
  whitelist_entries: Nullable(Type.Integer({ description: 'null for a principal limited to deployments (the whitelist is global)' })),
  protected_routes: Type.Integer(),
  auto_block: Nullable(Type.Boolean({ description: 'null for a principal limited to deployments (a global setting)' })),
  realtime_capture: Nullable(Type.Boolean({ description: 'null for a principal limited to deployments (a global setting)' })),
});
export const CleanupBody = Type.Object({ older_than: Seconds({ minimum: 0 }) });
