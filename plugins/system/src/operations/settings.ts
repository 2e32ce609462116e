/**
 * A change of the agent's settings as an operation. `prepare` checks what this plugin decides: the sections and keys
 * exist, and the caller holds the extra permission a guarded setting names when it changes its value; `apply` hands
 * the patch to the registry, which validates the values against each plugin's schema as it stores them (it offers no
 * check without the change).
 */
import { defineOperation, errors, type SettingsRegistry } from '@agent/sdk';
import { propsOf, type SettingsSchemas } from '../settings.js';

export type SettingsOperations = ReturnType<typeof settingsOperations>;

export function settingsOperations(registry: SettingsRegistry, schemas: SettingsSchemas) {
  const update = defineOperation({
    name: 'settings.update',
    input: schemas.body,
    resource: () => ({ type: 'settings', id: 'agent' }),
    prepare: (patch, { principal }) => {
      const defs = new Map(registry.definitions().map((d) => [d.plugin, d]));
      const current = registry.values();
      for (const [plugin, values] of Object.entries(patch)) {
        const def = defs.get(plugin);
        if (!def) throw errors.badRequest(`body.${plugin}: unknown settings section`, 'VALIDATION_FAILED', { field: plugin });
        const known = propsOf(def);
        for (const key of Object.keys(values)) {
          if (!(key in known)) throw errors.badRequest(`body.${plugin}.${key}: unknown setting`, 'VALIDATION_FAILED', { field: `${plugin}.${key}` });
          const needed = def.permissions[key];
          // Sending a guarded value back unchanged (a read-modify-write of the whole settings) needs nothing more.
          if (needed && current[plugin]?.[key] !== values[key] && !principal.can(needed))
            throw errors.forbidden(`changing ${plugin}.${key} needs the permission '${needed}'`);
        }
      }
      const changes = Object.entries(patch).map(([plugin, values]) => ({
        type: 'settings',
        id: plugin,
        actions: ['update' as const],
        before: Object.fromEntries(Object.keys(values).map((key) => [key, current[plugin]?.[key]])),
        after: values,
        // Secrets are masked in `before` already; `after` may hold new ones.
        sensitive: defs.get(plugin)!.secret.some((key) => key in values),
      }));
      return { value: patch, preview: { summary: `update settings of ${Object.keys(patch).join(', ') || 'nothing'}`, changes } };
    },
    apply: async (patch) => ({ ...(await registry.update(patch)), values: registry.values() }),
  });
  return { update };
}
