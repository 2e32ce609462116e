/**
 * Runtime settings: each plugin declares a schema (with defaults); values are stored in one core document and
 * edited through `PUT /api/settings` (served by a plugin through `coreServices.settings`).
 */
import { type Document, type EventBus, type PluginSettings, type SettingDefinition, type SettingsRegistry, type TObject } from '@agent/sdk';
export interface SettingsDoc {
    values: Record<string, Record<string, unknown>>;
}
export declare class SettingsStore implements SettingsRegistry {
    private readonly doc;
    private readonly events;
    private readonly defined;
    constructor(doc: Document<SettingsDoc>, events: EventBus);
    define<T extends TObject>(plugin: string, schema: T, options?: {
        restart?: string[];
        secret?: string[];
    }): PluginSettings<T>;
    /** Forgets the settings of a plugin whose setup failed. */
    drop(plugin: string): void;
    private current;
    definitions(): SettingDefinition[];
    values(): Record<string, Record<string, unknown>>;
    update(patch: Record<string, Record<string, unknown>>): Promise<{
        applied: string[];
        restart_required: string[];
    }>;
}
//# sourceMappingURL=registry.d.ts.map