import type { PluginDirectory } from '@agent/sdk';
import { compilePlain } from '../openapi/validation.js';
import type { PluginRecord } from './host.js';

/** What the running plugins offer: deployables (their config schemas compiled on first use), apps and doctor checks. */
export function pluginDirectory(running: () => PluginRecord[]): PluginDirectory {
  const validators = new Map<string, (value: unknown, prefix: string) => string | null>();
  return {
    checks: () => running().flatMap((p) => (p.staged?.checks ?? []).map((check) => ({ plugin: p.name, check }))),
    deployable(name) {
      const plugin = running().find((p) => p.name === name);
      if (!plugin) return undefined;
      const deployable = plugin.definition?.deployable;
      if (!deployable) return null;
      return {
        plugin: name,
        summary: deployable.summary,
        validate: (config) => {
          let check = validators.get(name);
          if (!check) validators.set(name, (check = compilePlain(deployable.config)));
          return check(config, 'body.config');
        },
        render: (config) => deployable.render(config),
      };
    },
    apps: () =>
      running().flatMap((p) =>
        p.definition?.app ? [{ plugin: p.name, packageDir: p.packageDir, app: p.definition.app, config: p.staged!.ctx.config as Record<string, unknown> }] : [],
      ),
  };
}
