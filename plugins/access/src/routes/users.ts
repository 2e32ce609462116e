/** `/api/users/me` (your own account) and `/api/users` (accounts): reads, and the changes as operations. */
import { operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import type { IdentityService } from '../api.js';
import { findUser, ownUser, type UserOperations } from '../operations/users.js';
import { ChangePassword, CreateUser, MeView, RoleSchema, UpdateMe, UpdateUser, UserIdParams, UserView } from '../schemas.js';

export function userRoutes(ctx: PluginContext, identity: IdentityService, ops: UserOperations): void {
  ownRoutes(ctx, identity, ops);
  readRoutes(ctx, identity);
  changeRoutes(ctx, ops);
}

function ownRoutes(ctx: PluginContext, identity: IdentityService, ops: UserOperations): void {
  ctx.route({
    method: 'GET',
    path: '/users/me',
    permission: 'authenticated',
    tag: 'users',
    operationId: 'users.me',
    tenancy: 'own',
    summary: 'The current user, with effective permissions and deployment access',
    // A principal that is no user account (system).
    errors: { 404: ['NO_USER'] },
    response: MeView,
    handler: (req) => ({
      ...ownUser(identity, req.principal),
      principal_type: req.principal.type as 'user' | 'api_key',
      effective_permissions: req.principal.permissions,
      deployments: Object.entries(req.principal.deployments).map(([deployment, access_level]) => ({ deployment, access_level })),
    }),
  });

  ctx.route(
    operationRoute(ops.updateMe, {
      method: 'PUT',
      path: '/users/me',
      permission: 'authenticated',
      tag: 'users',
      tenancy: 'own',
      summary: 'Update your own profile (e-mail)',
      body: UpdateMe,
      response: UserView,
      errors: { 400: ['INVALID_EMAIL'], 404: ['NO_USER'] },
      input: (req) => req.body,
    }),
  );

  ctx.route(
    operationRoute(ops.changePassword, {
      method: 'PUT',
      path: '/users/me/password',
      permission: 'authenticated',
      tag: 'users',
      tenancy: 'own',
      summary: 'Change your own password; every other session of yours stops working',
      description:
        'The current password is required. The answer carries a fresh token for the session that made the change; all tokens issued before are invalid from now on. API keys are not affected.',
      body: ChangePassword,
      response: Type.Object({ token: Type.String() }),
      errors: { 400: ['WEAK_PASSWORD', 'WRONG_PASSWORD'], 404: ['NO_USER'] },
      input: (req) => req.body,
      respond: (session) => reply.ok(session, 'password changed; other sessions were signed out'),
    }),
  );
}

function readRoutes(ctx: PluginContext, identity: IdentityService): void {
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
    handler: ({ query }) =>
      identity.users
        .list()
        .filter((u) => (query.role === undefined || u.role === query.role) && (query.is_active === undefined || u.is_active === query.is_active)),
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
    handler: (req) => findUser(identity, req.params.id),
  });
}

function changeRoutes(ctx: PluginContext, ops: UserOperations): void {
  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/users',
      permission: 'users:write',
      tag: 'users',
      status: 201,
      creates: 'id',
      summary: 'Create a user',
      description: 'The password must pass the strength check. A non-admin cannot create a user with a role or permissions it does not hold.',
      body: CreateUser,
      response: UserView,
      // The password's strength, the delegation rule (rules.ts), what the identity checks (identity.ts).
      errors: {
        400: ['INVALID_EMAIL', 'INVALID_PERMISSION', 'INVALID_USERNAME', 'WEAK_PASSWORD'],
        403: ['GRANT_EXCEEDS_OWN'],
        409: ['USER_EXISTS'],
      },
      input: (req) => req.body,
      respond: (user) => reply.created(user, `user '${user.username}' created`),
    }),
  );

  ctx.route(
    operationRoute(ops.update, {
      method: 'PUT',
      path: '/users/:id',
      permission: 'users:write',
      tag: 'users',
      summary: 'Update a user (e-mail, role, permissions, active flag, password reset)',
      description:
        'Refused with 409: demoting or deactivating yourself (`CANNOT_CHANGE_SELF`) or the last active admin (`LAST_ADMIN`). A password reset signs the user out everywhere.',
      params: UserIdParams,
      body: UpdateUser,
      response: UserView,
      errors: {
        400: ['INVALID_EMAIL', 'INVALID_PERMISSION', 'WEAK_PASSWORD'],
        403: ['ADMIN_ONLY', 'GRANT_EXCEEDS_OWN'],
        409: ['CANNOT_CHANGE_SELF', 'LAST_ADMIN'],
      },
      input: (req) => ({ ...req.body, id: req.params.id }),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/users/:id',
      permission: 'users:write',
      tag: 'users',
      summary: 'Delete a user with its API keys and deployment grants',
      description: 'Refused with 409 for yourself (`CANNOT_DELETE_SELF`) and for the last active admin (`LAST_ADMIN`).',
      params: UserIdParams,
      errors: { 403: ['ADMIN_ONLY'], 409: ['CANNOT_DELETE_SELF', 'LAST_ADMIN'] },
      input: (req) => req.params,
      respond: (user) => reply.ok(null, `user '${user.username}' deleted`),
    }),
  );
}
