/** `/api/apikeys`: own keys for everyone, every key for an admin. */
import { DEPLOYMENT_NAME, errors, RecordId, reply, Type, type PluginContext, type Principal, type Role } from '@agent/sdk';
import type { ApiKeyRecord, IdentityService } from './api.js';
import { assertPermissionsWithin, assertRoleWithin, ROLE_RANK } from './rules.js';
import { ApiKeyView, Permissions, RoleSchema } from './schemas.js';
import { ownUser } from './users.js';

const KeyParams = Type.Object({ id: RecordId('API key id') });

export function registerApiKeyRoutes(ctx: PluginContext, identity: IdentityService): void {
  const view = (k: ApiKeyRecord) => ({
    ...k,
    username: identity.users.get(k.user_id)?.username ?? null,
    status: !k.active ? ('revoked' as const) : k.expires_at !== null && Date.parse(k.expires_at) <= Date.now() ? ('expired' as const) : ('active' as const),
  });
  /** Someone else's key is reported as missing, so ids of other users' keys cannot be probed. */
  const visible = (principal: Principal, id: number): ApiKeyRecord => {
    const k = identity.apiKeys.get(id);
    if (!k || (!principal.isAdmin && k.user_id !== principal.user_id)) throw errors.notFound(`API key ${id} not found`);
    return k;
  };

  ctx.route({
    method: 'GET',
    path: '/apikeys',
    permission: 'apikeys:read',
    tag: 'apikeys',
    operationId: 'apikeys.list',
    tenancy: 'own',
    summary: 'List API keys: your own, or every key for an admin',
    query: Type.Object({ user_id: Type.Optional(RecordId('admins: only the keys of this user')) }),
    response: Type.Array(ApiKeyView),
    handler: (req) => {
      if (req.principal.isAdmin) return identity.apiKeys.list(req.query.user_id === undefined ? undefined : { user_id: req.query.user_id }).map(view);
      if (req.principal.user_id === null) return [];
      if (req.query.user_id !== undefined && req.query.user_id !== req.principal.user_id) return [];
      return identity.apiKeys.list({ user_id: req.principal.user_id }).map(view);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/apikeys/:id',
    permission: 'apikeys:read',
    tag: 'apikeys',
    operationId: 'apikeys.get',
    tenancy: 'own',
    summary: 'API key details (never the secret)',
    params: KeyParams,
    response: ApiKeyView,
    handler: (req) => view(visible(req.principal, req.params.id)),
  });

  ctx.route({
    method: 'POST',
    path: '/apikeys',
    permission: 'apikeys:write',
    tag: 'apikeys',
    operationId: 'apikeys.create',
    tenancy: 'own',
    status: 201,
    creates: 'id',
    summary: 'Create an API key for yourself; the secret is in this answer only',
    description:
      "The key belongs to the caller (the owner of the calling key). Its effective right is the lower of its own and its owner's. A non-admin cannot give the key a role, permission or deployment it does not hold; a key created with a key never outlives it nor reaches beyond its deployments. `deployments` empty = every deployment of the owner.",
    body: Type.Object({
      name: Type.String({ minLength: 1, maxLength: 100 }),
      description: Type.Optional(Type.String({ maxLength: 500 })),
      role: Type.Optional(RoleSchema),
      permissions: Type.Optional(Permissions),
      deployments: Type.Optional(Type.Array(Type.String({ pattern: DEPLOYMENT_NAME }), { maxItems: 500, uniqueItems: true })),
      expires_in: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 * 365 * 86400, description: 'seconds until the key expires' })),
    }),
    response: Type.Object({ ...ApiKeyView.properties, key: Type.String({ description: 'the secret, shown once' }) }),
    handler: async (req) => {
      const p = req.principal;
      const owner = ownUser(identity, p);
      const b = req.body;
      const role: Role = b.role ?? (ROLE_RANK[p.role] <= ROLE_RANK[owner.role] ? p.role : owner.role);
      assertRoleWithin(p, role);
      assertPermissionsWithin(p, identity, role, b.permissions ?? []);
      let deployments = b.deployments ?? [];
      for (const name of deployments) {
        if (!p.canAccessDeployment(name)) throw errors.forbidden(`you have no access to deployment '${name}'`, 'GRANT_EXCEEDS_OWN');
      }
      let expiresIn = b.expires_in;
      if (p.type === 'api_key') {
        // A key minted by a key stays inside it: same deployments at most, and not longer-lived.
        const parent = identity.apiKeys.get(Number(p.id.slice('api_key:'.length)));
        if (parent && deployments.length === 0 && parent.deployments.length > 0) deployments = [...parent.deployments];
        if (parent?.expires_at) {
          const left = Math.floor((Date.parse(parent.expires_at) - Date.now()) / 1000);
          if (left < 1) throw errors.unauthorized('the calling key has expired', 'INVALID_TOKEN');
          expiresIn = Math.min(expiresIn ?? left, left);
        }
      }
      const { record, key } = await identity.apiKeys.create({
        user_id: owner.id,
        name: b.name,
        description: b.description ?? '',
        role,
        permissions: b.permissions ?? [],
        deployments,
        ...(expiresIn !== undefined ? { expires_in: expiresIn } : {}),
      });
      return reply.created({ ...view(record), key }, 'store the key now: it is not shown again');
    },
  });

  ctx.route({
    method: 'POST',
    path: '/apikeys/:id/revoke',
    permission: 'apikeys:write',
    tag: 'apikeys',
    operationId: 'apikeys.revoke',
    tenancy: 'own',
    summary: 'Revoke a key: it is kept (for the audit trail) but answers 401 from now on',
    params: KeyParams,
    response: ApiKeyView,
    handler: async (req) => reply.ok(view(await identity.apiKeys.revoke(visible(req.principal, req.params.id).id)), 'API key revoked'),
  });

  ctx.route({
    method: 'DELETE',
    path: '/apikeys/:id',
    permission: 'apikeys:write',
    tag: 'apikeys',
    operationId: 'apikeys.delete',
    tenancy: 'own',
    summary: 'Delete a key',
    params: KeyParams,
    handler: async (req) => {
      const k = visible(req.principal, req.params.id);
      await identity.apiKeys.delete(k.id);
      return reply.ok(null, `API key '${k.name}' deleted`);
    },
  });
}
