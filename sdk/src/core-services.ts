/**
 * Services the core itself provides. Any plugin may `get` them without listing them in `requires`.
 * They expose the principals (users, API keys, deployment grants) and the settings registry, so the plugins that
 * serve their endpoints never touch core files. (The audit journal is provided by a plugin: see `audit.ts`.)
 */
import type { TObject, Static } from '@sinclair/typebox';
import { createServiceRef } from './services.js';
import type { AccessLevel, Principal, PrincipalInfo, Role, Scope } from './principal.js';
import type { SqlDatabase } from './store.js';
import type { DoctorService } from './doctor.js';

export interface UserRecord {
  id: number;
  username: string;
  email: string;
  role: Role;
  permissions: string[];
  /** `deployments`: reaches only the deployments granted to it (the default for every role but admin). */
  scope: Scope;
  is_active: boolean;
  created_at: string;
  updated_at: string;
  last_login_at: string | null;
}

export interface ApiKeyRecord {
  id: number;
  user_id: number;
  name: string;
  description: string;
  role: Role;
  permissions: string[];
  deployments: string[];
  key_prefix: string;
  active: boolean;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  last_used_ip: string | null;
}

export interface DeploymentGrant {
  user_id: number;
  deployment: string;
  access_level: AccessLevel;
  granted_at: string;
}

export interface ResourcePolicy {
  name: string;
  description: string;
  /** What the `operator` and `viewer` presets get on this resource. */
  operator: 'none' | 'read' | 'write';
  viewer: 'none' | 'read';
  /** Tenancy: `deployment`-owned, `global`, or `both`. */
  owner: 'deployment' | 'global' | 'both';
  plugin: string;
}

export interface IdentityService {
  users: {
    list(): UserRecord[];
    get(id: number): UserRecord | undefined;
    findByUsername(username: string): UserRecord | undefined;
    create(input: { username: string; email: string; password: string; role: Role; permissions?: string[]; scope?: Scope; is_active?: boolean }): Promise<UserRecord>;
    update(id: number, patch: Partial<Pick<UserRecord, 'email' | 'role' | 'permissions' | 'scope' | 'is_active'>>): Promise<UserRecord>;
    delete(id: number): Promise<void>;
    verifyPassword(id: number, password: string): Promise<boolean>;
    /** Sets the password; all existing tokens of the user stop working unless `keepSessions`. */
    setPassword(id: number, password: string, options?: { keepSessions?: boolean }): Promise<void>;
    /** Why a password is too weak, or null. */
    passwordProblem(password: string, username?: string): string | null;
    /** Issues a fresh token for the user (after a password change, for the session that made it). */
    issueToken(id: number): Promise<string>;
  };
  apiKeys: {
    list(filter?: { user_id?: number }): ApiKeyRecord[];
    get(id: number): ApiKeyRecord | undefined;
    create(input: { user_id: number; name: string; description?: string; role: Role; permissions?: string[]; deployments?: string[]; expires_in?: number }): Promise<{ record: ApiKeyRecord; key: string }>;
    revoke(id: number): Promise<ApiKeyRecord>;
    delete(id: number): Promise<void>;
  };
  grants: {
    list(filter?: { user_id?: number; deployment?: string }): DeploymentGrant[];
    set(user_id: number, deployment: string, level: AccessLevel): Promise<DeploymentGrant>;
    remove(user_id: number, deployment: string): Promise<boolean>;
    /** Drops every grant on a deployment (when it is deleted). */
    removeDeployment(deployment: string): Promise<void>;
    /** Grants `admin` on a new deployment to whoever created it (the key's owner for an API key). */
    grantCreator(principal: Principal, deployment: string): Promise<void>;
  };
  /** Resource policies every plugin declared: the complete permission catalogue. */
  resources(): readonly ResourcePolicy[];
  /** Permissions a role preset grants, e.g. `deployments:write`. */
  rolePermissions(role: Role): string[];
  /** The principal of a user or key as the core would build it now (null when inactive/unknown). */
  principalOf(subject: { user_id: number } | { api_key_id: number }): PrincipalInfo | null;
  /** Every principal id currently able to authenticate (used by the authorization matrix). */
  isValidPermission(permission: string): boolean;
}

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
  render(config: Record<string, unknown>): { compose_content: string; env_vars?: { key: string; value: string }[] } | Promise<{ compose_content: string; env_vars?: { key: string; value: string }[] }>;
}

export interface PluginDirectory {
  /** What a running plugin offers to deploy: null when it offers nothing, undefined when no such plugin runs. */
  deployable(plugin: string): DeployableOffer | null | undefined;
}

export const coreServices = {
  identity: createServiceRef<IdentityService>('core.identity', 'users, API keys and deployment grants'),
  settings: createServiceRef<SettingsRegistry>('core.settings', 'the agent settings registry'),
  doctor: createServiceRef<DoctorService>('core.doctor', 'the checks of external parts (agentctl doctor)'),
  plugins: createServiceRef<PluginDirectory>('core.plugins', 'what the running plugins offer (their deployables)'),
} as const;
