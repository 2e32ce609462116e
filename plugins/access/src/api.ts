/**
 * Contracts the access plugin provides to other plugins.
 *
 * The `identity` service: users, API keys and deployment grants as other plugins see them (the access plugin is
 * also the agent's principal directory). Secrets (password hashes, key hashes) never leave it.
 *
 * The audit journal (reading side): the kernel writes records through `auditSink` (`@agent/sdk`), which this
 * plugin provides; plugins that read, count, export or clean up the journal use `auditJournalService`.
 */
import {
  createServiceRef,
  type AccessLevel,
  type Principal,
  type PrincipalInfo,
  type ResourcePolicy,
  type Role,
  type Scope,
  type SqlDatabase,
} from '@agent/sdk';

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

export interface IdentityService {
  users: {
    list(): UserRecord[];
    get(id: number): UserRecord | undefined;
    findByUsername(username: string): UserRecord | undefined;
    create(input: {
      username: string;
      email: string;
      password: string;
      role: Role;
      permissions?: string[];
      scope?: Scope;
      is_active?: boolean;
    }): Promise<UserRecord>;
    /**
     * Changes a user. One that takes rights away (deactivation, a lower role, a narrower scope, a permission
     * withdrawn) signs the user out: its existing tokens stop working, also once it is active again.
     */
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
    create(input: {
      user_id: number;
      name: string;
      description?: string;
      role: Role;
      permissions?: string[];
      deployments?: string[];
      expires_in?: number;
    }): Promise<{ record: ApiKeyRecord; key: string }>;
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
  isValidPermission(permission: string): boolean;
}

export const identityService = createServiceRef<IdentityService>('identity', 'users, API keys and deployment grants');

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
  /** Newest first (highest id first: ids follow time, see `AuditJournalService`). */
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
export interface AuditJournalService {
  /** The journal, with every queued event written. Deleting or updating rows here is allowed (the journal re-indexes). */
  readonly database: SqlDatabase;
  /** A filtered page, newest first, with a bounded total. */
  search(query: AuditSearchQuery): AuditSearchResult;
  /** Bounds of the ids of the events in a time window (inclusive ms), or null when it holds none. */
  idRange(start_ms?: number, end_ms?: number): { first: number; last: number } | null;
}

export const auditJournalService = createServiceRef<AuditJournalService>(
  'access.audit-journal',
  'the audit journal: filtered search, time windows as id ranges, SQL reads',
);
