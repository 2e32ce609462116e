/**
 * Runtime settings: each plugin declares a schema (with defaults); values are stored in one core document and
 * edited through `PUT /api/settings` (served by a plugin through `coreServices.settings`).
 */
import {
  errors,
  type Document,
  type EventBus,
  type PluginSettings,
  type SettingDefinition,
  type SettingsRegistry,
  type Static,
  type TObject,
} from '@agent/sdk';
import { compilePlain, defaultsOf } from '../openapi/validation.js';
import { REDACTED } from '../plans/redact.js';

export interface SettingsDoc {
  values: Record<string, Record<string, unknown>>;
}

interface Defined {
  definition: SettingDefinition;
  validate: (value: unknown, prefix: string) => string | null;
  defaults: Record<string, unknown>;
  listeners: Set<(value: Record<string, unknown>) => void>;
}

export class SettingsStore implements SettingsRegistry {
  private readonly defined = new Map<string, Defined>();

  constructor(
    private readonly doc: Document<SettingsDoc>,
    private readonly events: EventBus,
  ) {}

  define<T extends TObject>(
    plugin: string,
    schema: T,
    { restart = [], secret = [], permissions = {} }: { restart?: string[]; secret?: string[]; permissions?: Record<string, string> } = {},
  ): PluginSettings<T> {
    if (this.defined.has(plugin)) throw new Error(`settings of '${plugin}' are already defined`);
    const defaults = defaultsOf(schema);
    if (!defaults) throw new Error(`settings ${plugin}: a required setting has no default (every setting needs one)`);
    const def: Defined = {
      definition: { plugin, schema, restart, secret, permissions: { ...permissions } },
      validate: compilePlain(schema),
      defaults,
      listeners: new Set(),
    };
    this.defined.set(plugin, def);
    return {
      // Validated against `schema` whenever set, defaults applied.
      get: () => this.current(plugin) as Static<T>,
      set: async (patch) => {
        await this.update({ [plugin]: patch as Record<string, unknown> });
      },
      onChange: (listener) => {
        def.listeners.add(listener);
        return () => def.listeners.delete(listener);
      },
    };
  }

  /** Forgets the settings of a plugin whose setup failed. */
  drop(plugin: string): void {
    this.defined.delete(plugin);
  }

  private current(plugin: string): Record<string, unknown> {
    const def = this.defined.get(plugin)!;
    return { ...def.defaults, ...(this.doc.data.values[plugin] ?? {}) };
  }

  definitions(): SettingDefinition[] {
    return [...this.defined.values()].map((def) => def.definition);
  }

  values(): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    for (const { definition } of this.defined.values()) {
      const value = this.current(definition.plugin);
      for (const key of definition.secret) if (value[key]) value[key] = REDACTED;
      out[definition.plugin] = value;
    }
    return out;
  }

  async update(patch: Record<string, Record<string, unknown>>): Promise<{ applied: string[]; restart_required: string[] }> {
    const next: Record<string, Record<string, unknown>> = {};
    const applied: string[] = [];
    const restart: string[] = [];
    for (const [plugin, values] of Object.entries(patch)) {
      const def = this.defined.get(plugin);
      if (!def) throw errors.badRequest(`settings: unknown section '${plugin}'`, 'VALIDATION_FAILED', { field: plugin });
      if (typeof values !== 'object' || values === null || Array.isArray(values)) throw errors.badRequest(`settings.${plugin}: must be an object`);
      const merged = { ...this.current(plugin) };
      for (const [key, value] of Object.entries(values)) {
        // A masked secret sent back unchanged keeps the stored value.
        if (def.definition.secret.includes(key) && value === REDACTED) continue;
        merged[key] = value;
        applied.push(`${plugin}.${key}`);
        if (def.definition.restart.includes(key)) restart.push(`${plugin}.${key}`);
      }
      const problem = def.validate(merged, `settings.${plugin}`);
      if (problem) throw errors.badRequest(problem, 'VALIDATION_FAILED', { field: plugin });
      next[plugin] = merged;
    }
    await this.doc.update((d) => {
      for (const [plugin, value] of Object.entries(next)) d.values[plugin] = value;
    });
    for (const plugin of Object.keys(next)) {
      const def = this.defined.get(plugin)!;
      const value = this.current(plugin);
      for (const listener of def.listeners) listener(value);
      this.events.emit('settings.changed', { plugin, keys: applied.filter((k) => k.startsWith(`${plugin}.`)) });
    }
    return { applied, restart_required: restart };
  }
}
