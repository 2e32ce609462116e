/**
 * Reading the core's `audit_events` table: filters of spec 4.14 turned into SQL with bound parameters, the
 * visibility rule for non-admins, and row → JSON mapping. Every value is bound; only column names from the
 * fixed list below are ever written into SQL text.
 */
import type { IdentityService, Principal, SqlDatabase, SqlStatement } from '@agent/sdk';

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

export interface AuditRow {
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

export const COLUMNS = 'id, time, time_ms, actor_type, actor_id, actor_name, action, resource_type, resource_id, deployment, success, status, client_ip, detail';

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
    id: row.id, time: row.time, actor_type: row.actor_type, actor_id: row.actor_id, actor_name: row.actor_name, action: row.action,
    resource_type: row.resource_type, resource_id: row.resource_id, deployment: row.deployment, success: row.success === 1,
    status: row.status, client_ip: row.client_ip, detail,
  };
}

export interface Where {
  sql: string;
  params: unknown[];
}

const EQUALS: (keyof AuditFilter)[] = ['actor_id', 'actor_type', 'action', 'resource_type', 'resource_id', 'deployment', 'client_ip'];

/**
 * What a non-admin may read: events about deployments it can access, and its own actions (as the user or through
 * any of its keys). Admins read everything.
 */
export function visibility(principal: Principal, identity: IdentityService): Where | null {
  if (principal.isAdmin) return null;
  const own = principal.user_id === null
    ? [principal.id]
    : [`user:${principal.user_id}`, ...identity.apiKeys.list({ user_id: principal.user_id }).map((k) => `api_key:${k.id}`)];
  const parts = [`actor_id IN (${own.map(() => '?').join(',')})`];
  const params: unknown[] = [...own];
  const names = Object.keys(principal.deployments);
  if (names.includes('*')) parts.push('deployment IS NOT NULL');
  else if (names.length > 0) {
    parts.push(`deployment IN (${names.map(() => '?').join(',')})`);
    params.push(...names);
  }
  return { sql: `(${parts.join(' OR ')})`, params };
}

export function buildWhere(filter: AuditFilter, scope: Where | null): Where {
  const parts: string[] = [];
  const params: unknown[] = [];
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
