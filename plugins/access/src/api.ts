/**
 * Contracts the access plugin provides to other plugins.
 *
 * The audit journal (reading side): the kernel writes records through `auditSink` (`@agent/sdk`), which this
 * plugin provides; plugins that read, count, export or clean up the journal use `auditJournalService`.
 */
import { createServiceRef, type SqlDatabase } from '@agent/sdk';

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
