/**
 * The traffic journal (SQLite): one row per request nginx served through an agent server, indexed for the
 * list filters. Inserts are batched in transactions (the ingester hands over whole reads).
 */
import { errors, type SqlDatabase, type SqlStatement } from '@agent/sdk';
import { pathMatcher, requiredPiece } from './pattern.js';
import { byRequests, RollupDelta, scopeClauses, TrafficRollups, type RollupRow } from './rollups.js';
import type { TrafficRecord } from '../api.js';

/** A parsed access-log line (the type belongs to the traffic stream's contract, in api.ts). */
export type { TrafficRecord };

export interface TrafficFilter {
  deployment?: string;
  /** Only these deployments (principals limited to some); undefined: all, with unknown hosts' rows. */
  deployments?: string[];
  method?: string;
  status_group?: string;
  status_code?: number;
  source_ip?: string;
  path?: string;
  host?: string;
  start_ms?: number;
  end_ms?: number;
}

export interface TrafficRow {
  id: number;
  time: string;
  deployment: string | null;
  host: string;
  method: string;
  path: string;
  status: number;
  bytes: number;
  duration_ms: number;
  source_ip: string;
  user_agent: string;
}

interface RawRow {
  id: number;
  time_ms: number;
  deployment: string;
  host: string;
  method: string;
  path: string;
  status: number;
  bytes: number;
  duration_ms: number;
  source_ip: string;
  user_agent: string;
}

const ROWS_PER_STATEMENT = 50;
/** Rows a retirement moves per transaction (see `retire`). */
const RETIRE_ROWS = 20_000;
/** Matches counted at most for `total` (unless an exact total is asked). */
export const COUNT_CAP = 10_000;
/** Below this many matches, fetching them all through the most selective index and sorting beats a walk. */
const RARE_MATCHES = 1000;
/**
 * Rows per span at most: a time window's total reads only the rows of the (at most two) spans it cuts. Small
 * batches (a trickle of lines) extend the last span up to this size.
 */
const SPAN_ROWS = 1024;
/** Pages of a filter on deployment/status merge one index walk per (deployment, status code) up to this many. */
const MAX_PARTS = 64;
const HOUR_MS = 3_600_000;
/** A path search holds the event loop at most this long at a time (then other work and other searches go first). */
const SLICE_MS = 8;
/**
 * Ids one statement of a path search covers: SQLite's own work between two rows it hands over stays bounded too.
 * With the prefilter (`requiredPiece`), a row costs SQLite up to ≈4 ns per byte of its path (`instr` compares the
 * piece at each position where its first byte appears): 512 rows of 8 kB paths of that byte ≈ 18 ms at worst.
 */
const SLICE_IDS = 16_384;
const PREFILTERED_SLICE_IDS = 512;
/** Distinct values `top` and `unknownDomains` keep a counter for at most (bounded memory whatever the rows hold). */
const TOP_COUNTERS = 10_000;
/** Distinct sources counted per unknown host at most. */
const SOURCES_PER_HOST = 10_000;
/** A path search that has not filled its page after this long is refused (503 SEARCH_TIMEOUT). */
const SEARCH_BUDGET_MS = 10_000;
/** The source index is partitioned by hour: new entries land in the current hour's part, which stays small. */
const HOUR = `time_ms / ${HOUR_MS}`;

/**
 * Layout, chosen so that an insert touches few index pages (ingest rate) and a page walks an index already in
 * the order of the answer (page latency):
 * - rows are kept in log order (`id`), which is time order: nginx stamps each line when it writes it. Pages are
 *   newest first by `id`; the per-value indexes (deployment, status) end with the rowid, so a filtered page walks
 *   one of them backwards and stops after `limit` matches.
 * - `traffic_spans` bounds the ids of every batch by the times it holds, so a time window becomes an id range
 *   (exactly: the time predicate still applies to each row) without a time index.
 * - the source index is (hour, source_ip): with one big (source_ip) index every insert landed on a random page.
 * - `traffic_counts` holds the number of rows per (deployment, method, status), kept by inserts and cleanups in
 *   the same transactions: totals of those filters are exact and read no rows.
 * - `traffic_rollup` and `traffic_unknown_rollup` (rollups.ts) hold per-minute and per-hour aggregates, kept in
 *   the same transactions too: stats and unknown domains read them, not the rows.
 */
/** A filter on deployments and/or status split into index parts (see `parts`). */
interface Parts {
  keys: unknown[][];
  key: string;
  rest: { sql: string; params: unknown[] };
}

/** The rows of one transaction, appended as they come; `finish` writes their counts and spans. */
export interface TrafficAppender {
  append(records: TrafficRecord[]): void;
  finish(): void;
}

interface Span {
  first_id: number;
  last_id: number;
  min_time: number;
  max_time: number;
  rows: number;
}

export class TrafficJournal {
  private readonly insertOne: SqlStatement;
  private readonly insertWide: SqlStatement;
  private readonly bumpCount: SqlStatement;
  private readonly lastSpan: SqlStatement;
  private readonly putSpan: SqlStatement;
  /** Parameters of insertWide, reused. */
  private readonly flat: unknown[] = new Array(ROWS_PER_STATEMENT * 10);
  private readonly insertBatch: (records: TrafficRecord[]) => void;
  private readonly deleteOld: (before: number) => number;
  /** Whose slice runs next, among the searches in progress. */
  private readonly turns = new Turns();
  /** Per-minute and per-hour aggregates that answer `stats` and `unknownDomains` (rollups.ts). */
  readonly rollups: TrafficRollups;

  constructor(readonly db: SqlDatabase) {
    // Index pages of a large journal stay cached between batches (SQLite grows its cache only as it needs it).
    db.pragma('cache_size = -65536');
    db.exec(`
      CREATE TABLE IF NOT EXISTS traffic (
        id INTEGER PRIMARY KEY,
        time_ms INTEGER NOT NULL,
        deployment TEXT NOT NULL,
        host TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        status INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        duration_ms REAL NOT NULL,
        source_ip TEXT NOT NULL,
        user_agent TEXT NOT NULL
      );
      DROP INDEX IF EXISTS traffic_time;
      DROP INDEX IF EXISTS traffic_deployment;
      DROP INDEX IF EXISTS traffic_status;
      DROP INDEX IF EXISTS traffic_ip;
      DROP INDEX IF EXISTS traffic_counts;
      DROP INDEX IF EXISTS traffic_dep_method_status;
      DROP TABLE IF EXISTS traffic_rows;
      DROP INDEX IF EXISTS traffic_by_deployment;
      CREATE INDEX IF NOT EXISTS traffic_by_deployment_status ON traffic (deployment, status);
      CREATE INDEX IF NOT EXISTS traffic_by_status ON traffic (status);
      CREATE INDEX IF NOT EXISTS traffic_by_source ON traffic (${HOUR}, source_ip);
      CREATE TABLE IF NOT EXISTS traffic_spans (first_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL, min_time INTEGER NOT NULL, max_time INTEGER NOT NULL, rows INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS traffic_counts (
        deployment TEXT NOT NULL, method TEXT NOT NULL, status INTEGER NOT NULL, n INTEGER NOT NULL,
        PRIMARY KEY (deployment, method, status)
      ) WITHOUT ROWID;
    `);
    this.migrate();
    this.rollups = new TrafficRollups(db, (start, end) => this.idRange(start, end));
    const cols = '(time_ms, deployment, host, method, path, status, bytes, duration_ms, source_ip, user_agent)';
    const values = (n: number) => Array.from({ length: n }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ');
    // OR FAIL: with the default (ABORT, for the NOT NULL columns) SQLite copies every page a multi-row INSERT
    // touches to a statement journal first, so that it could undo that statement alone: ≈40% of the insert time.
    // A failure throws out of the caller's transaction, which rolls the whole batch back anyway.
    this.insertOne = db.prepare(`INSERT OR FAIL INTO traffic ${cols} VALUES ${values(1)}`);
    // Many rows per statement: far fewer calls into SQLite per line.
    this.insertWide = db.prepare(`INSERT OR FAIL INTO traffic ${cols} VALUES ${values(ROWS_PER_STATEMENT)}`);
    this.bumpCount = db.prepare(
      'INSERT INTO traffic_counts (deployment, method, status, n) VALUES (?, ?, ?, ?) ON CONFLICT (deployment, method, status) DO UPDATE SET n = n + excluded.n',
    );
    this.lastSpan = db.prepare('SELECT first_id, last_id, min_time, max_time, rows FROM traffic_spans ORDER BY first_id DESC LIMIT 1');
    this.putSpan = db.prepare('INSERT OR REPLACE INTO traffic_spans (first_id, last_id, min_time, max_time, rows) VALUES (?, ?, ?, ?, ?)');
    this.insertBatch = db.transaction((records: TrafficRecord[]) => {
      const a = this.appender();
      a.append(records);
      a.finish();
    });
    this.deleteOld = db.transaction((before: number) => {
      // Rows older than `before` can only sit in spans that start before it.
      const hi = (db.prepare('SELECT MAX(last_id) AS hi FROM traffic_spans WHERE min_time < ?').get(before) as { hi: number | null }).hi;
      if (hi === null) return 0;
      const gone = db
        .prepare('SELECT deployment, method, status, COUNT(*) AS n FROM traffic WHERE id <= ? AND time_ms < ? GROUP BY deployment, method, status')
        .all(hi, before) as { deployment: string; method: string; status: number; n: number }[];
      const dec = db.prepare('UPDATE traffic_counts SET n = n - ? WHERE deployment = ? AND method = ? AND status = ?');
      for (const g of gone) dec.run(g.n, g.deployment, g.method, g.status);
      db.prepare('DELETE FROM traffic_counts WHERE n <= 0').run();
      const n = db.prepare('DELETE FROM traffic WHERE id <= ? AND time_ms < ?').run(hi, before).changes;
      this.rollups.prune(before);
      // Spans the cut went through keep their bounds (still valid) with their rows counted again.
      db.prepare('DELETE FROM traffic_spans WHERE max_time < ? AND last_id <= ?').run(before, hi);
      db.prepare(
        `UPDATE traffic_spans SET rows = (SELECT COUNT(*) FROM traffic WHERE id BETWEEN first_id AND last_id) WHERE min_time < ? AND first_id <= ?`,
      ).run(before, hi);
      db.prepare('DELETE FROM traffic_spans WHERE rows = 0').run();
      return n;
    });
  }

  /** Journals written before spans and counts existed: spans of SPAN_ROWS ids and counts from a scan. */
  private migrate(): void {
    const spans = (this.db.prepare('SELECT COUNT(*) AS n FROM traffic_spans').get() as { n: number }).n;
    if (spans > 0) return;
    this.db.transaction(() => {
      this.db
        .prepare(
          `INSERT INTO traffic_spans (first_id, last_id, min_time, max_time, rows)
        SELECT MIN(id), MAX(id), MIN(time_ms), MAX(time_ms), COUNT(*) FROM traffic GROUP BY id / ${SPAN_ROWS}`,
        )
        .run();
      this.db.prepare('DELETE FROM traffic_counts').run();
      this.db
        .prepare(
          'INSERT INTO traffic_counts (deployment, method, status, n) SELECT deployment, method, status, COUNT(*) FROM traffic GROUP BY deployment, method, status',
        )
        .run();
    })();
  }

  add(records: TrafficRecord[]): void {
    if (records.length) this.insertBatch(records);
  }

  /**
   * Appends rows inside a transaction the caller holds (the ingester: one per read of the log, which also saves
   * the log offset). Records can be handed over in small groups and dropped right after: they die young instead
   * of being copied out of V8's young generation, as a whole read's records were.
   */
  appender(): TrafficAppender {
    const counts = new Map<string, { r: TrafficRecord; n: number }>();
    // The rollups change in the same transaction as the rows (written by `finish`).
    const rollup = new RollupDelta();
    let span: Span | undefined;
    let started = false;
    const flat = this.flat;
    const rows = (records: TrafficRecord[]): number => {
      let i = 0;
      let lastId = 0;
      for (; i + ROWS_PER_STATEMENT <= records.length; i += ROWS_PER_STATEMENT) {
        for (let k = 0; k < ROWS_PER_STATEMENT; k++) {
          const r = records[i + k]!;
          const o = k * 10;
          flat[o] = r.time_ms;
          flat[o + 1] = r.deployment;
          flat[o + 2] = r.host;
          flat[o + 3] = r.method;
          flat[o + 4] = r.path;
          flat[o + 5] = r.status;
          flat[o + 6] = r.bytes;
          flat[o + 7] = r.duration_ms;
          flat[o + 8] = r.source_ip;
          flat[o + 9] = r.user_agent;
        }
        lastId = Number(this.insertWide.run(...flat).lastInsertRowid);
      }
      for (; i < records.length; i++) {
        const r = records[i]!;
        lastId = Number(
          this.insertOne.run(r.time_ms, r.deployment, r.host, r.method, r.path, r.status, r.bytes, r.duration_ms, r.source_ip, r.user_agent).lastInsertRowid,
        );
      }
      return lastId;
    };
    return {
      append: (records) => {
        if (records.length === 0) return;
        // Rows of one transaction get consecutive ids (one writer, ids = max + 1).
        const firstId = rows(records) - records.length + 1;
        if (!started) {
          started = true;
          // A trickle of small batches extends the last span (up to SPAN_ROWS) rather than adding one each.
          const last = this.lastSpan.get() as Span | undefined;
          if (last && last.last_id === firstId - 1 && last.rows < SPAN_ROWS) span = last;
        }
        for (let x = 0; x < records.length; x++) {
          const r = records[x]!;
          const t = r.time_ms;
          if (span && span.rows < SPAN_ROWS) {
            span.last_id = firstId + x;
            span.rows++;
            if (t < span.min_time) span.min_time = t;
            if (t > span.max_time) span.max_time = t;
          } else {
            if (span) this.writeSpan(span);
            span = { first_id: firstId + x, last_id: firstId + x, min_time: t, max_time: t, rows: 1 };
          }
          rollup.add(r);
          const key = `${r.deployment}\n${r.method}\n${r.status}`;
          const c = counts.get(key);
          if (c) c.n++;
          else counts.set(key, { r, n: 1 });
        }
      },
      finish: () => {
        if (span) this.writeSpan(span);
        for (const { r, n } of counts.values()) this.bumpCount.run(r.deployment, r.method, r.status, n);
        this.rollups.apply(rollup);
      },
    };
  }

  private writeSpan(s: Span): void {
    this.putSpan.run(s.first_id, s.last_id, s.min_time, s.max_time, s.rows);
  }

  /** The ids that can hold rows of a time window (null: none can). */
  private idRange(start?: number, end?: number): { lo: number; hi: number } | null {
    const lo =
      start === undefined ? null : (this.db.prepare('SELECT MIN(first_id) AS v FROM traffic_spans WHERE max_time >= ?').get(start) as { v: number | null }).v;
    const hi =
      end === undefined ? null : (this.db.prepare('SELECT MAX(last_id) AS v FROM traffic_spans WHERE min_time <= ?').get(end) as { v: number | null }).v;
    if ((start !== undefined && lo === null) || (end !== undefined && hi === null)) return null;
    return { lo: lo ?? 0, hi: hi ?? Number.MAX_SAFE_INTEGER };
  }

  /** The hours (newest first) that can hold rows of a time window. */
  private hours(start?: number, end?: number): number[] {
    const r = this.db.prepare('SELECT MIN(min_time) AS min, MAX(max_time) AS max FROM traffic_spans').get() as { min: number | null; max: number | null };
    if (r.min === null || r.max === null) return [];
    const from = Math.floor(Math.max(r.min, start ?? r.min) / HOUR_MS);
    const to = Math.floor(Math.min(r.max, end ?? r.max) / HOUR_MS);
    const out: number[] = [];
    for (let h = to; h >= from; h--) out.push(h);
    return out;
  }

  /**
   * WHERE clause of a filter (null: nothing can match). With `page`, the unary `+` keeps SQLite from choosing the
   * status index for a status range or the method, which would force a sort of every match: pages walk an index
   * whose entries are in id order for one value (deployment, one status code) or the table itself.
   */
  private where(f: TrafficFilter, page = false, ids = true): { sql: string; params: unknown[] } | null {
    const plus = page ? '+' : '';
    const scope = scopeClauses(f);
    const clauses: string[] = scope.clauses;
    const params: unknown[] = scope.params;
    if (f.method) {
      clauses.push(`${plus}method = ?`);
      params.push(f.method);
    }
    if (f.status_code !== undefined) {
      clauses.push('status = ?');
      params.push(f.status_code);
    } else if (f.status_group) {
      const base = Number(f.status_group[0]) * 100;
      clauses.push(`${plus}status BETWEEN ? AND ?`);
      params.push(base, base + 99);
    }
    if (f.source_ip) {
      clauses.push(`source_ip = ?`);
      params.push(f.source_ip);
    }
    if (f.host) {
      clauses.push('host = ?');
      params.push(f.host);
    }
    if (f.start_ms !== undefined || f.end_ms !== undefined) {
      const range = this.idRange(f.start_ms, f.end_ms);
      if (!range) return null;
      // A scan bounds the ids itself, range by range: a second range on the rowid could be the one SQLite seeks by.
      if (ids) {
        clauses.push('id BETWEEN ? AND ?');
        params.push(range.lo, range.hi);
      }
      if (f.start_ms !== undefined) {
        clauses.push('time_ms >= ?');
        params.push(f.start_ms);
      }
      if (f.end_ms !== undefined) {
        clauses.push('time_ms <= ?');
        params.push(f.end_ms);
      }
    }
    return { sql: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params };
  }

  /** Exact count from `traffic_counts`, for filters on deployment, method and status only (else undefined). */
  private countedTotal(f: TrafficFilter): number | undefined {
    if (f.source_ip || f.host || f.path || f.start_ms !== undefined || f.end_ms !== undefined) return undefined;
    const where = this.where(f)!;
    return (this.db.prepare(`SELECT COALESCE(SUM(n), 0) AS n FROM traffic_counts ${where.sql}`).get(...where.params) as { n: number }).n;
  }

  /**
   * One page, newest first, and the number of matches. Totals of deployment/method/status filters are exact and
   * free; other filters count up to `COUNT_CAP` matches (`capped`) unless `exact` is asked. Rare matches (up to
   * RARE_MATCHES) are fetched through the most selective index and sorted; frequent ones by walking an index in
   * id order until the page is full; a source address through its hourly index parts, newest hour first.
   */
  query(f: TrafficFilter, limit: number, offset: number, exact = false): { items: TrafficRow[]; total: number; capped: boolean } {
    // A path pattern is matched in JavaScript, in slices: see `search`.
    if (f.path) throw new Error('a path filter goes through search()');
    const where = this.where(f);
    if (!where) return { items: [], total: 0, capped: false };
    if (f.source_ip) return this.querySource(f, where, limit, offset, exact);
    const parts = this.parts(f);
    let total = this.countedTotal(f) ?? this.windowTotal(f);
    let capped = false;
    if (total === undefined) ({ total, capped } = (parts && this.partsCount(parts, exact)) ?? this.count(where, exact));
    if (total === 0 || (offset >= total && !capped)) return { items: [], total, capped };
    if (parts) return { items: this.mergedPage(parts, limit, offset).map(toRow), total, capped };
    let rows: RawRow[];
    if (where.sql && total <= RARE_MATCHES) {
      rows = this.db
        .prepare(`SELECT * FROM traffic WHERE id IN (SELECT id FROM traffic ${where.sql}) ORDER BY id DESC LIMIT ? OFFSET ?`)
        .all(...where.params, limit, offset) as RawRow[];
    } else {
      const page = this.where(f, true)!;
      rows = this.db.prepare(`SELECT * FROM traffic ${page.sql} ORDER BY id DESC LIMIT ? OFFSET ?`).all(...page.params, limit, offset) as RawRow[];
    }
    return { items: rows.map(toRow), total, capped };
  }

  /**
   * `query` with any filter, `path` included. A path pattern has no index: its rows are read newest first (by id,
   * with the other filters and a prefilter in SQL) and matched by `pathMatcher`, linear in each path, in slices of
   * at most SLICE_MS (and a bounded id range per statement, closed before the slice ends: no cursor stays open
   * across turns). Between
   * slices the event loop serves everything else, and concurrent searches take one slice each in turn. Counting
   * stops past COUNT_CAP (unless `exact`) as in `query`; a search still short of its page after SEARCH_BUDGET_MS
   * is refused with 503 SEARCH_TIMEOUT, one whose page is full answers with the count so far (`capped`).
   */
  async search(
    f: TrafficFilter,
    limit: number,
    offset: number,
    exact = false,
    opts: { sliceMs?: number; budgetMs?: number; onSlice?: (ms: number, rows: number) => void } = {},
  ): Promise<{ items: TrafficRow[]; total: number; capped: boolean }> {
    if (!f.path) return this.query(f, limit, offset, exact);
    const { path, ...rest } = f;
    const match = pathMatcher(path);
    // Rows without a piece every match contains are left out by SQLite (linear: `requiredPiece` says why): a rare
    // pattern reads the journal about as fast as LIKE did. What is left is matched here.
    const piece = requiredPiece(path);
    const need = offset + limit;
    const ids: number[] = [];
    let count = 0;
    const end = await this.scan<{ id: number; path: string }>(
      rest,
      'id, path',
      (row) => {
        if (!match(row.path)) return;
        count++;
        if (count > offset && count <= need) ids.push(row.id);
        return exact || count <= COUNT_CAP || count < need;
      },
      {
        newestFirst: true,
        extra: piece === null ? undefined : { sql: 'instr(lower(path), ?) > 0', params: [piece] },
        span: piece === null ? SLICE_IDS : PREFILTERED_SLICE_IDS,
        sliceMs: opts.sliceMs,
        budgetMs: opts.budgetMs ?? SEARCH_BUDGET_MS,
        onSlice: opts.onSlice,
      },
    );
    if (end === 'timeout') {
      if (count < need)
        throw errors.unavailable(
          `the path search read the traffic journal for ${Math.round((opts.budgetMs ?? SEARCH_BUDGET_MS) / 1000)} s without filling its page: narrow it (deployment, start_time/end_time, status)`,
          'SEARCH_TIMEOUT',
        );
      return { items: this.rowsById(ids).map(toRow), total: count, capped: true };
    }
    const capped = !exact && count > COUNT_CAP;
    return { items: this.rowsById(ids).map(toRow), total: capped ? COUNT_CAP : count, capped };
  }

  /**
   * Hands `each` the rows of a filter (the columns asked), read through the rowid in id ranges (`span` ids per
   * statement, each closed before its slice ends: no cursor stays open across turns), in slices of at most
   * `sliceMs`: one slice per turn of the event loop, whatever the number of scans (`Turns`). NOT INDEXED: a walk
   * of the rowid is already in id order, where an index on the other filters would need a sort of all its rows
   * first. `each` returns false to stop. Ends with 'done' (no rows left), 'stopped', or 'timeout' (past `budgetMs`).
   */
  private async scan<R extends object>(
    f: TrafficFilter,
    columns: string,
    each: (row: R) => boolean | void,
    o: {
      newestFirst?: boolean;
      extra?: { sql: string; params: unknown[] };
      span?: number;
      sliceMs?: number;
      budgetMs?: number;
      onSlice?: (ms: number, rows: number) => void;
    } = {},
  ): Promise<'done' | 'stopped' | 'timeout'> {
    const where = this.where(f, false, false);
    if (!where) return 'done';
    // Two statements: SQLite reads MIN(id) or MAX(id) alone from the rowid's ends, but both at once by a full scan.
    const all = {
      lo: (this.db.prepare('SELECT MIN(id) AS v FROM traffic').get() as { v: number | null }).v,
      hi: (this.db.prepare('SELECT MAX(id) AS v FROM traffic').get() as { v: number | null }).v,
    };
    const window = f.start_ms !== undefined || f.end_ms !== undefined ? this.idRange(f.start_ms, f.end_ms) : { lo: 0, hi: Number.MAX_SAFE_INTEGER };
    if (all.lo === null || all.hi === null || !window) return 'done';
    const lo = Math.max(all.lo, window.lo);
    const hi = Math.min(all.hi, window.hi);
    const conditions = [where.sql.slice('WHERE '.length), o.extra?.sql].filter(Boolean);
    const params = [...where.params, ...(o.extra?.params ?? [])];
    const rows = this.db.prepare(
      `SELECT ${columns} FROM traffic NOT INDEXED WHERE id BETWEEN ? AND ?${conditions.map((c) => ` AND ${c}`).join('')} ORDER BY id ${o.newestFirst ? 'DESC' : 'ASC'}`,
    );
    const span = o.span ?? SLICE_IDS;
    const sliceMs = o.sliceMs ?? SLICE_MS;
    const deadline = o.budgetMs === undefined ? Infinity : performance.now() + o.budgetMs;
    // The next id range starts at `cursor` (its highest id newest first, its lowest oldest first).
    let cursor = o.newestFirst ? hi : lo;
    const left = () => (o.newestFirst ? cursor >= lo : cursor <= hi);
    while (left()) {
      await this.turns.next();
      const started = performance.now();
      let read = 0;
      while (left() && performance.now() - started < sliceMs) {
        const [from, to] = o.newestFirst ? [Math.max(lo, cursor - span + 1), cursor] : [cursor, Math.min(hi, cursor + span - 1)];
        let next = o.newestFirst ? from - 1 : to + 1;
        for (const row of rows.iterate(from, to, ...params) as IterableIterator<R & { id?: number }>) {
          read++;
          if (each(row) === false) {
            o.onSlice?.(performance.now() - started, read);
            return 'stopped';
          }
          // The clock is read every 64 rows: a row costs at most its path's length, so 64 of them stay far below a
          // slice. `id` is among the columns of any scan that may stop inside a range.
          if ((read & 63) === 0 && performance.now() - started >= sliceMs && row.id !== undefined) {
            next = o.newestFirst ? row.id - 1 : row.id + 1;
            break;
          }
        }
        cursor = next;
      }
      o.onSlice?.(performance.now() - started, read);
      if (left() && performance.now() > deadline) return 'timeout';
    }
    return 'done';
  }

  /** Exact total of a filter on a time window alone: whole spans by their row counts, cut spans row by row. */
  private windowTotal(f: TrafficFilter): number | undefined {
    if (f.deployment !== undefined || f.deployments || f.method || f.status_code !== undefined || f.status_group || f.source_ip || f.host || f.path)
      return undefined;
    const start = f.start_ms ?? -Infinity;
    const end = f.end_ms ?? Infinity;
    let total = 0;
    const cut = this.db.prepare('SELECT COUNT(*) AS n FROM traffic WHERE id BETWEEN ? AND ? AND time_ms >= ? AND time_ms <= ?');
    for (const s of this.db
      .prepare('SELECT first_id, last_id, min_time, max_time, rows FROM traffic_spans WHERE max_time >= ? AND min_time <= ?')
      .iterate(start, end) as IterableIterator<{ first_id: number; last_id: number; min_time: number; max_time: number; rows: number }>) {
      if (s.min_time >= start && s.max_time <= end) total += s.rows;
      else total += (cut.get(s.first_id, s.last_id, start, end) as { n: number }).n;
    }
    return total;
  }

  /**
   * A page of a filter on deployments and/or status: the (deployment, status code) pairs that have rows (from
   * `traffic_counts`) each walk their own part of an index newest first for at most offset + limit ids, and the
   * parts are merged. Rare combinations (a deployment's few 5xx) cost as little as frequent ones.
   */
  private mergedPage(p: Parts, limit: number, offset: number): RawRow[] {
    const need = offset + limit;
    const walk = this.db.prepare(`SELECT id FROM traffic WHERE ${p.key}${p.rest.sql} ORDER BY id DESC LIMIT ?`);
    const ids: number[] = [];
    for (const key of p.keys) for (const r of walk.all(...key, ...p.rest.params, need) as { id: number }[]) ids.push(r.id);
    return this.rowsById(ids.sort((a, b) => b - a).slice(offset, need));
  }

  /** Count of a filter on deployments and/or status with other conditions: part by part, up to the cap. */
  private partsCount(p: Parts, exact: boolean): { total: number; capped: boolean } {
    const count = this.db.prepare(
      exact
        ? `SELECT COUNT(*) AS n FROM traffic WHERE ${p.key}${p.rest.sql}`
        : `SELECT COUNT(*) AS n FROM (SELECT 1 FROM traffic WHERE ${p.key}${p.rest.sql} LIMIT ?)`,
    );
    let total = 0;
    for (const key of p.keys) {
      total += (count.get(...key, ...p.rest.params, ...(exact ? [] : [COUNT_CAP + 1 - total])) as { n: number }).n;
      if (!exact && total > COUNT_CAP) return { total: COUNT_CAP, capped: true };
    }
    return { total, capped: false };
  }

  /**
   * The (deployment, status code) pairs — or status codes — a filter on deployments and/or status can match
   * (from `traffic_counts`), the index condition of one pair and the rest of the filter. Undefined when the
   * filter has neither, or has too many pairs.
   */
  private parts(f: TrafficFilter): Parts | undefined {
    const byDeployment = f.deployment !== undefined || f.deployments !== undefined;
    if (!byDeployment && f.status_code === undefined && !f.status_group) return undefined;
    const keyFilter = this.where({
      deployment: f.deployment,
      deployments: f.deployments,
      method: f.method,
      status_code: f.status_code,
      status_group: f.status_group,
    })!;
    const rows = this.db
      .prepare(
        `SELECT DISTINCT ${byDeployment ? 'deployment, ' : ''}status FROM traffic_counts ${keyFilter.sql} ${keyFilter.sql ? 'AND' : 'WHERE'} n > 0 LIMIT ${MAX_PARTS + 1}`,
      )
      .all(...keyFilter.params) as { deployment?: string; status: number }[];
    if (rows.length > MAX_PARTS) return undefined;
    const rest = this.where({ method: f.method, host: f.host, path: f.path, start_ms: f.start_ms, end_ms: f.end_ms }, true) ?? { sql: 'WHERE 0', params: [] };
    return {
      keys: rows.map((r) => (byDeployment ? [r.deployment, r.status] : [r.status])),
      key: byDeployment ? 'deployment = ? AND status = ?' : 'status = ?',
      rest: { sql: rest.sql ? ` AND ${rest.sql.slice('WHERE '.length)}` : '', params: rest.params },
    };
  }

  private rowsById(ids: number[]): RawRow[] {
    if (ids.length === 0) return [];
    return this.db.prepare(`SELECT * FROM traffic WHERE id IN (${ids.map(() => '?').join(',')}) ORDER BY id DESC`).all(...ids) as RawRow[];
  }

  private count(where: { sql: string; params: unknown[] }, exact: boolean): { total: number; capped: boolean } {
    if (exact || !where.sql)
      return { total: (this.db.prepare(`SELECT COUNT(*) AS n FROM traffic ${where.sql}`).get(...where.params) as { n: number }).n, capped: false };
    const n = (this.db.prepare(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM traffic ${where.sql} LIMIT ${COUNT_CAP + 1})`).get(...where.params) as { n: number })
      .n;
    return n > COUNT_CAP ? { total: COUNT_CAP, capped: true } : { total: n, capped: false };
  }

  /** Pages of one source address: hour by hour through (hour, source_ip), newest hour first. */
  private querySource(f: TrafficFilter, where: { sql: string; params: unknown[] }, limit: number, offset: number, exact: boolean) {
    const inHour = this.db.prepare(`SELECT id FROM traffic ${where.sql} AND ${HOUR} = ? ORDER BY id DESC`);
    const need = offset + limit;
    const ids: number[] = [];
    let total = 0;
    let capped = false;
    let full = false;
    let straddle = false;
    for (const hour of this.hours(f.start_ms, f.end_ms)) {
      const found = inHour.all(...where.params, hour) as { id: number }[];
      total += found.length;
      // One more hour once the page is full: lines stamped a moment apart may straddle an hour in log order.
      if (!straddle) {
        if (full) straddle = true;
        for (const r of found) ids.push(r.id);
        if (ids.length >= need) full = true;
      }
      if (straddle && !exact && total > COUNT_CAP) {
        total = COUNT_CAP;
        capped = true;
        break;
      }
    }
    return { items: this.rowsById(ids.sort((a, b) => b - a).slice(offset, offset + limit)).map(toRow), total, capped };
  }

  /**
   * Requests, status groups, bytes and exact latency percentiles per deployment (deployments, time window), from
   * the per-hour and per-minute rollups and at most two minutes of rows: a day of a million rows took seconds
   * read row by row (`statsFromRows`, which gives the same answer and is kept as its reference).
   */
  stats(f: TrafficFilter): Promise<ReturnType<TrafficRollups['stats']>> {
    return Promise.resolve(this.rollups.stats({ deployment: f.deployment, deployments: f.deployments, start_ms: f.start_ms, end_ms: f.end_ms }));
  }

  /**
   * `stats` read from the rows: one pass, in slices of the event loop (`scan`). The reference the rollups are
   * tested against.
   */
  async statsFromRows(f: TrafficFilter) {
    type Acc = { deployment: string | null; requests: number; bytes: number; status: Record<string, number>; durations: number[] };
    const groups = () => ({ '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 }) as Record<string, number>;
    const per = new Map<string, Acc>();
    const all: number[] = [];
    const total = { requests: 0, bytes: 0, status: groups() };
    await this.scan<{ id: number; deployment: string; status: number; bytes: number; duration_ms: number }>(
      f,
      'id, deployment, status, bytes, duration_ms',
      (row) => {
        let s = per.get(row.deployment);
        if (!s) per.set(row.deployment, (s = { deployment: row.deployment || null, requests: 0, bytes: 0, status: groups(), durations: [] }));
        const key = `${Math.floor(row.status / 100)}xx`;
        s.requests++;
        s.bytes += row.bytes;
        s.status[key] = (s.status[key] ?? 0) + 1;
        s.durations.push(row.duration_ms);
        total.requests++;
        total.bytes += row.bytes;
        total.status[key] = (total.status[key] ?? 0) + 1;
        all.push(row.duration_ms);
      },
    );
    // The value a sort would put at floor(p × n), found by selection: O(n) where sorting a day's million
    // durations held the event loop for 100+ ms after the sliced scan.
    const pcts = (values: number[]) => {
      if (values.length === 0) return { p50_ms: null, p95_ms: null };
      const a = Float64Array.from(values);
      const at = (p: number) => select(a, Math.min(a.length - 1, Math.floor(p * a.length)));
      return { p50_ms: at(0.5), p95_ms: at(0.95) };
    };
    const deployments = [...per.values()].sort(byRequests).map(({ durations, ...s }) => ({ ...s, ...pcts(durations) }));
    return { total: { ...total, ...pcts(all) }, deployments };
  }

  /**
   * The most frequent values of `column` (path or source_ip) among a filter's rows, in one sliced pass (`scan`),
   * counted by `HeavyHitters`: exact while there are at most TOP_COUNTERS distinct values, bounded memory and time
   * past that (anyone can make every request's path different).
   */
  async top(f: TrafficFilter, column: 'path' | 'source_ip', limit: number): Promise<{ value: string; requests: number }[]> {
    const counts = new HeavyHitters<null>(TOP_COUNTERS);
    await this.scan<{ id: number; value: string }>(f, `id, ${column} AS value`, (row) => void counts.add(row.value, () => null));
    return counts.top(limit).map(({ key, count }) => ({ value: key, requests: count }));
  }

  /**
   * Requests for host names no deployment owns (the default server), by host, in a time window: from the rollups
   * kept by host (`unknownDomainsFromRows` is the reference). Exact, where the row scan's counters were only exact
   * up to TOP_COUNTERS distinct hosts.
   */
  unknownDomains(f: TrafficFilter, limit: number): Promise<ReturnType<TrafficRollups['unknownDomains']>> {
    return Promise.resolve(this.rollups.unknownDomains({ start_ms: f.start_ms, end_ms: f.end_ms }, limit));
  }

  /** `unknownDomains` from the rows, in one sliced pass (`scan`). */
  async unknownDomainsFromRows(f: TrafficFilter, limit: number) {
    const hosts = new HeavyHitters<{ sources: Set<string>; first: number; last: number }>(TOP_COUNTERS);
    await this.scan<{ id: number; host: string; source_ip: string; time_ms: number }>({ ...f, deployment: '' }, 'id, host, source_ip, time_ms', (row) => {
      const h = hosts.add(row.host, () => ({ sources: new Set(), first: row.time_ms, last: row.time_ms }));
      // Distinct sources counted up to SOURCES_PER_HOST (then the count says "at least").
      if (h.sources.size < SOURCES_PER_HOST) h.sources.add(row.source_ip);
      if (row.time_ms < h.first) h.first = row.time_ms;
      if (row.time_ms > h.last) h.last = row.time_ms;
    });
    return hosts.top(limit).map(({ key, count, value }) => ({ host: key, requests: count, sources: value.sources.size, first: value.first, last: value.last }));
  }

  cleanup(olderThanMs: number): number {
    return this.deleteOld(olderThanMs);
  }

  /**
   * A deleted deployment's rows up to `untilMs` move to its retired name, with their counts: a new deployment of
   * the same name starts with no traffic, and only global principals read the old rows. Status code by status
   * code (each an id-ordered part of the (deployment, status) index), RETIRE_ROWS rows per transaction, yielding
   * between them: a deployment with millions of rows does not hold the event loop (or the ingester) for seconds.
   */
  async retire(name: string, retiredAs: string, untilMs: number, chunk = RETIRE_ROWS): Promise<number> {
    const statuses = (this.db.prepare('SELECT DISTINCT status FROM traffic_counts WHERE deployment = ?').all(name) as { status: number }[]).map(
      (r) => r.status,
    );
    const bound = this.db.prepare(`SELECT id FROM traffic WHERE deployment = ? AND status = ? AND time_ms <= ? ORDER BY id LIMIT 1 OFFSET ?`);
    const groups = this.db.prepare(
      'SELECT method, COUNT(*) AS n FROM traffic WHERE deployment = ? AND status = ? AND time_ms <= ? AND id <= ? GROUP BY method',
    );
    const move = this.db.prepare('UPDATE traffic SET deployment = ? WHERE deployment = ? AND status = ? AND time_ms <= ? AND id <= ?');
    const moving = this.db.prepare(
      'SELECT time_ms, deployment, host, status, bytes, duration_ms, source_ip FROM traffic WHERE deployment = ? AND status = ? AND time_ms <= ? AND id <= ?',
    );
    const dec = this.db.prepare('UPDATE traffic_counts SET n = n - ? WHERE deployment = ? AND method = ? AND status = ?');
    const step = this.db.transaction((status: number, hi: number): number => {
      // Counts and rows change together, under the same predicate.
      for (const g of groups.all(name, status, untilMs, hi) as { method: string; n: number }[]) {
        dec.run(g.n, name, g.method, status);
        this.bumpCount.run(retiredAs, g.method, status, g.n);
      }
      // The rollups too: the rows that move leave the name's buckets and join the retired name's.
      const out = new RollupDelta(-1);
      const into = new RollupDelta();
      for (const r of moving.iterate(name, status, untilMs, hi) as IterableIterator<RollupRow>) {
        out.add(r);
        into.add(r, retiredAs);
      }
      this.rollups.apply(out);
      this.rollups.apply(into);
      const n = move.run(retiredAs, name, status, untilMs, hi).changes;
      this.db.prepare('DELETE FROM traffic_counts WHERE deployment = ? AND n <= 0').run(name);
      return n;
    });
    let moved = 0;
    for (const status of statuses) {
      for (;;) {
        const hi = (bound.get(name, status, untilMs, chunk - 1) as { id: number } | undefined)?.id;
        const n = step(status, hi ?? Number.MAX_SAFE_INTEGER);
        moved += n;
        if (hi === undefined || n === 0) break;
        await new Promise((r) => setImmediate(r));
      }
    }
    return moved;
  }
}

const toRow = (r: RawRow): TrafficRow => ({
  id: r.id,
  time: new Date(r.time_ms).toISOString(),
  deployment: r.deployment || null,
  host: r.host,
  method: r.method,
  path: r.path,
  status: r.status,
  bytes: r.bytes,
  duration_ms: r.duration_ms,
  source_ip: r.source_ip,
  user_agent: r.user_agent,
});

/**
 * The k-th smallest value of `a` (what `a.sort()[k]` is), rearranging `a`: quickselect with a random pivot and a
 * three-way partition (many equal durations cost nothing extra), O(n) expected whatever the values.
 */
export function select(a: Float64Array, k: number): number {
  let lo = 0;
  let hi = a.length - 1;
  while (lo < hi) {
    const pivot = a[lo + Math.floor(Math.random() * (hi - lo + 1))]!;
    // [lo, lt) < pivot, [lt, i) = pivot, (gt, hi] > pivot
    let lt = lo;
    let gt = hi;
    let i = lo;
    while (i <= gt) {
      const v = a[i]!;
      if (v < pivot) {
        a[i++] = a[lt]!;
        a[lt++] = v;
      } else if (v > pivot) {
        a[i] = a[gt]!;
        a[gt--] = v;
      } else i++;
    }
    if (k < lt) hi = lt - 1;
    else if (k > gt) lo = gt + 1;
    else return pivot;
  }
  return a[lo]!;
}

/**
 * Turns of the event loop for long reads: `next()` resolves in a later turn, one waiter per turn, first come first
 * served. However many searches run, the loop serves I/O between any two of their slices.
 */
class Turns {
  private readonly waiting: (() => void)[] = [];
  private armed = false;

  next(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.arm();
    });
  }

  private arm(): void {
    if (this.armed || this.waiting.length === 0) return;
    this.armed = true;
    // An immediate queued from the check phase runs in the next turn, after the poll phase has served I/O.
    setImmediate(() => {
      this.armed = false;
      const resolve = this.waiting.shift();
      this.arm();
      resolve?.();
    });
  }
}

/**
 * Counts of the most frequent keys of a stream in bounded memory: Space-Saving (Metwally, Agrawal, El Abbadi,
 * 2005). Exact while there are at most `capacity` distinct keys; past that, a new key takes the counter of the
 * least counted one (and its count + 1), so any key seen more than n / capacity times in n keys keeps a counter,
 * over-counted by at most that. The counters are a min-heap on their counts: O(log capacity) a key.
 */
export class HeavyHitters<V> {
  private readonly keys: string[] = [];
  private readonly counts: number[] = [];
  private readonly values: V[] = [];
  private readonly at = new Map<string, number>();

  constructor(private readonly capacity: number) {}

  /** Counts `key` once; returns its value (`init()` for a key that takes a counter). */
  add(key: string, init: () => V): V {
    let i = this.at.get(key);
    if (i !== undefined) this.counts[i]!++;
    else if (this.keys.length < this.capacity) {
      i = this.keys.length;
      this.keys.push(key);
      this.counts.push(1);
      this.values.push(init());
      this.at.set(key, i);
      return this.up(i);
    } else {
      i = 0;
      this.at.delete(this.keys[0]!);
      this.keys[0] = key;
      this.counts[0]!++;
      this.values[0] = init();
      this.at.set(key, 0);
    }
    return this.down(i);
  }

  /** The `limit` most counted keys, most first (ties by key). */
  top(limit: number): { key: string; count: number; value: V }[] {
    return this.keys
      .map((key, i) => ({ key, count: this.counts[i]!, value: this.values[i]! }))
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .slice(0, limit);
  }

  private swap(i: number, j: number): void {
    [this.keys[i], this.keys[j]] = [this.keys[j]!, this.keys[i]!];
    [this.counts[i], this.counts[j]] = [this.counts[j]!, this.counts[i]!];
    [this.values[i], this.values[j]] = [this.values[j]!, this.values[i]!];
    this.at.set(this.keys[i]!, i);
    this.at.set(this.keys[j]!, j);
  }

  private up(i: number): V {
    const value = this.values[i]!;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.counts[parent]! <= this.counts[i]!) break;
      this.swap(i, parent);
      i = parent;
    }
    return value;
  }

  private down(i: number): V {
    const value = this.values[i]!;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let least = i;
      if (l < this.keys.length && this.counts[l]! < this.counts[least]!) least = l;
      if (r < this.keys.length && this.counts[r]! < this.counts[least]!) least = r;
      if (least === i) return value;
      this.swap(i, least);
      i = least;
    }
  }
}
