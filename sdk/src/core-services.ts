/**
 * Services the core itself provides. Any plugin may `get` them without listing them in `requires`.
 * They expose what the principal directory needs from the kernel, the audit journal and the settings registry,
 * so the plugins that serve their endpoints never touch core files.
 */
import type { TObject, Static } from '@sinclair/typebox';
import { createServiceRef } from './services.js';
import type { AuthKernel } from './principal-directory.js';
import type { SqlDatabase } from './store.js';
import type { DoctorService } from './doctor.js';

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

export interface AuditEventInput {
  actor_type: 'user' | 'api_key' | 'system';
  actor_id: string;
  actor_name?: string;
  action: string;
  resource_type: string;
  resource_id?: string | null;
  deployment?: string | null;
  success: boolean;
  status?: number | null;
  client_ip?: string | null;
  detail?: Record<string, unknown> | null;
}

/** A row of `audit_events`. */
export interface AuditEventRow {
  id: number;
  time: string;
  time_ms: number;
  actor_type: 'user' | 'api_key' | 'system';
  actor_id: string;
  actor_name: string | null;
  action: string;
  resource_type: string;
  resource_id: string | null;
  deployment: string | null;
  success: number;
  status: number | null;
  client_ip: string | null;
  detail: string | null;
}

/** Columns an audit search matches on (`success` as `true`/`false`). */
export interface AuditTerms {
  actor_id?: string;
  actor_type?: string;
  action?: string;
  resource_type?: string;
  resource_id?: string;
  deployment?: string;
  client_ip?: string;
  success?: boolean;
}

export interface AuditSearchQuery {
  /** Every given column equals its value. */
  equals?: AuditTerms;
  /**
   * At least one clause holds (a non-admin's visibility): `{ field, values }` = the column is one of the values,
   * `{ field: 'deployment', present: true }` = the event is about some deployment. Omitted: no restriction;
   * an empty list matches nothing.
   */
  anyOf?: ({ field: Exclude<keyof AuditTerms, 'success'>; values: string[] } | { field: 'deployment'; present: true })[];
  /** Time window in epoch ms, both ends inclusive. */
  start_ms?: number;
  end_ms?: number;
  limit: number;
  offset?: number;
  /** Matches counted at most (default 10,000): beyond, `total` is `countCap` and `exact` false. */
  countCap?: number;
  /** Only the ids of the page (`rows` stays empty): e.g. every match, for an aggregate in SQL. */
  idsOnly?: boolean;
}

export interface AuditSearchResult {
  /** Newest first (highest id first: ids follow time, see `AuditLog`). */
  rows: AuditEventRow[];
  /** The ids of the page, newest first. */
  ids: number[];
  total: number;
  exact: boolean;
}

/**
 * The audit journal (table `audit_events`: id, time (ISO), time_ms, actor_type, actor_id, actor_name, action,
 * resource_type, resource_id, deployment, success (0/1), status, client_ip, detail (JSON)). Events are stamped
 * so that `time_ms` never decreases as `id` grows (rows from before that rule may be out of order). The table
 * has no per-column indexes: filtered lists go through `search`; SQL readers narrow time windows with `idRange`.
 */
export interface AuditLog {
  record(event: AuditEventInput): void;
  /** The journal, with every queued event written. Deleting or updating rows here is allowed (the core re-indexes). */
  readonly database: SqlDatabase;
  /** A filtered page, newest first, with a bounded total. */
  search(query: AuditSearchQuery): AuditSearchResult;
  /** Bounds of the ids of the events in a time window (inclusive ms), or null when it holds none. */
  idRange(start_ms?: number, end_ms?: number): { first: number; last: number } | null;
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
  auth: createServiceRef<AuthKernel>('core.auth', 'token signing, the permission catalogue and the login settings (for the principal directory)'),
  audit: createServiceRef<AuditLog>('core.audit', 'the audit journal'),
  settings: createServiceRef<SettingsRegistry>('core.settings', 'the agent settings registry'),
  doctor: createServiceRef<DoctorService>('core.doctor', 'the checks of external parts (agentctl doctor)'),
  plugins: createServiceRef<PluginDirectory>('core.plugins', 'what the running plugins offer (their deployables)'),
} as const;
