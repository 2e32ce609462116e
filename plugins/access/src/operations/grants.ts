/**
 * Per-deployment access of a user as operations: assign, change the level, remove. Who has access to a deployment
 * belongs to the deployment: its admins decide (the kernel checks that first, from the route's `deployment`), and
 * `prepare` checks again that the caller administers it, never grants above its own level, and that the
 * deployment and the grant are there. A change announces the user (`principals.changed`), so a lowered or removed
 * grant ends at once what needed it.
 */
import { defineOperation, errors, type Principal } from '@agent/sdk';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import type { IdentityService, UserRecord } from '../api.js';
import { assertLevelWithin } from '../rules.js';
import { AssignGrantInput, GrantParams, UpdateGrantInput } from '../schemas.js';
import { findUser } from './users.js';

/** With the deployments plugin, a grant needs an existing deployment; the same 404 as for one the caller cannot see. */
export function assertDeploymentExists(deployments: () => DeploymentsService | undefined, deployment: string): void {
  const service = deployments();
  if (service && !service.get(deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
}

/** Grants on a deployment are handed out by who administers it; the same 404 as elsewhere otherwise. */
function assertAdministers(principal: Principal, deployment: string): void {
  const level = principal.deploymentLevel(deployment);
  if (!level) throw errors.notFound(`deployment '${deployment}' not found`);
  if (level !== 'admin') throw errors.forbidden(`'admin' access to deployment '${deployment}' required`);
}

const aboutGrant = (user_id: number, deployment: string) => ({ type: 'grant', id: `${user_id}/${deployment}` });

export type GrantOperations = ReturnType<typeof grantOperations>;

export function grantOperations(identity: IdentityService, deployments: () => DeploymentsService | undefined) {
  const grantOf = (user: UserRecord, deployment: string) => identity.grants.list({ user_id: user.id, deployment })[0];
  const noGrant = (user: UserRecord, deployment: string) => errors.notFound(`user '${user.username}' has no access to '${deployment}'`);

  const assign = defineOperation({
    name: 'users.deploymentsAssign',
    input: AssignGrantInput,
    resource: (input) => aboutGrant(input.id, input.deployment_name),
    prepare: ({ id, deployment_name: name, access_level: level }, { principal }) => {
      const user = findUser(identity, id);
      assertAdministers(principal, name);
      assertLevelWithin(principal, name, level);
      assertDeploymentExists(deployments, name);
      if (grantOf(user, name)) throw errors.conflict(`user '${user.username}' already has access to '${name}'`, 'GRANT_EXISTS');
      return {
        value: { user, deployment: name, level },
        preview: { changes: [{ type: 'grant', id: `${user.id}/${name}`, actions: ['create'], after: { access_level: level } }] },
      };
    },
    apply: async ({ user, deployment, level }) => ({ user, grant: await identity.grants.set(user.id, deployment, level) }),
  });

  const update = defineOperation({
    name: 'users.deploymentsUpdate',
    input: UpdateGrantInput,
    resource: (input) => aboutGrant(input.id, input.name),
    prepare: ({ id, name, access_level: level }, { principal }) => {
      const user = findUser(identity, id);
      const grant = grantOf(user, name);
      if (!grant) throw noGrant(user, name);
      assertLevelWithin(principal, name, level);
      return {
        value: { user, deployment: name, level },
        preview: {
          changes: [
            { type: 'grant', id: `${user.id}/${name}`, actions: ['update'], before: { access_level: grant.access_level }, after: { access_level: level } },
          ],
        },
      };
    },
    apply: ({ user, deployment, level }) => identity.grants.set(user.id, deployment, level),
  });

  const remove = defineOperation({
    name: 'users.deploymentsRemove',
    input: GrantParams,
    resource: (input) => aboutGrant(input.id, input.name),
    prepare: ({ id, name }) => {
      const user = findUser(identity, id);
      const grant = grantOf(user, name);
      if (!grant) throw noGrant(user, name);
      return {
        value: { user, deployment: name },
        preview: { changes: [{ type: 'grant', id: `${user.id}/${name}`, actions: ['delete'], before: { access_level: grant.access_level } }] },
      };
    },
    apply: async ({ user, deployment }) => {
      // Removed meanwhile by another request: the same answer as when it was never there.
      if (!(await identity.grants.remove(user.id, deployment))) throw noGrant(user, deployment);
      return { user, deployment };
    },
  });

  return { assign, update, remove };
}
