/**
 * Changes of user accounts as operations: your own profile and password, and the create, update and delete of
 * accounts. `prepare` runs every rule of the request (no escalation, only admins touch admin accounts, the last
 * admin, yourself, password strength, the current password) and plans the change; `apply` makes it through the
 * identity, which also checks what only the store knows for certain (a name taken meanwhile) and announces whose
 * rights changed (`principals.changed`), so open connections are checked again at once.
 */
import { defineOperation, errors, type Principal } from '@agent/sdk';
import type { IdentityService, UserRecord } from '../api.js';
import { assertPermissionsWithin, assertRoleWithin, assertScopeWithin } from '../rules.js';
import { ChangePassword, CreateUser, UpdateMe, UpdateUserInput, UserIdParams } from '../schemas.js';

/** The user behind a principal (the key's owner for an API key); system principals have none. */
export function ownUser(identity: IdentityService, principal: Principal): UserRecord {
  const user = principal.user_id === null ? undefined : identity.users.get(principal.user_id);
  if (!user) throw errors.notFound('this principal is not a user account', 'NO_USER');
  return user;
}

export function findUser(identity: IdentityService, id: number): UserRecord {
  const user = identity.users.get(id);
  if (!user) throw errors.notFound(`user ${id} not found`);
  return user;
}

function checkPassword(identity: IdentityService, password: string, username: string, field: string): void {
  const problem = identity.users.passwordProblem(password, username);
  if (problem) throw errors.badRequest(`${field}: ${problem}`, 'WEAK_PASSWORD', { field });
}

/** A non-admin holding users:write still may not touch an admin account. */
function assertMayManage(principal: Principal, target: UserRecord): void {
  if (!principal.isAdmin && target.role === 'admin') throw errors.forbidden('only an admin may change an admin account', 'ADMIN_ONLY');
}

function assertNotLastAdmin(identity: IdentityService, target: UserRecord): void {
  const activeAdmins = identity.users.list().filter((u) => u.role === 'admin' && u.is_active);
  if (target.role === 'admin' && target.is_active && activeAdmins.length <= 1)
    throw errors.conflict(`'${target.username}' is the last active admin`, 'LAST_ADMIN');
}

/** What a plan of a change to an account shows: the account without secrets. */
const account = (u: Pick<UserRecord, 'username' | 'email' | 'role' | 'permissions' | 'scope' | 'is_active'>) => ({
  username: u.username,
  email: u.email,
  role: u.role,
  permissions: u.permissions,
  scope: u.scope,
  is_active: u.is_active,
});

const aboutUser = ({ id }: { id: number }) => ({ type: 'user', id: String(id) });

export type UserOperations = ReturnType<typeof userOperations>;

export function userOperations(identity: IdentityService) {
  const updateMe = defineOperation({
    name: 'users.updateMe',
    input: UpdateMe,
    // The caller's own account: the input names none.
    resource: () => ({ type: 'user', id: 'me' }),
    prepare: ({ email }, { principal }) => {
      const user = ownUser(identity, principal);
      return {
        value: { id: user.id, email },
        preview: { changes: [{ type: 'user', id: String(user.id), actions: ['update'], before: { email: user.email }, after: { email } }] },
      };
    },
    apply: ({ id, email }) => identity.users.update(id, { email }),
  });

  const changePassword = defineOperation({
    name: 'users.changePassword',
    input: ChangePassword,
    resource: () => ({ type: 'user', id: 'me' }),
    prepare: async ({ current_password, new_password }, { principal }) => {
      const user = ownUser(identity, principal);
      if (!(await identity.users.verifyPassword(user.id, current_password))) {
        throw errors.badRequest('body.current_password: the current password is wrong', 'WRONG_PASSWORD', { field: 'current_password' });
      }
      if (new_password === current_password) {
        throw errors.badRequest('body.new_password: must differ from the current password', 'WEAK_PASSWORD', { field: 'new_password' });
      }
      checkPassword(identity, new_password, user.username, 'body.new_password');
      return {
        value: { id: user.id, password: new_password },
        preview: { summary: `new password for '${user.username}'; its other sessions are signed out`, changes: [passwordChange(user)] },
      };
    },
    apply: async ({ id, password }) => {
      await identity.users.setPassword(id, password);
      return { token: await identity.users.issueToken(id) };
    },
  });

  const create = defineOperation({
    name: 'users.create',
    input: CreateUser,
    resource: (input) => ({ type: 'user', id: input.username }),
    prepare: (input, { principal }) => {
      assertRoleWithin(principal, input.role);
      assertScopeWithin(principal, input.role === 'admin' ? 'global' : (input.scope ?? 'deployments'));
      assertPermissionsWithin(principal, identity, input.role, input.permissions ?? []);
      checkPassword(identity, input.password, input.username, 'body.password');
      const value = { ...input, permissions: input.permissions ?? [], is_active: input.is_active ?? true };
      const scope = input.role === 'admin' ? 'global' : (input.scope ?? 'deployments');
      return { value, preview: { changes: [{ type: 'user', id: input.username, actions: ['create'], after: account({ ...value, scope }) }] } };
    },
    apply: (input) => identity.users.create(input),
  });

  const update = defineOperation({
    name: 'users.update',
    input: UpdateUserInput,
    resource: aboutUser,
    prepare: (input, { principal }) => {
      const { id, password, ...patch } = input;
      const target = findUser(identity, id);
      assertMayManage(principal, target);
      if (patch.role !== undefined) assertRoleWithin(principal, patch.role);
      if (patch.scope !== undefined || patch.role === 'admin') assertScopeWithin(principal, patch.role === 'admin' ? 'global' : patch.scope!);
      if (patch.role !== undefined || patch.permissions !== undefined) {
        assertPermissionsWithin(principal, identity, patch.role ?? target.role, patch.permissions ?? target.permissions);
      }
      const demoted = (patch.role !== undefined && patch.role !== target.role) || (patch.is_active === false && target.is_active);
      if (demoted) assertNotLastAdmin(identity, target);
      if (demoted && principal.user_id === target.id) throw errors.conflict('you cannot change your own role or deactivate yourself', 'CANNOT_CHANGE_SELF');
      if (password !== undefined) checkPassword(identity, password, target.username, 'body.password');
      const changes = [{ type: 'user', id: String(id), actions: ['update' as const], before: account(target), after: account({ ...target, ...patch }) }];
      return { value: { id, password, patch }, preview: { changes: password === undefined ? changes : [...changes, passwordChange(target)] } };
    },
    apply: async ({ id, password, patch }) => {
      if (password !== undefined) await identity.users.setPassword(id, password);
      return Object.keys(patch).length > 0 ? identity.users.update(id, patch) : findUser(identity, id);
    },
  });

  const remove = defineOperation({
    name: 'users.delete',
    input: UserIdParams,
    resource: aboutUser,
    prepare: ({ id }, { principal }) => {
      const target = findUser(identity, id);
      assertMayManage(principal, target);
      assertNotLastAdmin(identity, target);
      if (principal.user_id === target.id) throw errors.conflict('you cannot delete yourself', 'CANNOT_DELETE_SELF');
      const keys = identity.apiKeys.list({ user_id: id }).length;
      const grants = identity.grants.list({ user_id: id }).length;
      return {
        value: target,
        preview: {
          summary: `delete user '${target.username}' with its ${keys} API key(s) and ${grants} deployment grant(s)`,
          changes: [{ type: 'user', id: String(id), actions: ['delete'], before: account(target) }],
        },
      };
    },
    apply: async (target) => {
      await identity.users.delete(target.id);
      return target;
    },
  });

  return { updateMe, changePassword, create, update, remove };
}

/** A password change as a plan shows it: that it happens, never the password. */
const passwordChange = (user: UserRecord) => ({ type: 'user-password', id: String(user.id), actions: ['update' as const], sensitive: true });
