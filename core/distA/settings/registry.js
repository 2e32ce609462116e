/**
 * Runtime settings: each plugin declares a schema (with defaults); values are stored in one core document and
 * edited through `PUT /api/settings` (served by a plugin through `coreServices.settings`).
 */
import { errors } from '@agent/sdk';
import { compilePlain, defaultsOf } from '../openapi/validation.js';
import { REDACTED } from '../plans/redact.js';
export class SettingsStore {
    doc;
    events;
    defined = new Map();
    constructor(doc, events) {
        this.doc = doc;
        this.events = events;
    }
    define(plugin, schema, options = {}) {
        if (this.defined.has(plugin))
            throw new Error(`settings of '${plugin}' are already defined`);
        const validate = compilePlain(schema);
        const defaults = defaultsOf(schema);
        if (!defaults)
            throw new Error(`settings ${plugin}: a required setting has no default (every setting needs one)`);
        const def = { plugin, schema, restart: options.restart ?? [], secret: options.secret ?? [], validate, defaults, listeners: new Set() };
        this.defined.set(plugin, def);
        return {
            get: () => this.current(plugin),
            set: async (patch) => {
                await this.update({ [plugin]: patch });
            },
            onChange: (listener) => {
                def.listeners.add(listener);
                return () => def.listeners.delete(listener);
            },
        };
    }
    /** Forgets the settings of a plugin whose setup failed. */
    drop(plugin) {
        this.defined.delete(plugin);
    }
    current(plugin) {
        const def = this.defined.get(plugin);
        return { ...def.defaults, ...(this.doc.data.values[plugin] ?? {}) };
    }
    definitions() {
        return [...this.defined.values()].map(({ plugin, schema, restart, secret }) => ({ plugin, schema, restart, secret }));
    }
    values() {
        const out = {};
        for (const def of this.defined.values()) {
            const value = this.current(def.plugin);
            for (const key of def.secret)
                if (value[key])
                    value[key] = REDACTED;
            out[def.plugin] = value;
        }
        return out;
    }
    async update(patch) {
        const next = {};
        const applied = [];
        const restart = [];
        for (const [plugin, values] of Object.entries(patch)) {
            const def = this.defined.get(plugin);
            if (!def)
                throw errors.badRequest(`settings: unknown section '${plugin}'`, 'VALIDATION_FAILED', { field: plugin });
            if (typeof values !== 'object' || values === null || Array.isArray(values))
                throw errors.badRequest(`settings.${plugin}: must be an object`);
            const merged = { ...this.current(plugin) };
            for (const [key, value] of Object.entries(values)) {
                // A masked secret sent back unchanged keeps the stored value.
                if (def.secret.includes(key) && value === REDACTED)
                    continue;
                merged[key] = value;
                applied.push(`${plugin}.${key}`);
                if (def.restart.includes(key))
                    restart.push(`${plugin}.${key}`);
            }
            const problem = def.validate(merged, `settings.${plugin}`);
            if (problem)
                throw errors.badRequest(problem, 'VALIDATION_FAILED', { field: plugin });
            next[plugin] = merged;
        }
        await this.doc.update((d) => {
            for (const [plugin, value] of Object.entries(next))
                d.values[plugin] = value;
        });
        for (const plugin of Object.keys(next)) {
            const def = this.defined.get(plugin);
            const value = this.current(plugin);
            for (const listener of def.listeners)
                listener(value);
            this.events.emit('settings.changed', { plugin, keys: applied.filter((k) => k.startsWith(`${plugin}.`)) });
        }
        return { applied, restart_required: restart };
    }
}
//# sourceMappingURL=registry.js.map