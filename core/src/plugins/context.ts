/**
 * The `ctx` a plugin receives in `setup`. Everything it registers is staged here and committed only when setup
 * succeeds, so a failing plugin leaves nothing behind.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type {
  AgentInfo,
  Dependency,
  DoctorCheck,
  EventBus,
  JobHandle,
  JobSpec,
  Logger,
  PluginContext,
  PluginDefinition,
  PluginSettings,
  PluginStore,
  Scheduler,
  Sealer,
  ServiceRef,
  SqlDatabase,
  TObject,
} from '@agent/sdk';
import type { ServiceDirectory } from './services.js';
import type { RegisteredAppRoute, RegisteredRoute, RegisteredSocket, RouteRegistry } from '../openapi/registry.js';
import type { ResourceCatalog } from '../auth/resources.js';
import type { SettingsStore } from '../settings/registry.js';
import type { AuditWriter } from '../audit.js';
import { openDocument } from '../store/documents.js';
import { openJournal, type Journal, type JournalSync } from '../store/journal.js';

export interface ContextDeps {
  registry: RouteRegistry;
  catalog: ResourceCatalog;
  settings: SettingsStore;
  services: ServiceDirectory;
  audit: AuditWriter;
  /** Syncs the plugins' journals before a change is acknowledged (the audit writer waits for it). */
  journalSync: JournalSync;
  sealer: Sealer & { sealBuffer(b: Buffer): Buffer; openBuffer(b: Buffer): Buffer };
  agent: AgentInfo;
}

export interface StagedPlugin {
  ctx: PluginContext<any>;
  /** The services the plugin declared in `deps`, as its setup receives them. */
  deps: Record<string, unknown>;
  entries: (RegisteredRoute | RegisteredSocket | RegisteredAppRoute)[];
  scheduler: Scheduler & { startAll(): void; stopAll(): void; list(): { name: string; cron: string; next_run: string | null }[] };
  events: EventBus & { dispose(): void };
  closers: (() => void | Promise<void>)[];
  /** Doctor checks the plugin added (committed with its routes when setup succeeds). */
  checks: DoctorCheck[];
  /** The SQLite journals the plugin opened, by name. */
  journals: Map<string, Journal>;
}

/** The ref behind a dependency (`optional(ref)` or a ref). */
export const refOf = (dep: Dependency): { ref: ServiceRef<unknown>; optional: boolean } =>
  'ref' in dep && (dep as { optional?: boolean }).optional
    ? { ref: (dep as { ref: ServiceRef<unknown> }).ref, optional: true }
    : { ref: dep as ServiceRef<unknown>, optional: false };

/**
 * The `deps` object of a plugin: required services as they are now (the host checked they exist), optional ones
 * looked up each time they are read (a provider may come later, or fail).
 */
function resolveDeps(definition: PluginDefinition<any, any, any>, services: ServiceDirectory): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, dep] of Object.entries((definition.deps ?? {}) as Record<string, Dependency>)) {
    const { ref, optional } = refOf(dep);
    if (optional) Object.defineProperty(out, key, { enumerable: true, get: () => services.get(ref.id) });
    else out[key] = services.get(ref.id);
  }
  return Object.freeze(out);
}

export function createContext(
  definition: PluginDefinition<any, any, any>,
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
  const closers: StagedPlugin['closers'] = [];
  const checks: DoctorCheck[] = [];
  const journals = new Map<string, Journal>();

  const store: PluginStore = {
    document: (defaults, docName = 'state') => {
      if (!/^[a-z0-9][a-z0-9_-]*$/.test(docName)) throw new Error(`invalid document name '${docName}'`);
      return openDocument(join(dataDir, `${docName}.json`), defaults);
    },
    secureDocument: (defaults, docName = 'secure') => {
      if (!/^[a-z0-9][a-z0-9_-]*$/.test(docName)) throw new Error(`invalid document name '${docName}'`);
      return openDocument(join(dataDir, `${docName}.json.enc`), defaults, deps.sealer);
    },
    journal: (journalName = 'journal', options) => {
      if (!/^[a-z0-9][a-z0-9_-]*$/.test(journalName)) throw new Error(`invalid journal name '${journalName}'`);
      let journal = journals.get(journalName);
      if (!journal) {
        journals.set(journalName, (journal = openJournal(join(dataDir, `${journalName}.sqlite`))));
        if (options?.syncBeforeAck !== false) deps.journalSync.track(journal);
      }
      return journal as unknown as SqlDatabase;
    },
  };

  const ctx: PluginContext<any> = {
    name,
    config,
    log,
    events,
    store,
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
    settings: <T extends TObject>(
      schema: T,
      options?: { restart?: string[]; secret?: string[]; permissions?: Partial<Record<string, string>> },
    ): PluginSettings<T> => deps.settings.define(name, schema, options as { restart?: string[]; secret?: string[]; permissions?: Record<string, string> }),
    onClose: (fn) => {
      closers.push(fn);
    },
    doctor: (check) => {
      if (checks.some((c) => c.id === check.id)) throw new Error(`doctor check '${check.id}' is added twice`);
      checks.push(check);
    },
  };

  for (const [resource, decl] of Object.entries(definition.resources ?? {})) {
    deps.catalog.declare({
      name: resource,
      description: decl.description,
      operator: decl.operator ?? 'write',
      viewer: decl.viewer ?? 'read',
      owner: decl.owner ?? 'global',
      plugin: name,
    });
  }
  for (const spec of definition.app?.routes ?? []) entries.push(deps.registry.prepareAppRoute(name, spec));

  return { ctx, deps: resolveDeps(definition, deps.services), entries, scheduler, events, closers, checks, journals };
}
