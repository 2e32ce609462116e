/** Schemas shared by the access routes: request fields and answers. */
import { DEPLOYMENT_NAME, deploymentName, Nullable, RecordId, Secret, Type } from '@agent/sdk';

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

// Request bodies, each declared once: the route validates and documents it, the operation takes it as its input.

const Email = Type.String({ minLength: 3, maxLength: 254, description: 'e-mail address' });
const Username = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{1,63}$', description: '2-64 letters, digits, `.`, `_`, `-`' });
const Password = Secret({ minLength: 1, maxLength: 512 });

export const MeView = Type.Object({
  ...UserView.properties,
  principal_type: Type.Union([Type.Literal('user'), Type.Literal('api_key')]),
  effective_permissions: Type.Array(Type.String()),
  deployments: Type.Array(Type.Object({ deployment: Type.String(), access_level: Type.String() })),
});

/** `PUT /users/me`. */
export const UpdateMe = Type.Object({ email: Email });
/** `PUT /users/me/password`. */
export const ChangePassword = Type.Object({ current_password: Password, new_password: Secret({ minLength: 1, maxLength: 512 }) });
/** `POST /users`. */
export const CreateUser = Type.Object({
  username: Username,
  email: Email,
  password: Password,
  role: RoleSchema,
  permissions: Type.Optional(Permissions),
  scope: Type.Optional(ScopeSchema),
  is_active: Type.Optional(Type.Boolean({ default: true })),
});
/** `PUT /users/:id`. */
export const UpdateUser = Type.Object({
  email: Type.Optional(Email),
  role: Type.Optional(RoleSchema),
  permissions: Type.Optional(Permissions),
  scope: Type.Optional(ScopeSchema),
  is_active: Type.Optional(Type.Boolean()),
  password: Type.Optional(Password),
});
export const UpdateUserInput = Type.Composite([UserIdParams, UpdateUser]);

export const GrantParams = Type.Object({ id: RecordId('user id'), name: deploymentName() });
/** `POST /users/:id/deployments`. */
export const AssignGrant = Type.Object({ deployment_name: deploymentName(), access_level: LevelSchema });
export const AssignGrantInput = Type.Composite([UserIdParams, AssignGrant]);
/** `PUT /users/:id/deployments/:name`. */
export const UpdateGrant = Type.Object({ access_level: LevelSchema });
export const UpdateGrantInput = Type.Composite([GrantParams, UpdateGrant]);

export const KeyParams = Type.Object({ id: RecordId('API key id') });
/** `POST /apikeys`. */
export const CreateApiKey = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  description: Type.Optional(Type.String({ maxLength: 500 })),
  role: Type.Optional(RoleSchema),
  permissions: Type.Optional(Permissions),
  deployments: Type.Optional(Type.Array(Type.String({ pattern: DEPLOYMENT_NAME }), { maxItems: 500, uniqueItems: true })),
  expires_in: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 * 365 * 86400, description: 'seconds until the key expires' })),
});
export const CreatedApiKey = Type.Object({ ...ApiKeyView.properties, key: Type.String({ description: 'the secret, shown once' }) });

/** `POST /auth/login`. */
export const Login = Type.Object({
  username: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  password: Type.Optional(Secret({ minLength: 1, maxLength: 512 })),
  api_key: Type.Optional(Secret({ minLength: 1, maxLength: 200, description: 'an API key (`agk_…`)' })),
});
/** The answer of a login: the token, and who it is for (the user for a password, the key for an API key). */
export const Session = Type.Object({
  token: Type.String(),
  expires_at: Type.String(),
  user: Type.Optional(Type.Object({ id: Type.Integer(), username: Type.String(), role: RoleSchema }, { description: 'a login with a password' })),
  api_key: Type.Optional(Type.Object({ id: Type.Integer(), name: Type.String(), role: RoleSchema }, { description: 'a login with an API key' })),
});
