/**
 * Services the core itself provides. Any plugin may `get` them without listing them in `requires`.
 * They expose what the principal directory needs from the kernel and the settings registry, so the plugins that
 * serve their endpoints never touch core files. (The audit journal is provided by a plugin, see `audit.ts`; so is
 * the directory of app processes, see `app-plugins.ts`.)
 */
import type { TObject, Static } from '@sinclair/typebox';
import { createServiceRef } from './services.js';
import type { AuthKernel } from './principal-directory.js';
export type { ResourcePolicy } from './principal-directory.js';
import type { DoctorCheck } from './doctor.js';
import type { AppPlugin } from './app-plugins.js';

export interface SettingDefinition {
  plugin: string;
  schema: TObject;
  /** Keys that only take effect after a restart. */
  restart: string[];
  /** Keys whose values are secrets (masked on read). */
  secret: string[];
  /** Keys that need a permission beyond `settings:write` to change, e.g. `{host_safety: 'host-safety:write'}`. */
  permissions: Record<string, string>;
}

export interface SettingsRegistry {
  definitions(): SettingDefinition[];
  /** Every plugin's settings, secrets masked. */
  values(): Record<string, Record<string, unknown>>;
  /** Validates and applies a partial update `{plugin: {key: value}}`; throws HttpError 400 on a bad key/value. */
  update(patch: Record<string, Record<string, unknown>>): Promise<{ applied: string[]; restart_required: string[] }>;
}

export interface PluginSettings<T extends TObject> {
  get(): Static<T>;
  set(patch: Partial<Static<T>>): Promise<void>;
  onChange(listener: (value: Static<T>) => void): () => void;
}

/** What a running plugin offers to deploy (`deployable` of its definition), its config checked by the core. */
export interface DeployableOffer {
  plugin: string;
  summary: string;
  /** Checks (and completes with defaults) a config; the problem, or null. */
  validate(config: Record<string, unknown>): string | null;
  render(
    config: Record<string, unknown>,
  ):
    | { compose_content: string; env_vars?: { key: string; value: string }[] }
    | Promise<{ compose_content: string; env_vars?: { key: string; value: string }[] }>;
}

export interface PluginDirectory {
  /** What a running plugin offers to deploy: null when it offers nothing, undefined when no such plugin runs. */
  deployable(plugin: string): DeployableOffer | null | undefined;
  /** The doctor checks the running plugins added with `ctx.doctor`, in the order the plugins were loaded. */
  checks(): { plugin: string; check: DoctorCheck }[];
  /** The running plugins that are apps, in start-up order. */
  apps(): AppPlugin[];
}

export const coreServices = {
  auth: createServiceRef<AuthKernel>('core.auth', 'token signing, the permission catalogue and the login settings (for the principal directory)'),
  settings: createServiceRef<SettingsRegistry>('core.settings', 'the agent settings registry'),
  plugins: createServiceRef<PluginDirectory>('core.plugins', 'what the running plugins offer (their deployables, apps and doctor checks)'),
} as const;
