import type { PluginDirectory } from '@agent/sdk';
import { compilePlain } from '../openapi/validation.js';
import type { PluginRecord } from './host.js';

/**
 * The services of one agent: what the core and each plugin provide, by service id. One per agent (never a
 * process-wide container), so two agents in one process do not share anything.
 */
export class ServiceDirectory {
  private readonly services = new Map<string, { impl: unknown; provider: string }>();

  provide(id: string, impl: unknown, provider: string): void {
    const existing = this.services.get(id);
    if (existing) throw new Error(`service '${id}' is already provided by '${existing.provider}'`);
    this.services.set(id, { impl, provider });
  }

  get<T>(id: string): T | undefined {
    return this.services.get(id)?.impl as T | undefined;
  }

  has(id: string): boolean {
    return this.services.has(id);
  }

  providerOf(id: string): string | undefined {
    return this.services.get(id)?.provider;
  }

  /** Withdraws everything a plugin provided (its setup or start failed). */
  withdraw(provider: string): void {
    for (const [id, s] of this.services) if (s.provider === provider) this.services.delete(id);
  }
}

/** What the running plugins offer to deploy, their config schemas compiled on first use. */
export function pluginDirectory(running: () => PluginRecord[]): PluginDirectory {
  const validators = new Map<string, (value: unknown, prefix: string) => string | null>();
  return {
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
  };
}
