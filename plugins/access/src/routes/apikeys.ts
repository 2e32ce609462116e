/** `/api/apikeys`: own keys for everyone, every key for an admin; reads, and the changes as operations. */
import { operationRoute, RecordId, reply, Type, type PluginContext } from '@agent/sdk';
import type { ApiKeyRecord, IdentityService } from '../api.js';
import { keyView, visibleKey, type ApiKeyOperations } from '../operations/apikeys.js';
import { ApiKeyView, CreateApiKey, CreatedApiKey, KeyParams } from '../schemas.js';

export function apiKeyRoutes(ctx: PluginContext, identity: IdentityService, ops: ApiKeyOperations): void {
  readRoutes(ctx, identity);
  changeRoutes(ctx, ops);
}

function readRoutes(ctx: PluginContext, identity: IdentityService): void {
  const view = (k: ApiKeyRecord) => keyView(identity, k);
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
    handler: ({ principal, query }) => {
      if (principal.isAdmin) return identity.apiKeys.list(query.user_id === undefined ? undefined : { user_id: query.user_id }).map(view);
      if (principal.user_id === null) return [];
      if (query.user_id !== undefined && query.user_id !== principal.user_id) return [];
      return identity.apiKeys.list({ user_id: principal.user_id }).map(view);
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
    handler: (req) => view(visibleKey(identity, req.principal, req.params.id)),
  });
}

function changeRoutes(ctx: PluginContext, ops: ApiKeyOperations): void {
  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/apikeys',
      permission: 'apikeys:write',
      tag: 'apikeys',
      tenancy: 'own',
      status: 201,
      creates: 'id',
      summary: 'Create an API key for yourself; the secret is in this answer only',
      description:
        "The key belongs to the caller (the owner of the calling key). Its effective right is the lower of its own and its owner's. A non-admin cannot give the key a role, permission or deployment it does not hold; a key created with a key never outlives it nor reaches beyond its deployments. `deployments` empty = every deployment of the owner.",
      body: CreateApiKey,
      response: CreatedApiKey,
      // The delegation rule (rules.ts); a caller that is no user account (system).
      errors: { 400: ['INVALID_PERMISSION'], 403: ['GRANT_EXCEEDS_OWN'], 404: ['NO_USER'] },
      input: (req) => req.body,
      respond: (created) => reply.created(created, 'store the key now: it is not shown again'),
    }),
  );

  ctx.route(
    operationRoute(ops.revoke, {
      method: 'POST',
      path: '/apikeys/:id/revoke',
      permission: 'apikeys:write',
      tag: 'apikeys',
      tenancy: 'own',
      summary: 'Revoke a key: it is kept (for the audit trail) but answers 401 from now on',
      params: KeyParams,
      response: ApiKeyView,
      input: (req) => req.params,
      respond: (revoked) => reply.ok(revoked, 'API key revoked'),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/apikeys/:id',
      permission: 'apikeys:write',
      tag: 'apikeys',
      tenancy: 'own',
      summary: 'Delete a key',
      params: KeyParams,
      input: (req) => req.params,
      respond: (k) => reply.ok(null, `API key '${k.name}' deleted`),
    }),
  );
}
