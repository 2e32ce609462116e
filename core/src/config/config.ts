/**
 * Agent configuration: `agent.yaml` (or `--config` / `AGENT_CONFIG`), every key with a default, then environment
 * overrides: the shortcuts `AGENT_LISTEN`, `AGENT_DATA_DIR`, `AGENT_ADMIN_PASSWORD`, `AGENT_LOG_LEVEL`, `AGENT_LOG_FORMAT`, and
 * `AGENT__<section>__<key>=<yaml value>` for any key. Top-level sections other than the core's belong to plugins,
 * which validate their own.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
// Bundled with the core (scripts/lib.mjs), where it loads in a fraction of the time of its many module files.
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { parseDuration, parseSize } from './units.js';
import { compilePlain } from '../openapi/validation.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface CoreConfig {
  listen: { host: string; port: number; text: string };
  data_dir: string;
  admin_password: string | null;
  log: { level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent'; format: 'auto' | 'json' | 'pretty' };
  api: { enable_cors: boolean; allowed_origins: string[]; body_limit: number; trust_proxy: boolean };
  auth: { token_ttl: number; login_max_failures: number; login_max_failures_per_ip: number; lockout: number };
  plans: { ttl: number };
  plugins: { enabled: string[]; builtin_dir: string };
}

export interface LoadedConfig {
  core: CoreConfig;
  /** Sections not owned by the core, keyed by top-level name: validated by the plugins that claim them. */
  sections: Record<string, unknown>;
  /** The file read, if any. */
  file: string | null;
  /** Folder relative paths in the file are resolved against. */
  baseDir: string;
}

/**
 * The repository root, where built-in plugins live: the nearest folder above this module whose package.json
 * declares the workspaces (the module runs from core/dist/config, or bundled from core/dist).
 */
export const REPO_ROOT = ((): string => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      if ((JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { workspaces?: unknown }).workspaces) return dir;
    } catch {
      // no package.json here
    }
    const parent = dirname(dir);
    if (parent === dir) return resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
    dir = parent;
  }
})();

const duration = {
  anyOf: [
    { type: 'integer', minimum: 1 },
    { type: 'string', pattern: '^\\d+(ms|s|m|h|d)?$' },
  ],
};

/** A core section: an object of known keys, filled with their defaults when left out. */
const section = (properties: Record<string, unknown>) => ({ type: 'object', additionalProperties: false, default: {}, properties });

const coreSchema = {
  type: 'object',
  additionalProperties: true,
  properties: {
    listen: { type: 'string', default: '127.0.0.1:8090' },
    data_dir: { type: 'string', minLength: 1, default: './data' },
    admin_password: { type: ['string', 'null'], minLength: 8, default: null },
    log: section({
      level: { enum: ['trace', 'debug', 'info', 'warn', 'error', 'silent'], default: 'info' },
      format: { enum: ['auto', 'json', 'pretty'], default: 'auto' },
    }),
    api: section({
      enable_cors: { type: 'boolean', default: false },
      allowed_origins: { type: 'array', items: { type: 'string', pattern: '^https?://[^/\\s]+$' }, default: [] },
      body_limit: {
        anyOf: [
          { type: 'integer', minimum: 1 },
          { type: 'string', pattern: '^\\d+(b|kb|mb|gb)?$' },
        ],
        default: '10mb',
      },
      trust_proxy: { type: 'boolean', default: false },
    }),
    auth: section({
      token_ttl: { ...duration, default: '24h' },
      login_max_failures: { type: 'integer', minimum: 1, default: 5 },
      login_max_failures_per_ip: { type: 'integer', minimum: 1, default: 20 },
      lockout: { ...duration, default: '15m' },
    }),
    plans: section({ ttl: { ...duration, default: '24h' } }),
    plugins: section({
      enabled: { type: 'array', items: { type: 'string', minLength: 1 }, default: ['*'] },
      builtin_dir: { type: 'string', default: '' },
    }),
  },
};

const CORE_KEYS = new Set(Object.keys(coreSchema.properties));

const validateCore = compilePlain(coreSchema);

function parseListen(text: string): CoreConfig['listen'] {
  const m = /^(?:\[([0-9a-fA-F:]+)\]|([^:\s]+)):(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new ConfigError(`config listen: '${text}' is not host:port`);
  return { host: m[1] ?? m[2]!, port, text };
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

function envOverrides(raw: Record<string, unknown>, env: NodeJS.ProcessEnv): void {
  const shortcuts: Record<string, string[]> = {
    AGENT_LISTEN: ['listen'],
    AGENT_DATA_DIR: ['data_dir'],
    AGENT_ADMIN_PASSWORD: ['admin_password'],
    AGENT_LOG_LEVEL: ['log', 'level'],
    AGENT_LOG_FORMAT: ['log', 'format'],
  };
  for (const [name, path] of Object.entries(shortcuts)) {
    const value = env[name];
    if (value !== undefined && value !== '') setPath(raw, path, value);
  }
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('AGENT__') || value === undefined) continue;
    const path = name
      .slice('AGENT__'.length)
      .split('__')
      .map((p) => p.toLowerCase());
    if (path.some((p) => !/^[a-z0-9_]+$/.test(p))) throw new ConfigError(`environment ${name}: not a config key path`);
    let parsed: unknown = value;
    try {
      parsed = parseYaml(value);
    } catch {
      // not YAML: the text as it is
    }
    setPath(raw, path, parsed);
  }
}

function findConfigFile(argv: string[], env: NodeJS.ProcessEnv): { path: string; explicit: boolean } {
  const idx = argv.findIndex((a) => a === '--config' || a.startsWith('--config='));
  if (idx >= 0) {
    const arg = argv[idx]!;
    const value = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : argv[idx + 1];
    if (!value) throw new ConfigError('--config needs a file path');
    return { path: resolve(value), explicit: true };
  }
  if (env.AGENT_CONFIG) return { path: resolve(env.AGENT_CONFIG), explicit: true };
  return { path: resolve('agent.yaml'), explicit: false };
}

export function loadConfig(argv: string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const { path, explicit } = findConfigFile(argv, env);
  let raw: Record<string, unknown> = {};
  let file: string | null = null;
  if (existsSync(path)) {
    file = path;
    let parsed: unknown;
    try {
      parsed = parseYaml(readFileSync(path, 'utf8'));
    } catch (err) {
      // A YAML error says where, on its first line (the next ones quote the file).
      const pos = err instanceof YAMLParseError ? err.linePos?.[0] : undefined;
      throw new ConfigError(`config ${path}${pos ? `:${pos.line}:${pos.col}` : ''}: ${(err as Error).message.split('\n')[0]}`);
    }
    if (parsed !== null && parsed !== undefined) {
      if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new ConfigError(`config ${path}: the top level must be a mapping`);
      raw = parsed as Record<string, unknown>;
    }
  } else if (explicit) {
    throw new ConfigError(`config file ${path} does not exist`);
  }
  envOverrides(raw, env);
  const problem = validateCore(raw, 'config');
  if (problem) throw new ConfigError(problem);
  const baseDir = file ? dirname(file) : process.cwd();
  const r = raw as Record<string, any>;
  const dur = (key: string, value: unknown): number => {
    const seconds = parseDuration(value);
    if (seconds === null || seconds <= 0) throw new ConfigError(`config ${key}: '${String(value)}' is not a duration`);
    return seconds;
  };
  const bodyLimit = parseSize(r.api.body_limit);
  if (bodyLimit === null) throw new ConfigError(`config api.body_limit: '${String(r.api.body_limit)}' is not a size`);
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  const core: CoreConfig = {
    listen: parseListen(String(r.listen)),
    data_dir: abs(String(r.data_dir)),
    admin_password: r.admin_password ?? null,
    log: r.log,
    api: { ...r.api, body_limit: bodyLimit },
    auth: { ...r.auth, token_ttl: dur('auth.token_ttl', r.auth.token_ttl), lockout: dur('auth.lockout', r.auth.lockout) },
    plans: { ttl: dur('plans.ttl', r.plans.ttl) },
    plugins: { enabled: r.plugins.enabled, builtin_dir: r.plugins.builtin_dir ? abs(r.plugins.builtin_dir) : resolve(REPO_ROOT, 'plugins') },
  };
  const sections = Object.fromEntries(Object.entries(raw).filter(([key]) => !CORE_KEYS.has(key)));
  return { core, sections, file, baseDir };
}
