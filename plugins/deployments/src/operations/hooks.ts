/**
 * The deploy hook of a deployment: create or rotate its secret (shown once), disable it. An admin of the deployment's
 * decision: whoever holds the secret can redeploy it without an API key.
 */
import { defineOperation } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import type { Hooks } from '../hooks.js';
import { NameParams } from '../schemas.js';

export type HookOperations = ReturnType<typeof hookOperations>;

export function hookOperations(manager: DeploymentManager, hooks: Hooks) {
  const rotate = defineOperation({
    name: 'deployments.rotateHook',
    input: NameParams,
    resource: (input) => ({ type: 'deployment', id: input.name }),
    prepare: ({ name }) => {
      manager.require(name);
      const exists = hooks.get(name) !== null;
      return {
        value: { name, exists },
        preview: {
          summary: `${exists ? 'rotate' : 'create'} the deploy hook secret of ${name}`,
          changes: [{ type: 'hook', id: name, actions: [exists ? 'update' : 'create'], sensitive: true }],
        },
      };
    },
    apply: ({ name, exists }, { principal }) => ({ ...hooks.rotate(name, principal.id), rotated: exists }),
  });

  const remove = defineOperation({
    name: 'deployments.removeHook',
    input: NameParams,
    resource: (input) => ({ type: 'deployment', id: input.name }),
    prepare: ({ name }) => {
      manager.require(name);
      return { value: name, preview: { summary: `disable the deploy hook of ${name}`, changes: [{ type: 'hook', id: name, actions: ['delete'] }] } };
    },
    apply: (name) => ({ name, removed: hooks.remove(name) }),
  });

  return { rotate, remove };
}
