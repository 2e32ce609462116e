/**
 * The plugin host: finds the enabled plugins, validates their config sections, orders them by the services they
 * provide and require, runs `setup` then `start`, and stops them in reverse order. A plugin that fails is
 * reported (with its name and the reason) and disabled; the agent keeps running.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Dependency, PluginDefinition, PluginInstance, ServiceRef } from '@agent/sdk';
import type { RootLogger } from '../log.js';
import { sdkLogger } from '../log.js';
import { ConfigError } from '../config/config.js';
import { compilePlain, defaultsOf } from '../openapi/validation.js';
import type { AgentEventBus } from '../events/bus.js';
import type { CoreScheduler } from '../scheduler/scheduler.js';
import { createContext, refOf, type ContextDeps, type StagedPlugin } from './context.js';

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
  definition: PluginDefinition<any, any, any> | null;
  staged: StagedPlugin | null;
  /** What its setup returned: its services and lifecycle. */
  instance: PluginInstance<any> | null;
}

export interface Candidate {
  spec: string;
  dir: string;
  builtin: boolean;
}

/** The refs a plugin declares it provides, and the services it depends on. */
const providedRefs = (def: PluginDefinition<any, any, any>): [string, ServiceRef<unknown>][] =>
  Object.entries((def.provides ?? {}) as Record<string, ServiceRef<unknown>>);
const dependencies = (def: PluginDefinition<any, any, any>) => Object.values((def.deps ?? {}) as Record<string, Dependency>).map(refOf);

function isPluginDir(dir: string): boolean {
  return existsSync(join(dir, 'package.json')) && statSync(dir).isDirectory();
}

/**
 * Built-ins loaded whatever `plugins.enabled` says, and why: `access` holds the principals (users, API keys,
 * grants) and the audit journal, without which no request can be authenticated or accounted for; `apps` runs the
 * processes of app plugins, which an enabled app plugin needs however it was enabled.
 */
const ALWAYS_LOADED_BECAUSE: Record<string, string> = {
  access: 'the agent authenticates and audits through it',
  apps: 'it runs the processes of app plugins',
};
export const ALWAYS_LOADED = Object.keys(ALWAYS_LOADED_BECAUSE);

/** Turns `plugins.enabled` into package folders: `*` (all built-ins), `!name` (exclude), names, paths, packages. */
function discover(enabled: string[], builtinDir: string, baseDir: string): { found: Candidate[]; missing: { spec: string; error: string }[] } {
  const builtins = existsSync(builtinDir)
    ? readdirSync(builtinDir)
        .filter((n) => isPluginDir(join(builtinDir, n)))
        .sort()
    : [];
  const excluded = new Set(enabled.filter((e) => e.startsWith('!')).map((e) => e.slice(1)));
  const found: Candidate[] = [];
  const missing: { spec: string; error: string }[] = [];
  const seen = new Set<string>();
  const add = (c: Candidate) => {
    if (seen.has(c.dir)) return;
    seen.add(c.dir);
    found.push(c);
  };
  for (const spec of enabled) {
    if (spec.startsWith('!')) continue;
    if (spec === '*') {
      for (const n of builtins) if (!excluded.has(n)) add({ spec: n, dir: join(builtinDir, n), builtin: true });
    } else if (spec.startsWith('.') || isAbsolute(spec)) {
      const dir = resolve(baseDir, spec);
      if (isPluginDir(dir)) add({ spec, dir, builtin: false });
      else missing.push({ spec, error: `no plugin package at ${dir}` });
    } else if (/^[a-z][a-z0-9-]*$/.test(spec) && builtins.includes(spec)) {
      if (!excluded.has(spec)) add({ spec, dir: join(builtinDir, spec), builtin: true });
    } else {
      try {
        const pkg = createRequire(join(baseDir, 'agent.yaml')).resolve(`${spec}/package.json`);
        add({ spec, dir: dirname(pkg), builtin: false });
      } catch {
        missing.push({ spec, error: `plugin '${spec}' is neither a built-in plugin nor an installed package` });
      }
    }
  }
  for (const n of ALWAYS_LOADED) {
    if (excluded.has(n)) missing.push({ spec: `!${n}`, error: `the '${n}' plugin cannot be disabled: ${ALWAYS_LOADED_BECAUSE[n]}` });
    if (builtins.includes(n)) add({ spec: n, dir: join(builtinDir, n), builtin: true });
  }
  return { found, missing };
}

/** Newest modification time of the files under `dir`. */
function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * The bundled build of a built-in plugin (scripts/lib.mjs `bundleCore`: `<repo>/core/dist/builtin/<name>.mjs`,
 * much quicker to load than the plugin's own files), when one exists and the plugin was not rebuilt since.
 */
export function bundledEntry(candidate: Candidate, manifest: BundleManifest | null): string | null {
  const entry = candidate.builtin ? manifest?.entries[basename(candidate.dir)] : undefined;
  if (!entry) return null;
  const file = join(manifest!.dir, entry.file);
  const dist = join(candidate.dir, 'dist');
  return existsSync(file) && existsSync(dist) && newestMtime(dist) <= entry.built ? file : null;
}

/** The bundle folder and its manifest: plugin folder name → bundled file and build time. */
export interface BundleManifest {
  dir: string;
  entries: Record<string, { file: string; built: number }>;
}

export function readManifest(builtinDir: string): BundleManifest | null {
  const dir = join(builtinDir, '..', 'core', 'dist', 'builtin');
  try {
    return { dir, entries: JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as BundleManifest['entries'] };
  } catch {
    return null;
  }
}

async function importDefinition(dir: string, bundled: string | null): Promise<{ definition: PluginDefinition<any, any, any>; version: string }> {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { main?: string; version?: string; exports?: unknown };
  const main = bundled ?? join(dir, pkg.main ?? 'dist/index.js');
  if (!existsSync(main)) throw new Error(`${main} does not exist (is the plugin built?)`);
  const mod = (await import(pathToFileURL(main).href)) as { default?: PluginDefinition<any, any, any> };
  const definition = mod.default;
  if (!definition || typeof definition !== 'object' || typeof definition.setup !== 'function' || typeof definition.name !== 'string') {
    throw new Error(`${main} does not export a plugin (default export of definePlugin)`);
  }
  return { definition, version: definition.version ?? pkg.version ?? '0.0.0' };
}

/** Dependency order: providers before consumers (required and optional). Cycles are reported. */
function order(records: PluginRecord[]): { ordered: PluginRecord[]; cyclic: PluginRecord[] } {
  const providers = new Map<string, string>();
  for (const r of records) for (const [, ref] of providedRefs(r.definition!)) providers.set(ref.id, r.name);
  const deps = new Map<string, Set<string>>();
  for (const r of records) {
    const set = new Set<string>();
    for (const { ref } of dependencies(r.definition!)) {
      const p = providers.get(ref.id);
      if (p && p !== r.name) set.add(p);
    }
    deps.set(r.name, set);
  }
  const ordered: PluginRecord[] = [];
  const done = new Set<string>();
  let progress = true;
  while (progress) {
    progress = false;
    for (const r of records) {
      if (done.has(r.name)) continue;
      if ([...deps.get(r.name)!].every((d) => done.has(d))) {
        ordered.push(r);
        done.add(r.name);
        progress = true;
      }
    }
  }
  return { ordered, cyclic: records.filter((r) => !done.has(r.name)) };
}

export class PluginHost {
  readonly plugins: PluginRecord[] = [];

  constructor(
    private readonly root: RootLogger,
    private readonly deps: ContextDeps,
    private readonly bus: AgentEventBus,
    private readonly scheduler: CoreScheduler,
  ) {}

  get(name: string): PluginRecord | undefined {
    return this.plugins.find((p) => p.name === name);
  }

  running(): PluginRecord[] {
    return this.plugins.filter((p) => p.status === 'running');
  }

  private fail(record: PluginRecord, error: string): void {
    record.status = 'failed';
    record.error = error;
    this.root.error({ plugin: record.name, error }, 'plugin disabled');
    this.bus.emit('plugin.failed', { name: record.name, error });
  }

  /** Loads and sets up the enabled plugins. Throws ConfigError for invalid config (the agent must not start). */
  async load(enabled: string[], builtinDir: string, baseDir: string, sections: Record<string, unknown>): Promise<void> {
    const { found, missing } = discover(enabled, builtinDir, baseDir);
    for (const m of missing) {
      this.plugins.push({
        name: m.spec,
        version: '',
        description: '',
        builtin: false,
        source: m.spec,
        packageDir: '',
        status: 'failed',
        error: m.error,
        definition: null,
        staged: null,
        instance: null,
      });
      this.root.error({ plugin: m.spec, error: m.error }, 'plugin not found');
    }
    const manifest = readManifest(builtinDir);
    const loaded = await Promise.all(
      found.map(async (c) => {
        try {
          return { c, ...(await importDefinition(c.dir, bundledEntry(c, manifest))) };
        } catch (err) {
          return { c, error: (err as Error).message };
        }
      }),
    );
    const claimed = new Map<string, string>();
    const configs = new Map<string, Record<string, unknown>>();
    for (const l of loaded) {
      const base = { builtin: l.c.builtin, source: l.c.spec, packageDir: l.c.dir, staged: null, instance: null };
      if ('error' in l) {
        const record: PluginRecord = {
          ...base,
          name: l.c.spec,
          version: '',
          description: '',
          status: 'failed',
          error: l.error ?? 'unknown error',
          definition: null,
        };
        this.plugins.push(record);
        this.root.error({ plugin: record.name, error: record.error }, 'plugin could not be loaded');
        continue;
      }
      const def = l.definition!;
      if (this.get(def.name)) {
        this.root.error({ plugin: def.name, source: l.c.spec }, 'a plugin with this name is already loaded; this one is ignored');
        continue;
      }
      const record: PluginRecord = {
        ...base,
        name: def.name,
        version: l.version!,
        description: def.description ?? '',
        status: 'stopped',
        error: null,
        definition: def,
      };
      this.plugins.push(record);
      // Config sections: each top-level property of the plugin's config schema is a top-level config key.
      const config: Record<string, unknown> = {};
      const props = (def.config as { properties?: Record<string, unknown> } | undefined)?.properties ?? {};
      for (const [section, schema] of Object.entries(props)) {
        const owner = claimed.get(section);
        if (owner) throw new ConfigError(`config section '${section}' is claimed by both '${owner}' and '${def.name}'`);
        claimed.set(section, def.name);
        // A section the config file leaves out takes its defaults without compiling a validator (start-up time).
        const defaults = sections[section] === undefined ? defaultsOf(schema) : null;
        if (defaults) {
          config[section] = defaults;
          continue;
        }
        const value = sections[section] ?? {};
        const problem = compilePlain(schema)(value, `config ${section}`);
        if (problem) throw new ConfigError(problem);
        config[section] = value;
      }
      configs.set(def.name, config);
    }
    for (const section of Object.keys(sections)) {
      if (!claimed.has(section)) this.root.warn({ section }, 'config section is not used by any enabled plugin');
    }

    const candidates = this.plugins.filter((p) => p.definition && p.status === 'stopped');
    const { ordered, cyclic } = order(candidates);
    for (const r of cyclic) this.fail(r, 'its service dependencies form a cycle');
    for (const record of ordered) await this.setup(record, configs.get(record.name) ?? {});
  }

  private async setup(record: PluginRecord, config: Record<string, unknown>): Promise<void> {
    const def = record.definition!;
    for (const { ref, optional } of dependencies(def)) {
      if (optional || this.deps.services.has(ref.id)) continue;
      const provider = this.plugins.find((p) => providedRefs(p.definition ?? ({} as never)).some(([, r]) => r.id === ref.id));
      this.fail(
        record,
        provider
          ? `requires service '${ref.id}' from plugin '${provider.name}', which is ${provider.status === 'failed' ? 'failed' : 'not running'}`
          : `requires service '${ref.id}', which no enabled plugin provides`,
      );
      return;
    }
    const log = sdkLogger(this.root, { plugin: def.name });
    const staged = createContext(def, record.packageDir, config, log, this.scheduler.forPlugin(def.name), this.bus.scoped(), this.deps);
    record.staged = staged;
    try {
      const instance = (await def.setup(staged.ctx, staged.deps as never)) ?? {};
      const provided = (instance.provides ?? {}) as Record<string, unknown>;
      for (const [key, ref] of providedRefs(def)) {
        if (provided[key] === undefined) throw new Error(`declares but does not provide service '${ref.id}' (its instance has no '${key}')`);
      }
      for (const key of Object.keys(provided)) if (!(def.provides ?? {})[key]) throw new Error(`provides '${key}' without declaring it in 'provides'`);
      for (const [key, ref] of providedRefs(def)) this.deps.services.provide(ref.id, provided[key], def.name);
      record.instance = instance;
      this.deps.registry.commit(staged.entries);
      record.status = 'running';
    } catch (err) {
      this.rollback(record);
      this.fail(record, `setup failed: ${(err as Error)?.message ?? String(err)}`);
    }
  }

  private rollback(record: PluginRecord): void {
    const staged = record.staged;
    if (!staged) return;
    staged.scheduler.stopAll();
    staged.events.dispose();
    this.deps.services.withdraw(record.name);
    this.deps.catalog.dropPlugin(record.name);
    this.deps.settings.drop(record.name);
    for (const journal of staged.journals.values()) journal.close();
  }

  /** Runs `start` of every plugin set up, in dependency order, then arms their jobs. */
  async start(): Promise<void> {
    for (const record of this.running()) {
      try {
        await record.instance?.start?.();
        record.staged!.scheduler.startAll();
        this.bus.emit('plugin.started', { name: record.name });
      } catch (err) {
        this.fail(record, `start failed: ${(err as Error)?.message ?? String(err)}`);
        this.deps.registry.removePlugin(record.name);
        this.rollback(record);
      }
    }
  }

  async stop(): Promise<void> {
    // The always-loaded plugins stop last: every other plugin may write audit records while it stops.
    const running = [...this.running()].reverse();
    const last = running.filter((r) => ALWAYS_LOADED.includes(r.name));
    for (const record of [...running.filter((r) => !last.includes(r)), ...last]) {
      try {
        record.staged!.scheduler.stopAll();
        await record.instance?.stop?.();
        for (const close of record.staged!.closers.reverse()) await close();
        record.staged!.events.dispose();
        for (const journal of record.staged!.journals.values()) journal.close();
        record.status = 'stopped';
      } catch (err) {
        this.root.error({ plugin: record.name, error: String(err) }, 'plugin stop failed');
      }
    }
  }
}
