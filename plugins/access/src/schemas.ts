/** Schemas shared by the access routes: request fields and answers. */
import { Nullable, RecordId, Type } from '@agent/sdk';

export const RoleSchema = Type.Union([Type.Literal('admin'), Type.Literal('operator'), Type.Literal('viewer')]);
export const LevelSchema = Type.Union([Type.Literal('read'), Type.Literal('write'), Type.Literal('admin')], {
  description: 'deployment access level: read < write < admin',
});
export const PermissionSchema = Type.String({ pattern: '^([a-z][a-z0-9-]*|\\*):(read|write)$', description: '`<resource>:read|write`' });
export const Permissions = Type.Array(PermissionSchema, { maxItems: 200, uniqueItems: true });

export const ScopeSchema = Type.Union([Type.Literal('global'), Type.Literal('deployments')], {
  description:
    "`deployments`: reaches only the deployments granted to it, nothing global (the default for every role but admin); `global`: every deployment at its role's level and global state within its permissions (admins always)",
});

export const UserIdParams = Type.Object({ id: RecordId('user id') });

export const UserView = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  email: Type.String(),
  role: RoleSchema,
  permissions: Type.Array(Type.String()),
  scope: ScopeSchema,
  is_active: Type.Boolean(),
  created_at: Type.String(),
  updated_at: Type.String(),
  last_login_at: Nullable(Type.String()),
});

export const GrantView = Type.Object({
  user_id: Type.Integer(),
  deployment: Type.String(),
  access_level: LevelSchema,
  granted_at: Type.String(),
});

export const ApiKeyView = Type.Object({
  id: Type.Integer(),
  user_id: Type.Integer(),
  username: Nullable(Type.String()),
  name: Type.String(),
  description: Type.String(),
  role: RoleSchema,
  permissions: Type.Array(Type.String()),
  deployments: Type.Array(Type.String()),
  key_prefix: Type.String(),
  active: Type.Boolean(),
  status: Type.Union([Type.Literal('active'), Type.Literal('revoked'), Type.Literal('expired')]),
  created_at: Type.String(),
  expires_at: Nullable(Type.String()),
  revoked_at: Nullable(Type.String()),
  last_used_at: Nullable(Type.String()),
  last_used_ip: Nullable(Type.String()),
});

export const AuditEventView = Type.Object({
  id: Type.Integer(),
  time: Type.String(),
  actor_type: Type.Union([Type.Literal('user'), Type.Literal('api_key'), Type.Literal('system')]),
  actor_id: Type.String(),
  actor_name: Nullable(Type.String()),
  action: Type.String(),
  resource_type: Type.String(),
  resource_id: Nullable(Type.String()),
  deployment: Nullable(Type.String()),
  success: Type.Boolean(),
  status: Nullable(Type.Integer()),
  client_ip: Nullable(Type.String()),
  detail: Nullable(Type.Record(Type.String(), Type.Unknown())),
});
