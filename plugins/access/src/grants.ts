/** Per-deployment access: `/api/users/:id/deployments` and `GET /api/deployments/:name/users`. */
import { deploymentName, errors, RecordId, reply, Type, type AccessLevel, type PluginContext, type Principal, type Role } from '@agent/sdk';
import type { IdentityService } from './api.js';
import { type DeploymentsService } from '@agent/plugin-deployments/api';
import { assertLevelWithin } from './rules.js';
import { GrantView, LevelSchema, RoleSchema, UserIdParams } from './schemas.js';

const GrantParams = Type.Object({ id: RecordId('user id'), name: deploymentName() });

export function registerGrantRoutes(ctx: PluginContext, identity: IdentityService, deployments: () => DeploymentsService | undefined): void {
  const userOr404 = (id: number) => {
    const user = identity.users.get(id);
    if (!user) throw errors.notFound(`user ${id} not found`);
    return user;
  };
  /** Grants on a deployment are handed out by who administers it; the same 404 as elsewhere otherwise. */
  const assertAdministers = (principal: Principal, deployment: string) => {
    const level = principal.deploymentLevel(deployment);
    if (!level) throw errors.notFound(`deployment '${deployment}' not found`);
    if (level !== 'admin') throw errors.forbidden(`'admin' access to deployment '${deployment}' required`);
  };
  const assertExists = (deployment: string) => {
    const service = deployments();
    if (service && !service.get(deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
  };

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
      userOr404(req.params.id);
      return identity.grants.list({ user_id: req.params.id }).filter((g) => req.principal.canAccessDeployment(g.deployment));
    },
  });

  ctx.route({
    method: 'POST',
    path: '/users/:id/deployments',
    permission: 'users:write',
    tag: 'users',
    operationId: 'users.deploymentsAssign',
    status: 201,
    summary: 'Give a user access to a deployment',
    description:
      'A non-admin needs `admin` access to the deployment and cannot grant a level above its own. 409 when the user already has a grant on it (change it with PUT).',
    params: UserIdParams,
    body: Type.Object({ deployment_name: deploymentName(), access_level: LevelSchema }),
    // Who has access to a deployment belongs to the deployment: its admins decide, scoped or not.
    deployment: (req) => req.body.deployment_name,
    deploymentLevel: 'admin',
    response: GrantView,
    handler: async (req) => {
      const user = userOr404(req.params.id);
      const { deployment_name: name, access_level: level } = req.body;
      assertAdministers(req.principal, name);
      assertLevelWithin(req.principal, name, level);
      assertExists(name);
      if (identity.grants.list({ user_id: user.id, deployment: name }).length > 0) {
        throw errors.conflict(`user '${user.username}' already has access to '${name}'`, 'GRANT_EXISTS');
      }
      return reply.created(await identity.grants.set(user.id, name, level), `'${user.username}' has ${level} access to '${name}'`);
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/users/:id/deployments/:name',
    permission: 'users:write',
    tag: 'users',
    operationId: 'users.deploymentsUpdate',
    summary: 'Change the access level of a user on a deployment',
    params: GrantParams,
    deployment: 'name',
    deploymentLevel: 'admin',
    body: Type.Object({ access_level: LevelSchema }),
    response: GrantView,
    handler: async (req) => {
      const user = userOr404(req.params.id);
      if (identity.grants.list({ user_id: user.id, deployment: req.params.name }).length === 0) {
        throw errors.notFound(`user '${user.username}' has no access to '${req.params.name}'`);
      }
      assertLevelWithin(req.principal, req.params.name, req.body.access_level);
      return identity.grants.set(user.id, req.params.name, req.body.access_level);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/users/:id/deployments/:name',
    permission: 'users:write',
    tag: 'users',
    operationId: 'users.deploymentsRemove',
    summary: 'Remove the access of a user to a deployment',
    params: GrantParams,
    deployment: 'name',
    deploymentLevel: 'admin',
    handler: async (req) => {
      const user = userOr404(req.params.id);
      if (!(await identity.grants.remove(user.id, req.params.name))) {
        throw errors.notFound(`user '${user.username}' has no access to '${req.params.name}'`);
      }
      return reply.ok(null, `access of '${user.username}' to '${req.params.name}' removed`);
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
    response: Type.Array(
      Type.Object({
        user_id: Type.Integer(),
        username: Type.String(),
        role: RoleSchema,
        is_active: Type.Boolean(),
        access_level: LevelSchema,
        source: Type.Union([Type.Literal('role'), Type.Literal('grant')]),
      }),
    ),
    handler: (req) => {
      assertExists(req.params.name);
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
