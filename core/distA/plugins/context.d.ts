import { type AgentInfo, type AuditLog, type EventBus, type Logger, type PluginContext, type PluginDefinition, type Scheduler, type Sealer } from '@agent/sdk';
import type { DependencyContainer } from 'tsyringe';
import type { RegisteredAppRoute, RegisteredRoute, RegisteredSocket, RouteRegistry } from '../openapi/registry.js';
import type { ResourceCatalog } from '../auth/resources.js';
import type { SettingsStore } from '../settings/registry.js';
import { type Journal } from '../store/journal.js';
export interface ContextDeps {
    registry: RouteRegistry;
    catalog: ResourceCatalog;
    settings: SettingsStore;
    container: DependencyContainer;
    audit: AuditLog;
    sealer: Sealer & {
        sealBuffer(b: Buffer): Buffer;
        openBuffer(b: Buffer): Buffer;
    };
    agent: AgentInfo;
}
export interface StagedPlugin {
    ctx: PluginContext<any>;
    entries: (RegisteredRoute | RegisteredSocket | RegisteredAppRoute)[];
    provided: Set<string>;
    scheduler: Scheduler & {
        startAll(): void;
        stopAll(): void;
        list(): {
            name: string;
            cron: string;
            next_run: string | null;
        }[];
    };
    events: EventBus & {
        dispose(): void;
    };
    closers: (() => void | Promise<void>)[];
    journal: () => Journal | null;
}
/** tsyringe cannot unregister a token, so a withdrawn service is re-registered as undefined. */
export declare const serviceAvailable: (container: DependencyContainer, id: string) => boolean;
export declare function createContext(definition: PluginDefinition<any>, packageDir: string, config: Record<string, unknown>, log: Logger, scheduler: StagedPlugin['scheduler'], events: StagedPlugin['events'], deps: ContextDeps): StagedPlugin;
//# sourceMappingURL=context.d.ts.map