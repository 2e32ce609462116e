/**
 * The `ctx` a plugin receives in `setup`. Everything it registers is staged here and committed only when setup
 * succeeds, so a failing plugin leaves nothing behind.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  coreServices,
  type AgentInfo, type AuditLog, type DoctorCheck, type EventBus, type JobHandle, type JobSpec, type Logger, type PluginContext,
  type PluginDefinition, type PluginSettings, type PluginStore, type Scheduler, type Sealer, type ServiceRef,
  type ServiceRegistry, type SqlDatabase, type TObject,
} from '@agent/sdk';
import type { DependencyContainer } from 'tsyringe';
import type { RegisteredAppRoute, RegisteredRoute, RegisteredSocket, RouteRegistry } from '../openapi/registry.js';
import type { ResourceCatalog } from '../auth/resources.js';
import type { SettingsStore } from '../settings/registry.js';
import { openDocument } from '../store/documents.js';
import { openJournal, type Journal } from '../store/journal.js';

export interface ContextDeps {
  registry: RouteRegistry;
  catalog: ResourceCatalog;
  settings: SettingsStore;
  container: DependencyContainer;
  audit: AuditLog;
  sealer: Sealer & { sealBuffer(b: Buffer): Buffer; openBuffer(b: Buffer): Buffer };
  agent: AgentInfo;
}

export interface StagedPlugin {
  ctx: PluginContext<any>;
  entries: (RegisteredRoute | RegisteredSocket | RegisteredAppRoute)[];
  provided: Set<string>;
  scheduler: Scheduler & { startAll(): void; stopAll(): void; list(): { name: string; cron: string; next_run: string | null }[] };
  events: EventBus & { dispose(): void };
  closers: (() => void | Promise<void>)[];
  /** Doctor checks the plugin added (committed with its routes when setup succeeds). */
  checks: DoctorCheck[];
  journal: () => Journal | null;
}

const CORE_SERVICE_IDS = new Set(Object.values(coreServices).map((r) => r.id));

/** tsyringe cannot unregister a token, so a withdrawn service is re-registered as undefined. */
export const serviceAvailable = (container: DependencyContainer, id: string): boolean =>
  container.isRegistered(id) && container.resolve(id) !== undefined;

export function createContext(
  definition: PluginDefinition<any>,
  packageDir: string,
  config: Record<string, unknown>,
  log: Logger,
  scheduler: StagedPlugin['scheduler'],
  events: StagedPlugin['events'],
  deps: ContextDeps,
): StagedPlugin {
  const name = definition.name;
  const dataDir = join(deps.agent.dataDir, 'plugins', name);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const entries: StagedPlugin['entries'] = [];
  const provided = new Set<string>();
  const closers: StagedPlugin['closers'] = [];
  const checks: DoctorCheck[] = [];
  const declared = (refs?: ServiceRef<unknown>[]) => new Set((refs ?? []).map((r) => r.id));
  const mayProvide = declared(definition.provides);
  const mayUse = new Set([...declared(definition.requires), ...declared(definition.optional), ...CORE_SERVICE_IDS]);
  let journal: Journal | null = null;

  const services: ServiceRegistry = {
    provide: (ref, impl) => {
      if (!mayProvide.has(ref.id)) throw new Error(`plugin '${name}' provides service '${ref.id}' without listing it in 'provides'`);
      if (serviceAvailable(deps.container, ref.id)) throw new Error(`service '${ref.id}' is already provided`);
      deps.container.register(ref.id, { useValue: impl });
      provided.add(ref.id);
    },
    get: (ref) => {
      if (!mayUse.has(ref.id)) throw new Error(`plugin '${name}' uses service '${ref.id}' without listing it in 'requires' or 'optional'`);
      if (!serviceAvailable(deps.container, ref.id)) throw new Error(`service '${ref.id}' is not available (plugin '${name}')`);
      return deps.container.resolve(ref.id);
    },
    optional: (ref) => {
      if (!mayUse.has(ref.id)) throw new Error(`plugin '${name}' uses service '${ref.id}' without listing it in 'requires' or 'optional'`);
      return serviceAvailable(deps.container, ref.id) ? deps.container.resolve(ref.id) : undefined;
    },
  };

  const store: PluginStore = {
    document: (defaults, docName = 'state') => {
      if (!/^[a-z0-9][a-z0-9_-]*$/.test(docName)) throw new Error(`invalid document name '${docName}'`);
      return openDocument(join(dataDir, `${docName}.json`), defaults);
    },
    secureDocument: (defaults, docName = 'secure') => {
      if (!/^[a-z0-9][a-z0-9_-]*$/.test(docName)) throw new Error(`invalid document name '${docName}'`);
      return openDocument(join(dataDir, `${docName}.json.enc`), defaults, deps.sealer);
    },
    journal: () => {
      journal ??= openJournal(join(dataDir, 'journal.sqlite'));
      return journal as unknown as SqlDatabase;
    },
  };

  const ctx: PluginContext<any> = {
    name,
    config,
    log,
    events,
    store,
    services,
    scheduler,
    agent: deps.agent,
    dataDir,
    packageDir,
    sealer: deps.sealer,
    route: (spec) => {
      entries.push(deps.registry.prepareRoute(name, spec as never));
    },
    websocket: (spec) => {
      entries.push(deps.registry.prepareSocket(name, spec as never));
    },
    job: (spec: JobSpec): JobHandle => scheduler.job(spec),
    audit: (event) => deps.audit.record({ actor_type: 'system', actor_id: `system:${name}`, ...event }),
    settings: <T extends TObject>(schema: T, options?: { restart?: string[]; secret?: string[]; permissions?: Partial<Record<string, string>> }): PluginSettings<T> =>
      deps.settings.define(name, schema, options as { restart?: string[]; secret?: string[]; permissions?: Record<string, string> }),
    onClose: (fn) => {
      closers.push(fn);
    },
    doctor: (check) => {
      checks.push(check);
    },
  };

  for (const [resource, decl] of Object.entries(definition.resources ?? {})) {
    deps.catalog.declare({ name: resource, description: decl.description, operator: decl.operator ?? 'write', viewer: decl.viewer ?? 'read', owner: decl.owner ?? 'global', plugin: name });
  }
  for (const spec of definition.app?.routes ?? []) entries.push(deps.registry.prepareAppRoute(name, spec));

  return { ctx, entries, provided, scheduler, events, closers, checks, journal: () => journal };
}
