/**
 * API keys as operations: create (for yourself), revoke, delete. `prepare` checks the delegation rules (a key never
 * gets a role, permission or deployment its creator lacks; one created with a key stays inside it) and that the key
 * is the caller's (someone else's is 404); `apply` changes the keys through the identity, which announces the
 * owner (`principals.changed`): a revoked or deleted key's open connections end at once.
 */
import { defineOperation, errors, type Principal, type Role } from '@agent/sdk';
import type { ApiKeyRecord, IdentityService } from '../api.js';
import { assertPermissionsWithin, assertRoleWithin, ROLE_RANK } from '../rules.js';
import { CreateApiKey, KeyParams } from '../schemas.js';
import { ownUser } from './users.js';

/** A key as answered: with its owner's name and its status, never its hash. */
export function keyView(identity: IdentityService, k: ApiKeyRecord) {
  return {
    ...k,
    username: identity.users.get(k.user_id)?.username ?? null,
    status: !k.active ? ('revoked' as const) : k.expires_at !== null && Date.parse(k.expires_at) <= Date.now() ? ('expired' as const) : ('active' as const),
  };
}

/** Someone else's key is reported as missing, so ids of other users' keys cannot be probed. */
export function visibleKey(identity: IdentityService, principal: Principal, id: number): ApiKeyRecord {
  const k = identity.apiKeys.get(id);
  if (!k || (!principal.isAdmin && k.user_id !== principal.user_id)) throw errors.notFound(`API key ${id} not found`);
  return k;
}

/** What a plan of a key's change shows: the key without its hash or usage stamps. */
const keyFields = (k: Pick<ApiKeyRecord, 'name' | 'role' | 'permissions' | 'deployments' | 'active'>) => ({
  name: k.name,
  role: k.role,
  permissions: k.permissions,
  deployments: k.deployments,
  active: k.active,
});

const aboutKey = ({ id }: { id: number }) => ({ type: 'apikey', id: String(id) });

export type ApiKeyOperations = ReturnType<typeof apiKeyOperations>;

export function apiKeyOperations(identity: IdentityService) {
  const create = defineOperation({
    name: 'apikeys.create',
    input: CreateApiKey,
    resource: (input) => ({ type: 'apikey', id: input.name }),
    prepare: (input, { principal: p }) => {
      const owner = ownUser(identity, p);
      const role: Role = input.role ?? (ROLE_RANK[p.role] <= ROLE_RANK[owner.role] ? p.role : owner.role);
      assertRoleWithin(p, role);
      assertPermissionsWithin(p, identity, role, input.permissions ?? []);
      let deployments = input.deployments ?? [];
      for (const name of deployments) {
        if (!p.canAccessDeployment(name)) throw errors.forbidden(`you have no access to deployment '${name}'`, 'GRANT_EXCEEDS_OWN');
      }
      let expiresIn = input.expires_in;
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
      const value = {
        user_id: owner.id,
        name: input.name,
        description: input.description ?? '',
        role,
        permissions: input.permissions ?? [],
        deployments,
        ...(expiresIn !== undefined ? { expires_in: expiresIn } : {}),
      };
      return { value, preview: { changes: [{ type: 'apikey', id: input.name, actions: ['create'], after: keyFields({ ...value, active: true }) }] } };
    },
    apply: async (input) => {
      const { record, key } = await identity.apiKeys.create(input);
      return { ...keyView(identity, record), key };
    },
  });

  const revoke = defineOperation({
    name: 'apikeys.revoke',
    input: KeyParams,
    resource: aboutKey,
    prepare: ({ id }, { principal }) => {
      const k = visibleKey(identity, principal, id);
      return {
        value: k.id,
        preview: { changes: [{ type: 'apikey', id: String(k.id), actions: ['update'], before: keyFields(k), after: keyFields({ ...k, active: false }) }] },
      };
    },
    apply: async (id) => keyView(identity, await identity.apiKeys.revoke(id)),
  });

  const remove = defineOperation({
    name: 'apikeys.delete',
    input: KeyParams,
    resource: aboutKey,
    prepare: ({ id }, { principal }) => {
      const k = visibleKey(identity, principal, id);
      return { value: k, preview: { changes: [{ type: 'apikey', id: String(k.id), actions: ['delete'], before: keyFields(k) }] } };
    },
    apply: async (k) => {
      await identity.apiKeys.delete(k.id);
      return k;
    },
  });

  return { create, revoke, remove };
}
