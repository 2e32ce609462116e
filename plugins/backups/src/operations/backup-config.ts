/**
 * Changing a deployment's backup configuration. Its plan preview is this `prepare`: a preview refuses what the
 * change would refuse (unknown deployment, bad patterns, unknown destination, a cron the scheduler refuses), and
 * shows the configuration the change stores.
 */
import { defineOperation, deploymentName, errors, Type } from '@agent/sdk';
import type { BackupConfigs } from '../backup-configs.js';
import type { StoreRegistry } from '../s3/stores.js';
import { checkDestination, checkPatterns, ExcludePatterns } from './common.js';

export const ConfigPatch = Type.Object({
  enabled: Type.Optional(Type.Boolean()),
  schedule: Type.Optional(Type.String({ minLength: 1, maxLength: 120, description: 'cron expression (5 or 6 fields)' })),
  retention: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
  include_database: Type.Optional(Type.Boolean()),
  exclude_patterns: Type.Optional(ExcludePatterns),
  destination: Type.Optional(Type.String({ maxLength: 64 })),
});

export function backupConfigOperations(deps: { configs: BackupConfigs; stores: StoreRegistry; deploymentExists(name: string): boolean }) {
  const { configs, stores } = deps;

  const set = defineOperation({
    name: 'backups.setConfig',
    input: Type.Object({ deployment: deploymentName(), patch: ConfigPatch }),
    resource: (input) => ({ type: 'backup-config', id: input.deployment }),
    prepare({ deployment, patch }) {
      if (!deps.deploymentExists(deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
      if (patch.exclude_patterns) checkPatterns(patch.exclude_patterns);
      if (patch.destination !== undefined) checkDestination(stores, patch.destination);
      const { updated_at: _u, ...next } = configs.planned(deployment, patch);
      const before = configs.get(deployment);
      return {
        value: { deployment, patch },
        preview: { changes: [{ type: 'backup-config', id: deployment, actions: ['update'], before, after: { ...before, ...next } }] },
      };
    },
    // The stored configuration, not its next run (which moves at every scheduled run without any change): a change
    // meanwhile makes a plan stale before its checks run again.
    snapshot: ({ deployment }) => ({ records: { config: configs.stored(deployment) } }),
    apply: ({ deployment, patch }) => configs.set(deployment, patch),
  });

  return { set };
}
