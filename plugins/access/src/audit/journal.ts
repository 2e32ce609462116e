/**
 * The audit journal. Records are written by group commit: each one joins the open batch; the batch is committed
 * once the current turn of the event loop has queued what it had; then the WAL file is synced to disk
 * (`fdatasync`, in the thread pool) and every record of the batch resolves together. A burst of requests shares
 * one commit, none is answered before its record is durable, and the event loop never waits for the disk: records
 * that come while a sync runs are committed together as soon as it ends (the bigger the batch, the less work per
 * record). Readers (`database`, `search`) commit the open batch at once. Layout and invariants: layout.ts;
 * postings: postings.ts.
 */
import { closeSync, fdatasync, openSync } from 'node:fs';
import type { AuditEventInput, AuditSink, SqlDatabase } from '@agent/sdk';
import type { AuditJournalService, AuditSearchQuery, AuditSearchResult } from '../api.js';
import { DERIVED, INDEX_COLUMNS, INSERT_COLUMNS, LAYOUT_VERSION, ROW_WIDTH, SCHEMA, type Journal } from './layout.js';
import { BLOCK_SIZE, BlockBuilder, BUCKETS, FIELD_COUNT } from './postings.js';
import { AuditSearcher, type BlockInfo } from './search.js';
import { adoptLegacyJournal } from './legacy.js';

export type { Journal };

/** A batch committed at once beyond this many records (a flood from one turn of the event loop). */
const FLUSH_BATCH = 50_000;
/** Rows per INSERT statement: far fewer calls into SQLite per event. */
const ROWS_PER_STATEMENT = 50;
/**
 * Times never go backwards by less than this (a clock stepped back a little: events keep the last stamp, so
 * ids stay in time order). Beyond, events take the clock's time: answers stay exact (block time bounds), only
 * the order of those events is by id.
 */
const MAX_HOLD_MS = 10_000;
/** The journal's page cache in KiB, about SQLite's own default (the constructor says why it is small). */
export const AUDIT_CACHE_KIB = 2048;

/** The records waiting for one commit, and the promise they all resolve with. */
interface Batch {
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

function newBatch(): Batch {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A record nobody waits for must not end the process when its commit fails (the kernel logs the failure).
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

export class AuditJournal implements AuditSink, AuditJournalService {
  /** Queued events, ROW_WIDTH values each in INSERT order (the id is filled in when written). */
  private queue: unknown[] = [];
  /** The batch the queued events belong to (null while none is queued). */
  private batch: Batch | null = null;
  private scheduled = false;
  /** Highest id ever assigned (AUTOINCREMENT: ids are not reused) and highest id indexed in the postings. */
  private lastId = 0;
  private indexedTo = 0;
  private lastStamp = 0;
  private isoMs = NaN;
  private iso = '';
  /** Postings of the newest block, kept in memory: a reader's flush (or the end of the block) writes the terms it touched. */
  private open: BlockBuilder | null = null;
  /** Every non-empty block, ascending (mirrors `audit_blocks`). */
  private blocks: BlockInfo[] = [];
  private readonly s;
  private readonly write: (rows: unknown[], external: boolean, index: boolean) => void;
  private readonly searcher: AuditSearcher;
  /** The WAL file (null: not in WAL mode), its descriptor once opened, and the batches committed but not yet synced. */
  private readonly wal: string | null;
  private walFd: number | null = null;
  private unsynced: Batch[] = [];
  private syncing: Promise<void> | null = null;

  /** `legacyPath`: an older agent's journal whose events this one takes over at open (legacy.ts). */
  constructor(
    private readonly db: Journal,
    legacyPath?: string,
  ) {
    const hasLayout = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_layout'").get() !== undefined;
    let current = hasLayout && (db.prepare('SELECT version FROM audit_layout').pluck().get() as number | undefined) === LAYOUT_VERSION;
    if (!current) db.exec(DERIVED);
    db.exec(SCHEMA);
    // Events taken over from an older agent's journal: the derived tables are rebuilt from every row.
    if (legacyPath && adoptLegacyJournal(db, legacyPath) > 0 && current) {
      current = false;
      db.exec(DERIVED);
      db.exec(SCHEMA);
    }
    // Durability comes from syncing the WAL after each commit (`sync`); without a WAL, from every commit itself.
    this.wal = db.pragma('journal_mode', { simple: true }) === 'wal' ? `${db.name}-wal` : null;
    if (!this.wal) db.pragma('synchronous = FULL');
    // The journal only grows, so whatever caches its pages in the agent's memory grows with it until its cap: a
    // memory-mapped page stays resident once read (an export of 1M events left the agent at ~270 MB), and the page
    // cache keeps every page a commit wrote. Reads go through the OS's file cache instead, and the page cache holds
    // the writer's hot pages (the newest rows, the open block's postings): the agent's memory stays flat however
    // large the journal gets, for a few percent more CPU per ingested event.
    db.pragma('mmap_size = 0');
    db.pragma(`cache_size = -${AUDIT_CACHE_KIB}`);
    const values = (n: number) => Array.from({ length: n }, () => `(${Array(ROW_WIDTH).fill('?').join(',')})`).join(',');
    this.s = {
      one: db.prepare(`INSERT INTO audit_events (${INSERT_COLUMNS}) VALUES ${values(1)}`),
      wide: db.prepare(`INSERT INTO audit_events (${INSERT_COLUMNS}) VALUES ${values(ROWS_PER_STATEMENT)}`),
      state: db.prepare('SELECT (SELECT MAX(id) FROM audit_events) AS max_id, EXISTS (SELECT 1 FROM audit_dirty) AS dirty'),
      rowsFrom: db.prepare(`SELECT ${INDEX_COLUMNS} FROM audit_events WHERE id >= ? ORDER BY id LIMIT ${BLOCK_SIZE}`).raw(),
      blockRows: db.prepare(`SELECT ${INDEX_COLUMNS} FROM audit_events WHERE id BETWEEN ? AND ? ORDER BY id`).raw(),
      blockStats: db.prepare(`SELECT COUNT(*) AS n, MIN(time_ms) AS min, MAX(time_ms) AS max, COALESCE(SUM(back), 0) = 0 AS ordered
        FROM (SELECT time_ms, time_ms < LAG(time_ms) OVER (ORDER BY id) AS back FROM audit_events WHERE id BETWEEN ? AND ?)`),
      putPosting: db.prepare('INSERT OR REPLACE INTO audit_postings (block, field, bucket, terms) VALUES (?, ?, ?, ?)'),
      // Every (field, bucket) of the block: one primary-key search each (the key starts with the field).
      dropPostings: db.prepare(`DELETE FROM audit_postings WHERE field IN (${Array.from({ length: FIELD_COUNT }, (_, i) => i).join(',')})
        AND bucket IN (${Array.from({ length: BUCKETS }, (_, i) => i).join(',')}) AND block = ?`),
      putBlock: db.prepare('INSERT OR REPLACE INTO audit_blocks (block, n, min_time, max_time, ordered) VALUES (?, ?, ?, ?, ?)'),
      dropBlock: db.prepare('DELETE FROM audit_blocks WHERE block = ?'),
      dirty: db.prepare('SELECT block, MAX(what) AS what FROM audit_dirty GROUP BY block ORDER BY block'),
      clearDirty: db.prepare('DELETE FROM audit_dirty'),
    };
    this.write = db.transaction((rows: unknown[], external: boolean, index: boolean) => {
      if (external) {
        this.catchUp();
        this.repair();
      }
      this.insert(rows);
      if (index && this.open) this.persist(this.open);
    });
    db.transaction(() => this.load(current))();
    this.searcher = new AuditSearcher(db, () => this.blocks);
  }

  get database(): SqlDatabase {
    this.flush();
    return this.db as unknown as SqlDatabase;
  }

  record(e: AuditEventInput): Promise<void> {
    let now = Date.now();
    if (now < this.lastStamp && this.lastStamp - now < MAX_HOLD_MS) now = this.lastStamp;
    else this.lastStamp = now;
    // A burst records many events in one millisecond: one ISO string for all of them.
    if (now !== this.isoMs) {
      this.isoMs = now;
      this.iso = new Date(now).toISOString();
    }
    const detail = e.detail ? JSON.stringify(e.detail) : null;
    const resourceId = e.resource_id === null || e.resource_id === undefined ? null : String(e.resource_id);
    this.queue.push(
      0,
      this.iso,
      now,
      e.actor_type,
      e.actor_id,
      e.actor_name ?? null,
      e.action,
      e.resource_type,
      resourceId,
      e.deployment ?? null,
      e.success ? 1 : 0,
      e.status ?? null,
      e.client_ip ?? null,
      detail,
    );
    const batch = (this.batch ??= newBatch());
    if (this.queue.length >= FLUSH_BATCH * ROW_WIDTH) this.commitQuietly();
    else if (!this.scheduled && !this.syncing) {
      this.scheduled = true;
      // After the I/O callbacks of this turn: every request that finished in it joins the same commit. While a
      // sync runs, records wait for its end instead (sync), and go in one bigger commit: far less work per record.
      setImmediate(() => this.commitQuietly());
    }
    return batch.promise;
  }

  /** A scheduled commit: its failure reaches the records' promises, not the event loop. */
  private commitQuietly(): void {
    try {
      this.commit(false);
    } catch {
      // Already delivered to the batch's records.
    }
  }

  search(query: AuditSearchQuery): AuditSearchResult {
    this.flush();
    return this.searcher.search(query);
  }

  idRange(start_ms = -Infinity, end_ms = Infinity): { first: number; last: number } | null {
    this.flush();
    let first = -1;
    let last = -1;
    for (const b of this.blocks) {
      if (b.max < start_ms || b.min > end_ms) continue;
      if (first < 0) first = b.block;
      last = b.block;
    }
    return first < 0 ? null : { first: first * BLOCK_SIZE, last: last * BLOCK_SIZE + BLOCK_SIZE - 1 };
  }

  /** Commits the queued events and brings the postings up to date: readers call it first. */
  flush(): void {
    this.commit(true);
  }

  /**
   * Commits the queued events; their promises resolve once the commit is synced. The open block's postings are
   * written only with `index` (readers, the end of a block): the rows alone make a record durable, and the open
   * block is rebuilt from its rows at the next open, so a write commits its rows and little else.
   */
  private commit(index: boolean): void {
    this.scheduled = false;
    const rows = this.queue;
    const batch = this.batch;
    this.queue = [];
    this.batch = null;
    try {
      // Rows another connection appended, deleted or changed are indexed before anything is read or written.
      const state = this.s.state.get() as { max_id: number | null; dirty: number };
      const external = (state.max_id ?? 0) > this.indexedTo || state.dirty === 1;
      if (rows.length === 0 && !external && !(index && this.open?.pending)) return;
      this.write(rows, external, index);
    } catch (err) {
      // The batch's records fail (their requests answer an error). Rolled back: the ids and postings kept in memory
      // may name rows that were not written; start again from what is stored (unless the journal is closed).
      batch?.reject(err);
      if (this.db.open) {
        this.open = null;
        this.indexedTo = 0;
        this.db.transaction(() => this.load(true))();
      }
      throw err;
    }
    if (!batch) return;
    if (!this.wal) batch.resolve();
    else {
      this.unsynced.push(batch);
      this.syncing ??= this.sync();
    }
  }

  /**
   * Syncs the WAL until no committed batch waits; each sync resolves the batches committed before it started. The
   * records that came during a sync are committed together right after it, then synced in turn.
   */
  private async sync(): Promise<void> {
    while (this.unsynced.length > 0) {
      const batches = this.unsynced;
      this.unsynced = [];
      try {
        this.walFd ??= openSync(this.wal!, 'r');
        const fd = this.walFd;
        await new Promise<void>((resolve, reject) => fdatasync(fd, (err) => (err ? reject(err) : resolve())));
        for (const b of batches) b.resolve();
      } catch (err) {
        for (const b of batches) b.reject(err);
      }
      if (this.queue.length > 0) this.commitQuietly();
    }
    this.syncing = null;
  }

  /** Commits and syncs everything recorded so far (the plugin's stop; the host closes the database after it). */
  async close(): Promise<void> {
    this.flush();
    while (this.syncing) await this.syncing;
    if (this.walFd !== null) closeSync(this.walFd);
    this.walFd = null;
  }

  private insert(rows: unknown[]): void {
    for (let o = 0; o < rows.length; o += ROW_WIDTH) rows[o] = ++this.lastId;
    const wide = ROWS_PER_STATEMENT * ROW_WIDTH;
    let o = 0;
    for (; o + wide <= rows.length; o += wide) this.s.wide.run(rows.slice(o, o + wide));
    for (; o < rows.length; o += ROW_WIDTH) this.s.one.run(rows.slice(o, o + ROW_WIDTH));
    for (o = 0; o < rows.length; o += ROW_WIDTH) this.append(rows, o);
  }

  /** Adds a written row (flat array at `o`) to the open block; moving to the next block makes the last one final. */
  private append(rows: unknown[], o: number): void {
    const id = rows[o] as number;
    const block = Math.floor(id / BLOCK_SIZE);
    if (this.open?.block !== block) {
      if (this.open) this.persist(this.open);
      this.open = new BlockBuilder(block);
    }
    this.open.add(rows, o);
    this.indexedTo = id;
  }

  /** At open: indexes the rows of the newest block (rebuilt from its rows, so a crash loses nothing) or all of them. */
  private load(current: boolean): void {
    const maxId = (this.s.state.get() as { max_id: number | null }).max_id ?? 0;
    const seq = (this.db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'audit_events'").get() as { seq: number } | undefined)?.seq ?? 0;
    this.lastId = Math.max(maxId, seq);
    let from = 0;
    if (current) {
      this.blocks = (
        this.db.prepare('SELECT block, n, min_time AS min, max_time AS max, ordered FROM audit_blocks ORDER BY block').all() as (Omit<BlockInfo, 'ordered'> & {
          ordered: number;
        })[]
      ).map((b) => ({ ...b, ordered: b.ordered === 1 }));
      this.repair();
      const newest = this.blocks.at(-1);
      if (newest) from = newest.block * BLOCK_SIZE;
    }
    // Else a journal of an older agent (nine column indexes, dropped by SCHEMA) or of another layout: every row
    // is indexed, once, here (a few seconds per million events).
    this.indexFrom(from);
    if (this.open) this.persist(this.open);
    if (!current) this.db.prepare('INSERT INTO audit_layout (version) VALUES (?)').run(LAYOUT_VERSION);
    for (const b of this.blocks) if (b.max > this.lastStamp) this.lastStamp = b.max;
  }

  /** Indexes every stored row from id `from` on, after the open block's (the next persist writes it). */
  private indexFrom(from: number): void {
    for (;;) {
      const rows = this.s.rowsFrom.all(from) as unknown[][];
      for (const row of rows) this.append(row, 0);
      if (rows.length < BLOCK_SIZE) return;
      from = (rows.at(-1)![0] as number) + 1;
    }
  }

  /** Rows another connection appended after the last indexed one. */
  private catchUp(): void {
    const maxId = (this.s.state.get() as { max_id: number | null }).max_id ?? 0;
    if (maxId <= this.indexedTo) return;
    this.indexFrom(this.indexedTo + 1);
    this.lastId = Math.max(this.lastId, maxId);
  }

  /** Blocks whose rows were deleted or changed (triggers): postings rebuilt from the rows, or only their bounds. */
  private repair(): void {
    const dirty = this.s.dirty.all() as { block: number; what: number }[];
    if (dirty.length === 0) return;
    for (const { block, what } of dirty) {
      if (what === 2 || block === this.open?.block) this.rebuild(block);
      else {
        const lo = block * BLOCK_SIZE;
        const st = this.s.blockStats.get(lo, lo + BLOCK_SIZE - 1) as { n: number; min: number; max: number; ordered: number };
        this.setInfo({ block, n: st.n, min: st.min, max: st.max, ordered: st.ordered === 1 });
      }
    }
    this.s.clearDirty.run();
  }

  private rebuild(block: number): void {
    const b = new BlockBuilder(block);
    const lo = block * BLOCK_SIZE;
    for (const row of this.s.blockRows.all(lo, lo + BLOCK_SIZE - 1) as unknown[][]) b.add(row, 0);
    this.s.dropPostings.run(block);
    this.persist(b);
    if (this.open?.block === block) this.open = b;
  }

  /** Writes the postings a block changed since its last write, and its bounds. */
  private persist(b: BlockBuilder): void {
    for (const p of b.takeTouched()) this.s.putPosting.run(b.block, p.field, p.bucket, p.terms);
    this.setInfo({ block: b.block, n: b.n, min: b.minTime, max: b.maxTime, ordered: b.ordered });
  }

  /** Stores a block's count and bounds (an empty block is dropped), here and in `audit_blocks`. */
  private setInfo(info: BlockInfo): void {
    const blocks = this.blocks;
    let lo = 0;
    let hi = blocks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (blocks[mid]!.block < info.block) lo = mid + 1;
      else hi = mid;
    }
    const found = blocks[lo]?.block === info.block;
    if (info.n === 0) {
      if (found) blocks.splice(lo, 1);
      this.s.dropBlock.run(info.block);
      return;
    }
    if (found) blocks[lo] = info;
    else blocks.splice(lo, 0, info);
    this.s.putBlock.run(info.block, info.n, info.min, info.max, info.ordered ? 1 : 0);
  }
}
