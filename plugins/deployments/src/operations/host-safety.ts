/** Host-safety exceptions of a deployment (an admin's decision) as an operation: the route, its plans and the console run it. */
import { defineOperation } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import { SetHostSafetyInput } from '../schemas.js';

export type HostSafetyOperations = ReturnType<typeof hostSafetyOperations>;

export function hostSafetyOperations(manager: DeploymentManager) {
  const setHostSafety = defineOperation({
    name: 'deployments.setHostSafety',
    input: SetHostSafetyInput,
    resource: ({ name }) => ({ type: 'deployment', id: name }),
    // A plan of new exceptions is stale once the exceptions changed.
    snapshot: ({ name }) => ({ records: { exceptions: manager.entries.get(name)?.record.exceptions ?? null } }),
    prepare: ({ name, exceptions }) => {
      const entry = manager.require(name);
      const next = [...new Set(exceptions)].sort();
      return {
        value: { name, exceptions: next },
        preview: {
          summary: `host-safety exceptions of ${entry.name}: ${next.length ? next.join(', ') : 'none'}`,
          changes: [{ type: 'host-safety', id: entry.name, actions: ['update'], before: { exceptions: entry.record.exceptions }, after: { exceptions: next } }],
        },
      };
    },
    apply: async ({ name, exceptions }) => {
      await manager.saveRecord(manager.require(name), { exceptions });
      return { name, exceptions };
    },
  });
  return { setHostSafety };
}
