/** The custom file log sources of a deployment as an operation. */
import { defineOperation } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import { SetLogSourcesInput } from '../schemas.js';
import { sourceViews, validateCustomSources, type KindSources } from '../log-sources.js';

export type LogSourceOperations = ReturnType<typeof logSourceOperations>;

export function logSourceOperations(manager: DeploymentManager, kinds: KindSources) {
  const setLogSources = defineOperation({
    name: 'deployments.setLogSources',
    input: SetLogSourcesInput,
    resource: ({ name }) => ({ type: 'deployment', id: name }),
    snapshot: ({ name }) => ({ records: { log_sources: manager.entries.get(name)?.record.log_sources ?? null } }),
    prepare: ({ name, sources }) => {
      const entry = manager.require(name);
      const custom = sources.map((s) => ({ id: s.id, name: s.name, path: s.path, ...(s.format ? { format: s.format } : {}) }));
      validateCustomSources(custom, new Set(kinds.builtin(entry).map((s) => s.id)));
      return {
        value: { name, custom },
        preview: {
          summary: `custom log sources of ${entry.name}: ${custom.length}`,
          changes: [{ type: 'log-sources', id: entry.name, actions: ['update'], before: { sources: entry.record.log_sources }, after: { sources: custom } }],
        },
      };
    },
    apply: async ({ name, custom }) => {
      const entry = manager.require(name);
      await manager.saveRecord(entry, { log_sources: custom });
      return sourceViews(entry, kinds);
    },
  });
  return { setLogSources };
}
