import { type PluginDefinition } from '@agent/sdk';
import type { RootLogger } from '../log.js';
import type { AgentEventBus } from '../events/bus.js';
import type { CoreScheduler } from '../scheduler/scheduler.js';
import { type ContextDeps, type StagedPlugin } from './context.js';
export type PluginStatus = 'running' | 'failed' | 'stopped';
export interface PluginRecord {
    name: string;
    version: string;
    description: string;
    builtin: boolean;
    source: string;
    packageDir: string;
    status: PluginStatus;
    error: string | null;
    definition: PluginDefinition<any> | null;
    staged: StagedPlugin | null;
}
export interface Candidate {
    spec: string;
    dir: string;
    builtin: boolean;
}
/**
 * The bundled build of a built-in plugin (scripts/lib.mjs `bundleCore`: `<repo>/core/dist/builtin/<name>.mjs`,
 * much quicker to load than the plugin's own files), when one exists and the plugin was not rebuilt since.
 */
export declare function bundledEntry(candidate: Candidate, manifest: Record<string, {
    file: string;
    built: number;
}> | null): string | null;
export declare function readManifest(builtinDir: string): Record<string, {
    file: string;
    built: number;
}> | null;
export declare class PluginHost {
    private readonly root;
    private readonly deps;
    private readonly bus;
    private readonly scheduler;
    readonly plugins: PluginRecord[];
    constructor(root: RootLogger, deps: ContextDeps, bus: AgentEventBus, scheduler: CoreScheduler);
    get(name: string): PluginRecord | undefined;
    running(): PluginRecord[];
    private fail;
    /** Loads and sets up the enabled plugins. Throws ConfigError for invalid config (the agent must not start). */
    load(enabled: string[], builtinDir: string, baseDir: string, sections: Record<string, unknown>): Promise<void>;
    private setup;
    private rollback;
    /** Runs `start` of every plugin set up, in dependency order, then arms their jobs. */
    start(): Promise<void>;
    stop(): Promise<void>;
}
//# sourceMappingURL=host.d.ts.map