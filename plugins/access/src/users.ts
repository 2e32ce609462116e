/** `/api/users`, `/api/users/me` and `/api/users/me/password`. */
import { errors, reply, Secret, Type, type PluginContext, type Principal } from '@agent/sdk';
import type { IdentityService, UserRecord } from './api.js';
import { assertPermissionsWithin, assertRoleWithin, assertScopeWithin } from './rules.js';
import { Permissions, RoleSchema, ScopeSchema, UserIdParams, UserView } from './schemas.js';

const Email = Type.String({ minLength: 3, maxLength: 254, description: 'e-mail address' });
const Username = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{1,63}$', description: '2-64 letters, digits, `.`, `_`, `-`' });
const Password = Secret({ minLength: 1, maxLength: 512 });

const MeView = Type.Object({
  ...UserView.properties,
  principal_type: Type.Union([Type.Literal('user'), Type.Literal('api_key')]),
  effective_permissions: Type.Array(Type.String()),
  deployments: Type.Array(Type.Object({ deployment: Type.String(), access_level: Type.String() })),
});

/** The user behind a principal (the key's owner for an API key); system principals have none. */
export function ownUser(identity: IdentityService, principal: Principal): UserRecord {
  const user = principal.user_id === null ? undefined : identity.users.get(principal.user_id);
  if (!user) throw errors.notFound('this principal is not a user account', 'NO_USER');
  return user;
}

export function checkPassword(identity: IdentityService, password: string, username: string, field: string): void {
  const problem = identity.users.passwordProblem(password, username);
  if (problem) throw errors.badRequest(`${field}: ${problem}`, 'WEAK_PASSWORD', { field });
}

const activeAdmins = (identity: IdentityService) => identity.users.list().filter((u) => u.role === 'admin' && u.is_active);

export function registerUserRoutes(ctx: PluginContext, identity: IdentityService): void {
  const find = (id: number): UserRecord => {
    const user = identity.users.get(id);
    if (!user) throw errors.notFound(`user ${id} not found`);
    return user;
  };
  /** A non-admin holding users:write still may not touch an admin account. */
  const assertMayManage = (principal: Principal, target: UserRecord) => {
    if (!principal.isAdmin && target.role === 'admin') throw errors.forbidden('only an admin may change an admin account', 'ADMIN_ONLY');
  };

  ctx.route({
    method: 'GET',
    path: '/users/me',
    permission: 'authenticated',
    tag: 'users',
    operationId: 'users.me',
    tenancy: 'own',
    summary: 'The current user, with effective permissions and deployment access',
    response: MeView,
    handler: (req) => {
      const user = ownUser(identity, req.principal);
      return {
        ...user,
        principal_type: req.principal.type as 'user' | 'api_key',
        effective_permissions: req.principal.permissions,
        deployments: Object.entries(req.principal.deployments).map(([deployment, access_level]) => ({ deployment, access_level })),
      };
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/users/me',
    permission: 'authenticated',
    tag: 'users',
    operationId: 'users.updateMe',
    tenancy: 'own',
    summary: 'Update your own profile (e-mail)',
    body: Type.Object({ email: Email }),
    response: UserView,
    handler: async (req) => identity.users.update(ownUser(identity, req.principal).id, { email: req.body.email }),
  });

  ctx.route({
    method: 'PUT',
    path: '/users/me/password',
    permission: 'authenticated',
    tag: 'users',
    operationId: 'users.changePassword',
    tenancy: 'own',
    summary: 'Change your own password; every other session of yours stops working',
    description:
      'The current password is required. The answer carries a fresh token for the session that made the change; all tokens issued before are invalid from now on. API keys are not affected.',
    body: Type.Object({ current_password: Password, new_password: Secret({ minLength: 1, maxLength: 512 }) }),
    response: Type.Object({ token: Type.String() }),
    handler: async (req) => {
      const user = ownUser(identity, req.principal);
      if (!(await identity.users.verifyPassword(user.id, req.body.current_password))) {
        throw errors.badRequest('body.current_password: the current password is wrong', 'WRONG_PASSWORD', { field: 'current_password' });
      }
      if (req.body.new_password === req.body.current_password) {
        throw errors.badRequest('body.new_password: must differ from the current password', 'WEAK_PASSWORD', { field: 'new_password' });
      }
      checkPassword(identity, req.body.new_password, user.username, 'body.new_password');
      await identity.users.setPassword(user.id, req.body.new_password);
      return reply.ok({ token: await identity.users.issueToken(user.id) }, 'password changed; other sessions were signed out');
    },
  });

  ctx.route({
    method: 'GET',
    path: '/users',
    permission: 'users:read',
    tag: 'users',
    operationId: 'users.list',
    summary: 'List users (admin only)',
    query: Type.Object({
      role: Type.Optional(RoleSchema),
      is_active: Type.Optional(Type.Boolean()),
    }),
    response: Type.Array(UserView),
    handler: (req) =>
      identity.users
        .list()
        .filter(
          (u) => (req.query.role === undefined || u.role === req.query.role) && (req.query.is_active === undefined || u.is_active === req.query.is_active),
        ),
  });

  ctx.route({
    method: 'GET',
    path: '/users/:id',
    permission: 'users:read',
    tag: 'users',
    operationId: 'users.get',
    summary: 'User details',
    params: UserIdParams,
    response: UserView,
    handler: (req) => find(req.params.id),
  });

  ctx.route({
    method: 'POST',
    path: '/users',
    permission: 'users:write',
    tag: 'users',
    operationId: 'users.create',
    status: 201,
    creates: 'id',
    summary: 'Create a user',
    description: 'The password must pass the strength check. A non-admin cannot create a user with a role or permissions it does not hold.',
    body: Type.Object({
      username: Username,
      email: Email,
      password: Password,
      role: RoleSchema,
      permissions: Type.Optional(Permissions),
      scope: Type.Optional(ScopeSchema),
      is_active: Type.Optional(Type.Boolean({ default: true })),
    }),
    response: UserView,
    handler: async (req) => {
      const b = req.body;
      assertRoleWithin(req.principal, b.role);
      assertScopeWithin(req.principal, b.role === 'admin' ? 'global' : (b.scope ?? 'deployments'));
      assertPermissionsWithin(req.principal, identity, b.role, b.permissions ?? []);
      checkPassword(identity, b.password, b.username, 'body.password');
      const user = await identity.users.create({
        username: b.username,
        email: b.email,
        password: b.password,
        role: b.role,
        permissions: b.permissions ?? [],
        scope: b.scope,
        is_active: b.is_active ?? true,
      });
      return reply.created(user, `user '${user.username}' created`);
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/users/:id',
    permission: 'users:write',
    tag: 'users',
    operationId: 'users.update',
    summary: 'Update a user (e-mail, role, permissions, active flag, password reset)',
    description:
      'Refused with 409: demoting or deactivating yourself (`CANNOT_CHANGE_SELF`) or the last active admin (`LAST_ADMIN`). A password reset signs the user out everywhere.',
    params: UserIdParams,
    body: Type.Object({
      email: Type.Optional(Email),
      role: Type.Optional(RoleSchema),
      permissions: Type.Optional(Permissions),
      scope: Type.Optional(ScopeSchema),
      is_active: Type.Optional(Type.Boolean()),
      password: Type.Optional(Password),
    }),
    response: UserView,
    handler: async (req) => {
      const target = find(req.params.id);
      const b = req.body;
      assertMayManage(req.principal, target);
      if (b.role !== undefined) assertRoleWithin(req.principal, b.role);
      if (b.scope !== undefined || b.role === 'admin') assertScopeWithin(req.principal, b.role === 'admin' ? 'global' : b.scope!);
      if (b.role !== undefined || b.permissions !== undefined) {
        assertPermissionsWithin(req.principal, identity, b.role ?? target.role, b.permissions ?? target.permissions);
      }
      const demoted = (b.role !== undefined && b.role !== target.role) || (b.is_active === false && target.is_active);
      if (demoted && target.role === 'admin' && target.is_active && activeAdmins(identity).length <= 1) {
        throw errors.conflict(`'${target.username}' is the last active admin`, 'LAST_ADMIN');
      }
      if (demoted && req.principal.user_id === target.id) {
        throw errors.conflict('you cannot change your own role or deactivate yourself', 'CANNOT_CHANGE_SELF');
      }
      if (b.password !== undefined) {
        checkPassword(identity, b.password, target.username, 'body.password');
        await identity.users.setPassword(target.id, b.password);
      }
      const { password: _p, ...patch } = b;
      return Object.keys(patch).length > 0 ? identity.users.update(target.id, patch) : find(target.id);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/users/:id',
    permission: 'users:write',
    tag: 'users',
    operationId: 'users.delete',
    summary: 'Delete a user with its API keys and deployment grants',
    description: 'Refused with 409 for yourself (`CANNOT_DELETE_SELF`) and for the last active admin (`LAST_ADMIN`).',
    params: UserIdParams,
    handler: async (req) => {
      const target = find(req.params.id);
      assertMayManage(req.principal, target);
      if (target.role === 'admin' && target.is_active && activeAdmins(identity).length <= 1) {
        throw errors.conflict(`'${target.username}' is the last active admin`, 'LAST_ADMIN');
      }
      if (req.principal.user_id === target.id) throw errors.conflict('you cannot delete yourself', 'CANNOT_DELETE_SELF');
      await identity.users.delete(target.id);
      return reply.ok(null, `user '${target.username}' deleted`);
    },
  });
}
