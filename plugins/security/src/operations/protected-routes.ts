/**
 * Protected routes (basic authentication in the proxy) as operations. A route belongs to a deployment: the caller
 * must reach it (an unknown id and another tenant's look the same: 404), and moving a route needs write on the target.
 */
import bcrypt from 'bcryptjs';
import { defineOperation, errors, RecordId, Type, type Principal } from '@agent/sdk';
import { ProtectedCreate, ProtectedUpdate } from '../schemas.js';
import { assertDeployment, type SecurityRuntime } from '../runtime.js';
import type { ProtectedRoute, SecurityState } from '../state.js';
import { checkUrlPath } from '../validate.js';

const USERNAME = /^[A-Za-z0-9._@-]{1,64}$/;
const BCRYPT_COST = 9;

/** `user:password` → the user and a bcrypt hash of the password (never stored in clear). */
async function credentials(value: string): Promise<{ username: string; password_hash: string }> {
  const i = value.indexOf(':');
  const user = i > 0 ? value.slice(0, i) : '';
  const password = i > 0 ? value.slice(i + 1) : '';
  // eslint-disable-next-line no-control-regex
  if (!USERNAME.test(user) || password.length < 1 || password.length > 128 || /[\u0000-\u001f\u007f]/.test(password)) {
    throw errors.badRequest(
      "credentials: expected '<user>:<password>' (user: letters, digits, . _ @ -; password: 1-128 printable characters)",
      'VALIDATION_FAILED',
      { field: 'credentials' },
    );
  }
  return { username: user, password_hash: await bcrypt.hash(password, BCRYPT_COST) };
}

const conflict = (s: SecurityState, deployment: string, path: string, id: number | null) => {
  const other = s.protected.find((p) => p.deployment === deployment && p.path === path && p.id !== id);
  if (other) throw errors.conflict(`path '${path}' of '${deployment}' is already protected (route ${other.id})`, 'PROTECTED_ROUTE_EXISTS');
};

/** A route the caller reaches, else 404 (another tenant's route looks like an unknown id). */
export function routeOr404(s: SecurityState, principal: Principal, id: number): ProtectedRoute {
  const r = s.protected.find((p) => p.id === id);
  if (!r || !principal.canAccessDeployment(r.deployment)) throw errors.notFound(`protected route ${id} not found`);
  return r;
}

export function protectedRouteOperations(rt: SecurityRuntime) {
  const state = () => rt.rules.state;
  const change = (type: 'create' | 'update' | 'delete', id: string, deployment?: string) => ({
    summary: `${type} protected route ${id}`,
    changes: [{ type: 'protected-route', id, actions: [type], after: deployment && { deployment } }],
  });

  const add = defineOperation({
    name: 'security.addProtectedRoute',
    input: ProtectedCreate,
    resource: (i) => ({ type: 'protected-route', id: `${i.deployment}${i.path}` }),
    prepare: async (input) => {
      const path = checkUrlPath(input.path, 'path');
      assertDeployment(rt, input.deployment);
      conflict(state(), input.deployment, path, null);
      const creds = await credentials(input.credentials);
      return {
        value: { path, method: input.method, creds, deployment: input.deployment, enabled: input.enabled ?? true },
        preview: change('create', path, input.deployment),
      };
    },
    apply: async (value) => {
      const { result } = await rt.rules.proxy.mutate((draft) => {
        conflict(draft, value.deployment, value.path, null);
        const now = new Date().toISOString();
        const { path, method, creds, deployment, enabled } = value;
        const route: ProtectedRoute = {
          id: draft.next_id++,
          path,
          method,
          auth_type: 'basic',
          ...creds,
          deployment,
          enabled,
          created_at: now,
          updated_at: now,
        };
        draft.protected.push(route);
        return route;
      });
      return result;
    },
  });

  const update = defineOperation({
    name: 'security.updateProtectedRoute',
    input: Type.Object({ id: RecordId(), changes: ProtectedUpdate }),
    resource: (i) => ({ type: 'protected-route', id: String(i.id) }),
    prepare: async ({ id, changes }, { principal }) => {
      const existing = routeOr404(state(), principal, id);
      const path = changes.path !== undefined ? checkUrlPath(changes.path, 'path') : existing.path;
      const deployment = changes.deployment ?? existing.deployment;
      if (changes.deployment !== undefined) {
        // Moving a route needs write on the target too: unseen → 404 as for any deployment, seen but read → 403.
        if (!principal.deploymentLevel(deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
        if (!principal.canAccessDeployment(deployment, 'write')) throw errors.forbidden(`'write' access to deployment '${deployment}' required`);
        assertDeployment(rt, deployment);
      }
      conflict(state(), deployment, path, id);
      const creds = changes.credentials !== undefined ? await credentials(changes.credentials) : {};
      const value = { id, fields: { path, deployment, ...creds }, method: changes.method, enabled: changes.enabled };
      return { value, preview: change('update', String(id), deployment) };
    },
    apply: async ({ id, fields, method, enabled }) => {
      const { result } = await rt.rules.proxy.mutate((draft) => {
        const r = draft.protected.find((p) => p.id === id);
        if (!r) throw errors.notFound(`protected route ${id} not found`);
        conflict(draft, fields.deployment, fields.path, id);
        Object.assign(r, fields, { updated_at: new Date().toISOString() });
        if (method !== undefined) r.method = method;
        if (enabled !== undefined) r.enabled = enabled;
        return r;
      });
      return result;
    },
  });

  const remove = defineOperation({
    name: 'security.removeProtectedRoute',
    input: Type.Object({ id: RecordId() }),
    resource: (i) => ({ type: 'protected-route', id: String(i.id) }),
    prepare: ({ id }, { principal }) => {
      routeOr404(state(), principal, id);
      return { value: id, preview: change('delete', String(id)) };
    },
    apply: async (id) => {
      await rt.rules.proxy.mutate((draft) => {
        draft.protected = draft.protected.filter((p) => p.id !== id);
      });
      return id;
    },
  });

  return { add, update, remove };
}
