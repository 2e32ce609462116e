/**
 * Reading the audit journal: the endpoints' filters turned into a search of the journal (lists) or into SQL
 * with bound parameters (one event, stats, export), the visibility rule for non-admins, and row → JSON mapping.
 * Every value is bound; only column names from the fixed list below are ever written into SQL text.
 */
import type { Principal, SqlDatabase, SqlStatement } from '@agent/sdk';
import type { AuditEventRow, AuditSearchQuery, IdentityService } from '../api.js';

export interface AuditFilter {
  actor_id?: string;
  actor_type?: 'user' | 'api_key' | 'system';
  action?: string;
  resource_type?: string;
  resource_id?: string;
  deployment?: string;
  success?: boolean;
  client_ip?: string;
  start_time?: string;
  end_time?: string;
}

export type AuditRow = AuditEventRow;

export const COLUMNS =
  'id, time, time_ms, actor_type, actor_id, actor_name, action, resource_type, resource_id, deployment, success, status, client_ip, detail';

export function toView(row: AuditRow) {
  let detail: Record<string, unknown> | null = null;
  if (row.detail) {
    try {
      detail = JSON.parse(row.detail) as Record<string, unknown>;
    } catch {
      detail = { raw: row.detail };
    }
  }
  return {
    id: row.id,
    time: row.time,
    actor_type: row.actor_type,
    actor_id: row.actor_id,
    actor_name: row.actor_name,
    action: row.action,
    resource_type: row.resource_type,
    resource_id: row.resource_id,
    deployment: row.deployment,
    success: row.success === 1,
    status: row.status,
    client_ip: row.client_ip,
    detail,
  };
}

export interface Where {
  sql: string;
  params: unknown[];
}

const EQUALS: (keyof AuditFilter)[] = ['actor_id', 'actor_type', 'action', 'resource_type', 'resource_id', 'deployment', 'client_ip'];

/** The actor ids of a principal's own actions: the user and each of its keys (a key alone: itself). */
function ownActorIds(principal: Principal, identity: IdentityService): string[] {
  return principal.user_id === null
    ? [principal.id]
    : [`user:${principal.user_id}`, ...identity.apiKeys.list({ user_id: principal.user_id }).map((k) => `api_key:${k.id}`)];
}

/**
 * What a non-admin may read, as the clauses of a core search. Undefined for an admin: everything. A global
 * principal: events about any deployment, and its own actions (as the user or through any of its keys). A principal
 * limited to its deployments (a scoped user, a key with a `deployments` list): events about those deployments only.
 * Audit events are deployment-owned or global (tenancy), so not its own actions elsewhere either: a key never sees
 * what its owner did on other deployments or globally (logins, keys, passwords), a scoped user not its global events.
 */
export function searchScope(principal: Principal, identity: IdentityService): AuditSearchQuery['anyOf'] {
  if (principal.isAdmin) return undefined;
  const names = Object.keys(principal.deployments);
  if (!principal.isGlobal) return [{ field: 'deployment', values: names.filter((n) => n !== '*') }];
  const anyOf: NonNullable<AuditSearchQuery['anyOf']> = [{ field: 'actor_id', values: ownActorIds(principal, identity) }];
  if (names.includes('*')) anyOf.push({ field: 'deployment', present: true });
  else if (names.length > 0) anyOf.push({ field: 'deployment', values: names });
  return anyOf;
}

/** The same clauses as SQL (column names come from the clause type's fixed list; values are bound). */
export function scopeSql(anyOf: AuditSearchQuery['anyOf']): Where | null {
  if (!anyOf) return null;
  const parts: string[] = [];
  const params: unknown[] = [];
  for (const clause of anyOf) {
    if ('present' in clause) parts.push(`${clause.field} IS NOT NULL`);
    else if (clause.values.length > 0) {
      parts.push(`${clause.field} IN (${clause.values.map(() => '?').join(',')})`);
      params.push(...clause.values);
    }
  }
  // No clause that can match (a scoped principal without deployments): nothing, as the search answers.
  return { sql: parts.length ? `(${parts.join(' OR ')})` : '0', params };
}

/** The visibility rule of `searchScope` as SQL conditions (null for an admin). */
export const visibility = (principal: Principal, identity: IdentityService): Where | null => scopeSql(searchScope(principal, identity));

/** A filter as a core search (a page of `limit` from `offset`). */
export function toSearch(filter: AuditFilter, anyOf: AuditSearchQuery['anyOf'], page: { limit: number; offset: number; countCap: number }): AuditSearchQuery {
  const { start_time, end_time, ...equals } = filter;
  return {
    equals,
    anyOf,
    ...page,
    start_ms: start_time === undefined ? undefined : Date.parse(start_time),
    end_ms: end_time === undefined ? undefined : Date.parse(end_time),
  };
}

/** Ids bounding a time window (from the core), or null when the window holds no event. */
export type IdRange = { first: number; last: number } | null;

/**
 * SQL conditions of a filter. The table has no column indexes (the journal's postings serve lists): a time window
 * is narrowed to its id range (`range`, from `AuditJournalService.idRange`), which SQLite reads as a rowid range.
 */
export function buildWhere(filter: AuditFilter, scope: Where | null, range?: IdRange): Where {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (range !== undefined) {
    parts.push('id BETWEEN ? AND ?');
    params.push(range?.first ?? 0, range?.last ?? -1);
  }
  for (const key of EQUALS) {
    const value = filter[key];
    if (value !== undefined) {
      parts.push(`${key} = ?`);
      params.push(value);
    }
  }
  if (filter.success !== undefined) {
    parts.push('success = ?');
    params.push(filter.success ? 1 : 0);
  }
  if (filter.start_time !== undefined) {
    parts.push('time_ms >= ?');
    params.push(Date.parse(filter.start_time));
  }
  if (filter.end_time !== undefined) {
    parts.push('time_ms <= ?');
    params.push(Date.parse(filter.end_time));
  }
  if (scope) {
    parts.push(scope.sql);
    params.push(...scope.params);
  }
  return { sql: parts.length ? `WHERE ${parts.join(' AND ')}` : '', params };
}

/** Prepared statements are cached by their SQL text (the shapes are few: one per combination of filters). */
export class StatementCache {
  private readonly cache = new Map<string, SqlStatement>();
  constructor(private readonly db: () => SqlDatabase) {}

  get(sql: string): SqlStatement {
    let stmt = this.cache.get(sql);
    if (!stmt) {
      if (this.cache.size > 500) this.cache.clear();
      stmt = this.db().prepare(sql);
      this.cache.set(sql, stmt);
    }
    return stmt;
  }
}
