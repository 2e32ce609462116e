/** Per-deployment access: `/api/users/:id/deployments` (reads and operations) and `GET /api/deployments/:name/users`. */
import { deploymentName, operationRoute, reply, Type, type AccessLevel, type PluginContext, type Role } from '@agent/sdk';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import type { IdentityService } from '../api.js';
import { assertDeploymentExists, type GrantOperations } from '../operations/grants.js';
import { findUser } from '../operations/users.js';
import { AssignGrant, GrantParams, GrantView, LevelSchema, RoleSchema, UpdateGrant, UserIdParams } from '../schemas.js';

const DeploymentUser = Type.Object({
  user_id: Type.Integer(),
  username: Type.String(),
  role: RoleSchema,
  is_active: Type.Boolean(),
  access_level: LevelSchema,
  source: Type.Union([Type.Literal('role'), Type.Literal('grant')]),
});

export function grantRoutes(ctx: PluginContext, identity: IdentityService, deployments: () => DeploymentsService | undefined, ops: GrantOperations): void {
  readRoutes(ctx, identity, deployments);
  changeRoutes(ctx, ops);
}

function readRoutes(ctx: PluginContext, identity: IdentityService, deployments: () => DeploymentsService | undefined): void {
  ctx.route({
    method: 'GET',
    path: '/users/:id/deployments',
    permission: 'users:read',
    tag: 'users',
    operationId: 'users.deploymentsList',
    tenancy: 'filtered',
    summary: 'Deployments a user has access to (only those you may see yourself)',
    params: UserIdParams,
    response: Type.Array(GrantView),
    handler: (req) => {
      findUser(identity, req.params.id);
      return identity.grants.list({ user_id: req.params.id }).filter((g) => req.principal.canAccessDeployment(g.deployment));
    },
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/users',
    permission: 'users:read',
    tag: 'deployments',
    operationId: 'deployments.users',
    summary: 'Users with access to a deployment (admins through their role, others through grants)',
    params: Type.Object({ name: deploymentName() }),
    deployment: 'name',
    deploymentLevel: 'admin',
    response: Type.Array(DeploymentUser),
    handler: (req) => {
      assertDeploymentExists(deployments, req.params.name);
      const grants = new Map(identity.grants.list({ deployment: req.params.name }).map((g) => [g.user_id, g]));
      const out: { user_id: number; username: string; role: Role; is_active: boolean; access_level: AccessLevel; source: 'role' | 'grant' }[] = [];
      for (const u of identity.users.list()) {
        const base = { user_id: u.id, username: u.username, role: u.role, is_active: u.is_active };
        const g = grants.get(u.id);
        if (u.role === 'admin') out.push({ ...base, access_level: 'admin', source: 'role' });
        else if (g) out.push({ ...base, access_level: g.access_level, source: 'grant' });
      }
      return out;
    },
  });
}

function changeRoutes(ctx: PluginContext, ops: GrantOperations): void {
  ctx.route(
    operationRoute(ops.assign, {
      method: 'POST',
      path: '/users/:id/deployments',
      permission: 'users:write',
      tag: 'users',
      status: 201,
      summary: 'Give a user access to a deployment',
      description:
        'A non-admin needs `admin` access to the deployment and cannot grant a level above its own. 409 when the user already has a grant on it (change it with PUT).',
      params: UserIdParams,
      body: AssignGrant,
      // Who has access to a deployment belongs to the deployment: its admins decide, scoped or not.
      deployment: (req) => req.body.deployment_name,
      deploymentLevel: 'admin',
      response: GrantView,
      input: (req) => ({ ...req.body, id: req.params.id }),
      errors: { 403: ['GRANT_EXCEEDS_OWN'], 409: ['GRANT_EXISTS'] },
      respond: ({ user, grant }) => reply.created(grant, `'${user.username}' has ${grant.access_level} access to '${grant.deployment}'`),
    }),
  );

  ctx.route(
    operationRoute(ops.update, {
      method: 'PUT',
      path: '/users/:id/deployments/:name',
      permission: 'users:write',
      tag: 'users',
      summary: 'Change the access level of a user on a deployment',
      params: GrantParams,
      deployment: 'name',
      deploymentLevel: 'admin',
      body: UpdateGrant,
      response: GrantView,
      errors: { 403: ['GRANT_EXCEEDS_OWN'] },
      input: (req) => ({ ...req.body, ...req.params }),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/users/:id/deployments/:name',
      permission: 'users:write',
      tag: 'users',
      summary: 'Remove the access of a user to a deployment',
      params: GrantParams,
      deployment: 'name',
      deploymentLevel: 'admin',
      input: (req) => req.params,
      respond: ({ user, deployment }) => reply.ok(null, `access of '${user.username}' to '${deployment}' removed`),
    }),
  );
}
