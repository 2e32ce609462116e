/**
 * What the audit endpoints read and delete: a page of events (the journal's search), one event, statistics and the
 * export (SQL over the table, a time window narrowed to its id range), each within what the principal may see; and
 * the deletion of aged events, shared by the cleanup and the retention job.
 */
import { errors, type Principal, type Static } from '@agent/sdk';
import type { AuditJournalService, IdentityService } from '../api.js';
import { exportStream } from './export.js';
import {
  buildWhere,
  COLUMNS,
  scopeSql,
  searchScope,
  StatementCache,
  toSearch,
  toView,
  visibility,
  type AuditFilter,
  type AuditRow,
  type IdRange,
  type Where,
} from './query.js';
import type { ExportBody, ListQuery, StatsQuery } from './schemas.js';

/** Matches up to which stats aggregate the rows the search found, by id (beyond: a scan of the table). */
const STATS_BY_IDS = 100_000;
/** Ids per DELETE statement of a cleanup. */
const DELETE_SLICE = 16_384;
/** Beyond this many matches a filtered list reports `total: COUNT_CAP, total_exact: false` (exact counts: /audit/stats). */
export const COUNT_CAP = 10_000;

export class AuditReads {
  private readonly statements: StatementCache;

  constructor(
    private readonly identity: IdentityService,
    private readonly audit: AuditJournalService,
  ) {
    this.statements = new StatementCache(() => this.db());
  }

  /** Reading `database` commits the events queued, so a read sees every earlier request. */
  private db() {
    return this.audit.database;
  }

  /** A page, newest first, with a total counted up to COUNT_CAP. */
  list(query: Static<typeof ListQuery>, principal: Principal) {
    const { limit = 50, offset = 0, ...filter } = query;
    checkRange(filter);
    // The journal's search walks its block postings newest first and stops counting past COUNT_CAP, so a page
    // costs about the same whether ten thousand or a million events match.
    const found = this.audit.search(toSearch(filter, searchScope(principal, this.identity), { limit, offset, countCap: COUNT_CAP }));
    return { rows: found.rows.map(toView), meta: { total: found.total, limit, offset, total_exact: found.exact } };
  }

  get(id: number, principal: Principal) {
    this.db();
    const where = buildWhere({}, visibility(principal, this.identity));
    const row = this.statements.get(`SELECT ${COLUMNS} FROM audit_events ${where.sql ? `${where.sql} AND` : 'WHERE'} id = ?`).get(...where.params, id) as
      AuditRow | undefined;
    if (!row) throw errors.notFound(`audit event ${id} not found`);
    return toView(row);
  }

  stats(query: Static<typeof StatsQuery>, principal: Principal) {
    const { top = 20, ...filter } = query;
    checkRange(filter);
    const w = this.statsWhere(filter, principal);
    const q = (sql: string, ...extra: unknown[]) => this.statements.get(sql).all(...w.params, ...extra) as Record<string, unknown>[];
    const totals = this.statements.get(`SELECT COUNT(*) AS total, COALESCE(SUM(success), 0) AS ok FROM audit_events ${w.sql}`).get(...w.params) as {
      total: number;
      ok: number;
    };
    return {
      total: totals.total,
      succeeded: totals.ok,
      failed: totals.total - totals.ok,
      by_action: q(
        `SELECT action, COUNT(*) AS count, SUM(1 - success) AS failed FROM audit_events ${w.sql} GROUP BY action ORDER BY count DESC, action LIMIT ?`,
        top,
      ) as never,
      by_actor: q(
        `SELECT actor_id, actor_type, MAX(actor_name) AS actor_name, COUNT(*) AS count FROM audit_events ${w.sql} GROUP BY actor_id, actor_type ORDER BY count DESC, actor_id LIMIT ?`,
        top,
      ) as never,
      by_resource: q(
        `SELECT resource_type, COUNT(*) AS count FROM audit_events ${w.sql} GROUP BY resource_type ORDER BY count DESC, resource_type LIMIT ?`,
        top,
      ) as never,
      // From the totals (success is 0 or 1): one scan less.
      by_success: [
        { success: true, count: totals.ok },
        { success: false, count: totals.total - totals.ok },
      ].filter((r) => r.count > 0),
      per_day: q(
        `SELECT strftime('%Y-%m-%d', time_ms / 1000, 'unixepoch') AS day, COUNT(*) AS count, SUM(1 - success) AS failed FROM audit_events ${w.sql} GROUP BY day ORDER BY day DESC LIMIT 366`,
      ) as never,
    };
  }

  /** The export's stream, oldest first, and the name of its file. */
  export(body: Static<typeof ExportBody>, principal: Principal, signal: AbortSignal) {
    const { format = 'json', limit = 100_000, ...filter } = body;
    checkRange(filter);
    this.db();
    const where = buildWhere(filter, visibility(principal, this.identity), this.rangeOf(filter));
    const batch = this.statements.get(`SELECT ${COLUMNS} FROM audit_events ${where.sql ? `${where.sql} AND` : 'WHERE'} id > ? ORDER BY id LIMIT ?`);
    const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 15);
    return {
      stream: exportStream(format, { batch, params: where.params, limit }, signal),
      contentType: format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8',
      filename: `audit-${stamp}.${format}`,
    };
  }

  /**
   * Deletes events older than `cutoffMs`, a few blocks of ids per statement, within the id range that can hold
   * them. The journal's triggers note the blocks touched; reading `database` again re-indexes them (the postings of
   * emptied blocks are dropped, the block the cut goes through is rebuilt from its rows).
   */
  deleteOlderThan(cutoffMs: number): number {
    this.db();
    const range = this.audit.idRange(undefined, cutoffMs - 1);
    if (!range) return 0;
    const slice = this.statements.get('DELETE FROM audit_events WHERE id BETWEEN ? AND ? AND time_ms < ?');
    let deleted = 0;
    for (let from = range.first; from <= range.last; from += DELETE_SLICE) {
      deleted += slice.run(from, Math.min(range.last, from + DELETE_SLICE - 1), cutoffMs).changes;
    }
    this.db();
    return deleted;
  }

  /** Ids bounding a filter's time window (undefined without one): SQL scans read only that rowid range. */
  private rangeOf(f: AuditFilter): IdRange | undefined {
    return f.start_time === undefined && f.end_time === undefined
      ? undefined
      : this.audit.idRange(f.start_time === undefined ? undefined : Date.parse(f.start_time), f.end_time === undefined ? undefined : Date.parse(f.end_time));
  }

  /**
   * The rows a stats query aggregates: with column filters or a non-admin's visibility, the ids the journal's search
   * finds (up to STATS_BY_IDS: rowid reads instead of scanning the table, which has no column indexes); else, or
   * beyond, the filter in SQL (a time window read as its id range).
   */
  private statsWhere(filter: AuditFilter, principal: Principal): Where {
    const { start_time: _start, end_time: _end, ...equals } = filter;
    const scope = searchScope(principal, this.identity);
    if (scope || Object.values(equals).some((v) => v !== undefined)) {
      const found = this.audit.search({ ...toSearch(filter, scope, { limit: STATS_BY_IDS, offset: 0, countCap: STATS_BY_IDS }), idsOnly: true });
      if (found.exact) return { sql: 'WHERE id IN (SELECT value FROM json_each(?))', params: [JSON.stringify(found.ids)] };
    }
    this.db();
    return buildWhere(filter, scopeSql(scope), this.rangeOf(filter));
  }
}

function checkRange(f: AuditFilter): void {
  if (f.start_time && f.end_time && Date.parse(f.start_time) > Date.parse(f.end_time)) {
    throw errors.badRequest('query.start_time: must not be after end_time', 'VALIDATION_FAILED', { field: 'start_time' });
  }
}
