/**
 * The `ctx` a plugin receives in `setup`. Everything it registers is staged here and committed only when setup
 * succeeds, so a failing plugin leaves nothing behind.
 */
import type { Middleware } from 'koa';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentInfo, Dependency, DoctorCheck, PluginContext, AnyPluginDefinition, PluginStore, ServiceRef, SiteSpec, SqlDatabase } from '@agent/sdk';
import type { ServiceDirectory } from './services.js';
import type { RegisteredAppRoute, RegisteredRoute, RegisteredSocket, RouteRegistry } from '../openapi/registry.js';
import type { ResourceCatalog } from '../auth/resources.js';
import type { SettingsStore } from '../settings/registry.js';
import type { AuditWriter } from '../audit.js';
import { sdkLogger, type RootLogger } from '../log.js';
import type { AgentEventBus } from '../events/bus.js';
import type { CoreScheduler, PluginScheduler } from '../scheduler/scheduler.js';
import { openDocument } from '../store/documents.js';
import type { DataSealer } from '../store/secrets.js';
import { openJournal, type Journal, type JournalSync } from '../store/journal.js';

export interface ContextDeps {
  root: RootLogger;
  bus: AgentEventBus;
  scheduler: CoreScheduler;
  registry: RouteRegistry;
  catalog: ResourceCatalog;
  settings: SettingsStore;
  services: ServiceDirectory;
  audit: AuditWriter;
  /** Syncs the plugins' journals before a change is acknowledged (the audit writer waits for it). */
  journalSync: JournalSync;
  sealer: DataSealer;
  agent: AgentInfo;
}

export interface StagedPlugin {
  ctx: PluginContext;
  /** The services the plugin declared in `deps`, as its setup receives them. */
  deps: Record<string, unknown>;
  entries: (RegisteredRoute | RegisteredSocket | RegisteredAppRoute)[];
  scheduler: PluginScheduler;
  closers: (() => void | Promise<void>)[];
  /** Doctor checks the plugin added (committed with its routes when setup succeeds). */
  checks: DoctorCheck[];
  /** Koa middleware for its own routes (committed with them). */
  middleware: Middleware[];
  /** The static site it serves at `/` (`ctx.site`), committed with its routes. */
  site: SiteSpec | null;
  /** Cancels its jobs, drops its event subscriptions and closes its journals. */
  release(): void;
}

/** The services a plugin declares in `deps` (`optional(ref)` or a ref), by the key its setup receives them under. */
export const dependencies = (def: AnyPluginDefinition): [string, { ref: ServiceRef<unknown>; optional: boolean }][] =>
  Object.entries((def.deps ?? {}) as Record<string, Dependency>).map(([key, dep]) => [
    key,
    'ref' in dep && dep.optional ? { ref: dep.ref, optional: true } : { ref: dep as ServiceRef<unknown>, optional: false },
  ]);

/** A document or journal name, checked before it becomes a file name. */
function fileName(kind: string, name: string): string {
  if (!/^[a-z0-9][a-z0-9_-]*$/.test(name)) throw new Error(`invalid ${kind} name '${name}'`);
  return name;
}

export function createContext(definition: AnyPluginDefinition, packageDir: string, config: Record<string, unknown>, deps: ContextDeps): StagedPlugin {
  const name = definition.name;
  const dataDir = join(deps.agent.dataDir, 'plugins', name);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const scheduler = deps.scheduler.forPlugin(name);
  const events = deps.bus.scoped();
  const entries: StagedPlugin['entries'] = [];
  const closers: StagedPlugin['closers'] = [];
  const checks: DoctorCheck[] = [];
  const middleware: Middleware[] = [];
  let site: SiteSpec | null = null;
  const journals = new Map<string, Journal>();

  const store: PluginStore = {
    document: (defaults, docName = 'state') => openDocument(join(dataDir, `${fileName('document', docName)}.json`), defaults),
    secureDocument: (defaults, docName = 'secure') => openDocument(join(dataDir, `${fileName('document', docName)}.json.enc`), defaults, deps.sealer),
    journal: (journalName = 'journal', options) => {
      let journal = journals.get(fileName('journal', journalName));
      if (!journal) {
        journals.set(journalName, (journal = openJournal(join(dataDir, `${journalName}.sqlite`))));
        if (options?.syncBeforeAck !== false) deps.journalSync.track(journal);
      }
      return journal as unknown as SqlDatabase;
    },
  };

  const ctx: PluginContext = {
    name,
    config,
    log: sdkLogger(deps.root, { plugin: name }),
    events,
    store,
    scheduler,
    agent: deps.agent,
    dataDir,
    packageDir,
    sealer: deps.sealer,
    route: (spec) => void entries.push(deps.registry.prepareRoute(name, spec as never, definition.errors)),
    websocket: (spec) => void entries.push(deps.registry.prepareSocket(name, spec as never)),
    use: (fn) => void middleware.push(fn as Middleware),
    site: (spec) => {
      if (site) throw new Error('ctx.site is called twice');
      site = { ...spec };
    },
    job: (spec) => scheduler.job(spec),
    audit: (event) => deps.audit.record({ actor_type: 'system', actor_id: `system:${name}`, ...event }),
    settings: (schema, options) => deps.settings.define(name, schema, options as Parameters<SettingsStore['define']>[2]),
    onClose: (fn) => void closers.push(fn),
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

  // Required services as they are now (the host checked they exist); optional ones looked up each time they are
  // read (a provider may come later, or fail).
  const resolved: Record<string, unknown> = {};
  for (const [key, { ref, optional }] of dependencies(definition)) {
    if (optional) Object.defineProperty(resolved, key, { enumerable: true, get: () => deps.services.get(ref.id) });
    else resolved[key] = deps.services.get(ref.id);
  }

  const release = () => {
    scheduler.stopAll();
    events.dispose();
    for (const journal of journals.values()) journal.close();
  };
  return {
    ctx,
    deps: Object.freeze(resolved),
    entries,
    scheduler,
    closers,
    checks,
    middleware,
    get site() {
      return site;
    },
    release,
  };
}
