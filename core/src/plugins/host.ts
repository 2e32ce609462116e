/**
 * The plugin host: finds the enabled plugins, validates their config sections, orders them by the services they
 * provide and require, runs `setup` then `start`, and stops them in reverse order. A plugin that fails is
 * reported (with its name and the reason) and disabled; the agent keeps running.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AnyPluginDefinition, PluginDirectory, PluginInstance, ServiceRef } from '@agent/sdk';
import { ConfigError } from '../config/config.js';
import { compilePlain, defaultsOf } from '../openapi/validation.js';
import { createContext, dependencies, type ContextDeps, type StagedPlugin } from './context.js';

export interface PluginRecord {
  name: string;
  version: string;
  description: string;
  builtin: boolean;
  source: string;
  packageDir: string;
  status: 'running' | 'failed' | 'stopped';
  error: string | null;
  definition: AnyPluginDefinition | null;
  staged: StagedPlugin | null;
  /** What its setup returned: its services and lifecycle. */
  instance: PluginInstance<Record<string, ServiceRef<unknown>>> | null;
}

export interface Candidate {
  spec: string;
  dir: string;
  builtin: boolean;
}

/** A plugin given as its definition, with its package folder, rather than found on disk (the test harness). */
export interface InlinePlugin {
  definition: AnyPluginDefinition;
  dir: string;
}

/** The record of a plugin found at `c`, before its definition is loaded. */
const unloaded = (c: Candidate): PluginRecord => ({
  name: c.spec,
  version: '',
  description: '',
  builtin: c.builtin,
  source: c.spec,
  packageDir: c.dir,
  status: 'stopped',
  error: null,
  definition: null,
  staged: null,
  instance: null,
});

/** The refs a plugin declares it provides, by the key its instance provides them under. */
const providedRefs = (def: AnyPluginDefinition): [string, ServiceRef<unknown>][] => Object.entries((def.provides ?? {}) as Record<string, ServiceRef<unknown>>);

const isPluginDir = (dir: string): boolean => existsSync(join(dir, 'package.json')) && statSync(dir).isDirectory();

/**
 * Built-ins loaded whatever `plugins.enabled` says, and why: `access` holds the principals (users, API keys,
 * grants) and the audit journal, without which no request can be authenticated or accounted for; `apps` runs the
 * processes of app plugins, which an enabled app plugin needs however it was enabled.
 */
const ALWAYS_LOADED: Record<string, string> = {
  access: 'the agent authenticates and audits through it',
  apps: 'it runs the processes of app plugins',
};

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
  const add = (spec: string, dir: string, builtin: boolean) => {
    if (!found.some((c) => c.dir === dir)) found.push({ spec, dir, builtin });
  };
  const addBuiltin = (n: string) => add(n, join(builtinDir, n), true);
  for (const spec of enabled) {
    if (spec.startsWith('!')) continue;
    if (spec === '*') {
      for (const n of builtins) if (!excluded.has(n)) addBuiltin(n);
    } else if (spec.startsWith('.') || isAbsolute(spec)) {
      const dir = resolve(baseDir, spec);
      if (isPluginDir(dir)) add(spec, dir, false);
      else missing.push({ spec, error: `no plugin package at ${dir}` });
    } else if (/^[a-z][a-z0-9-]*$/.test(spec) && builtins.includes(spec)) {
      if (!excluded.has(spec)) addBuiltin(spec);
    } else {
      try {
        add(spec, dirname(createRequire(join(baseDir, 'agent.yaml')).resolve(`${spec}/package.json`)), false);
      } catch {
        missing.push({ spec, error: `plugin '${spec}' is neither a built-in plugin nor an installed package` });
      }
    }
  }
  for (const [n, because] of Object.entries(ALWAYS_LOADED)) {
    if (excluded.has(n)) missing.push({ spec: `!${n}`, error: `the '${n}' plugin cannot be disabled: ${because}` });
    if (builtins.includes(n)) addBuiltin(n);
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

/** The bundle folder and its manifest: plugin folder name → bundled file and build time. */
export interface BundleManifest {
  dir: string;
  entries: Record<string, { file: string; built: number }>;
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

export function readManifest(builtinDir: string): BundleManifest | null {
  const dir = join(builtinDir, '..', 'core', 'dist', 'builtin');
  try {
    return { dir, entries: JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as BundleManifest['entries'] };
  } catch {
    return null;
  }
}

async function importDefinition(dir: string, bundled: string | null): Promise<{ definition: AnyPluginDefinition; version: string }> {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { main?: string; version?: string };
  const main = bundled ?? join(dir, pkg.main ?? 'dist/index.js');
  if (!existsSync(main)) throw new Error(`${main} does not exist (is the plugin built?)`);
  const definition = ((await import(pathToFileURL(main).href)) as { default?: AnyPluginDefinition }).default;
  if (!definition || typeof definition !== 'object' || typeof definition.setup !== 'function' || typeof definition.name !== 'string') {
    throw new Error(`${main} does not export a plugin (default export of definePlugin)`);
  }
  return { definition, version: definition.version ?? pkg.version ?? '0.0.0' };
}

/** The plugin's config sections: each top-level property of its config schema is a top-level config key. */
function configOf(def: AnyPluginDefinition, sections: Record<string, unknown>, claimed: Map<string, string>): Record<string, unknown> {
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
  return config;
}

/**
 * Dependency order: providers before consumers (required and optional). A cycle closed by optional dependencies
 * only (the deployments plugin uses the backups service when there is one, the backups plugin the deployments
 * service) is broken: an optional service is looked up when it is used, not at setup (see context.ts), so the first
 * plugin of such a cycle whose required dependencies are met is set up first. What is left forms cycles.
 */
function order(records: PluginRecord[]): { ordered: PluginRecord[]; cyclic: PluginRecord[] } {
  const providers = new Map<string, PluginRecord>();
  for (const r of records) for (const [, ref] of providedRefs(r.definition!)) providers.set(ref.id, r);
  const ordered: PluginRecord[] = [];
  const ready = (r: PluginRecord, optionalToo: boolean) =>
    dependencies(r.definition!).every(([, { ref, optional }]) => {
      const p = providers.get(ref.id);
      return !p || p === r || ordered.includes(p) || (optional && !optionalToo);
    });
  for (;;) {
    for (let progress = true; progress;) {
      progress = false;
      for (const r of records) {
        if (ordered.includes(r) || !ready(r, true)) continue;
        ordered.push(r);
        progress = true;
      }
    }
    const next = records.find((r) => !ordered.includes(r) && ready(r, false));
    if (!next) break;
    ordered.push(next);
  }
  return { ordered, cyclic: records.filter((r) => !ordered.includes(r)) };
}

export class PluginHost {
  readonly plugins: PluginRecord[] = [];

  constructor(private readonly deps: ContextDeps) {}

  running(): PluginRecord[] {
    return this.plugins.filter((p) => p.status === 'running');
  }

  failed(): PluginRecord[] {
    return this.plugins.filter((p) => p.status === 'failed');
  }

  private fail(record: PluginRecord, error: string): void {
    record.status = 'failed';
    record.error = error;
    this.deps.root.error({ plugin: record.name, error }, 'plugin disabled');
    this.deps.bus.emit('plugin.failed', { name: record.name, error });
  }

  /** A plugin that could not be found or loaded: listed as failed under the name it was enabled by. */
  private broken(c: Candidate, error: string, msg: string): void {
    this.plugins.push({ ...unloaded(c), status: 'failed', error });
    this.deps.root.error({ plugin: c.spec, error }, msg);
  }

  /**
   * Loads and sets up the enabled plugins, and the `inline` ones after them (already loaded: from then on they are
   * treated as any other). Throws ConfigError for invalid config (the agent must not start).
   */
  async load(enabled: string[], builtinDir: string, baseDir: string, sections: Record<string, unknown>, inline: InlinePlugin[] = []): Promise<void> {
    const { found, missing } = discover(enabled, builtinDir, baseDir);
    for (const m of missing) this.broken({ spec: m.spec, dir: '', builtin: false }, m.error, 'plugin not found');
    const manifest = readManifest(builtinDir);
    const loaded = await Promise.all(
      found.map((c) =>
        importDefinition(c.dir, bundledEntry(c, manifest)).then(
          (l) => ({ c, ...l }),
          (err: unknown) => ({ c, error: (err as Error).message ?? 'unknown error' }),
        ),
      ),
    );
    for (const { definition, dir } of inline) loaded.push({ c: { spec: definition.name, dir, builtin: false }, definition, version: definition.version });
    const claimed = new Map<string, string>();
    const configs = new Map<string, Record<string, unknown>>();
    for (const l of loaded) {
      if ('error' in l) {
        this.broken(l.c, l.error, 'plugin could not be loaded');
        continue;
      }
      const def = l.definition;
      if (this.plugins.some((p) => p.name === def.name)) {
        this.deps.root.error({ plugin: def.name, source: l.c.spec }, 'a plugin with this name is already loaded; this one is ignored');
        continue;
      }
      this.plugins.push({ ...unloaded(l.c), name: def.name, version: l.version, description: def.description ?? '', definition: def });
      configs.set(def.name, configOf(def, sections, claimed));
    }
    for (const section of Object.keys(sections)) {
      if (!claimed.has(section)) this.deps.root.warn({ section }, 'config section is not used by any enabled plugin');
    }

    const { ordered, cyclic } = order(this.plugins.filter((p) => p.definition && p.status === 'stopped'));
    for (const r of cyclic) this.fail(r, 'its service dependencies form a cycle');
    for (const record of ordered) await this.setup(record, configs.get(record.name) ?? {});
  }

  private async setup(record: PluginRecord, config: Record<string, unknown>): Promise<void> {
    const def = record.definition!;
    const { services } = this.deps;
    for (const [, { ref, optional }] of dependencies(def)) {
      if (optional || services.has(ref.id)) continue;
      const provider = this.plugins.find((p) => p.definition && providedRefs(p.definition).some(([, r]) => r.id === ref.id));
      this.fail(
        record,
        provider
          ? `requires service '${ref.id}' from plugin '${provider.name}', which is ${provider.status === 'failed' ? 'failed' : 'not running'}`
          : `requires service '${ref.id}', which no enabled plugin provides`,
      );
      return;
    }
    const staged = (record.staged = createContext(def, record.packageDir, config, this.deps));
    try {
      const instance = (await def.setup(staged.ctx, staged.deps as never)) ?? {};
      const provided = (instance.provides ?? {}) as Record<string, unknown>;
      for (const [key, ref] of providedRefs(def)) {
        if (provided[key] === undefined) throw new Error(`declares but does not provide service '${ref.id}' (its instance has no '${key}')`);
      }
      for (const key of Object.keys(provided)) if (!(def.provides ?? {})[key]) throw new Error(`provides '${key}' without declaring it in 'provides'`);
      for (const [key, ref] of providedRefs(def)) services.provide(ref.id, provided[key], def.name);
      record.instance = instance;
      if (staged.site) this.deps.registry.checkSite(def.name);
      this.deps.registry.commit(staged.entries);
      this.deps.registry.use(def.name, staged.middleware);
      if (staged.site) this.deps.registry.serveSite(def.name, staged.site);
      record.status = 'running';
    } catch (err) {
      this.rollback(record);
      this.fail(record, `setup failed: ${(err as Error)?.message ?? String(err)}`);
    }
  }

  private rollback(record: PluginRecord): void {
    record.staged?.release();
    this.deps.services.withdraw(record.name);
    this.deps.catalog.dropPlugin(record.name);
    this.deps.settings.drop(record.name);
  }

  /** Runs `start` of every plugin set up, in dependency order, then arms their jobs. */
  async start(): Promise<void> {
    for (const record of this.running()) {
      try {
        await record.instance?.start?.();
        record.staged!.scheduler.startAll();
        this.deps.bus.emit('plugin.started', { name: record.name });
      } catch (err) {
        this.fail(record, `start failed: ${(err as Error)?.message ?? String(err)}`);
        this.deps.registry.removePlugin(record.name);
        this.rollback(record);
      }
    }
  }

  async stop(): Promise<void> {
    // The always-loaded plugins stop last: every other plugin may write audit records while it stops.
    const running = this.running().reverse();
    const last = running.filter((r) => Object.hasOwn(ALWAYS_LOADED, r.name));
    for (const record of [...running.filter((r) => !last.includes(r)), ...last]) {
      try {
        record.staged!.scheduler.stopAll();
        await record.instance?.stop?.();
        for (const close of record.staged!.closers.reverse()) await close();
        record.staged!.release();
        record.status = 'stopped';
      } catch (err) {
        this.deps.root.error({ plugin: record.name, error: String(err) }, 'plugin stop failed');
      }
    }
  }

  /** What the running plugins offer: deployables (their config schemas compiled on first use), apps and doctor checks. */
  directory(): PluginDirectory {
    const validators = new Map<string, (value: unknown, prefix: string) => string | null>();
    return {
      checks: () => this.running().flatMap((p) => p.staged!.checks.map((check) => ({ plugin: p.name, check }))),
      deployable: (name) => {
        const plugin = this.running().find((p) => p.name === name);
        if (!plugin) return undefined;
        const deployable = plugin.definition!.deployable;
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
      apps: () =>
        this.running().flatMap((p) =>
          p.definition!.app
            ? [{ plugin: p.name, packageDir: p.packageDir, app: p.definition!.app, config: p.staged!.ctx.config as Record<string, unknown> }]
            : [],
        ),
    };
  }
}
