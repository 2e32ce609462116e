/**
 * Filtered pages of the audit journal from the block postings: blocks are walked newest first; in each, the
 * postings of the filter's terms are intersected (shortest first), the visibility clauses united, and a block a
 * time window cuts is narrowed by its rows' times. Postings are read per term for runs of blocks (one key range
 * of `(field, bucket, block)`). Counting stops past the cap, so a page costs about the same whether a hundred
 * or a million events match.
 */
import type { AuditEventRow, AuditSearchQuery, AuditSearchResult } from '../api.js';
import type { Journal } from './layout.js';
import { BLOCK_SIZE, bucketOf, FIELD_CODE, find, HAS_DEPLOYMENT, intersect, union, type Field } from './postings.js';

export interface BlockInfo {
  block: number;
  n: number;
  min: number;
  max: number;
  /** Times never decrease with the id inside the block. */
  ordered: boolean;
}

export const DEFAULT_COUNT_CAP = 10_000;
/** Blocks whose postings one read covers: 8 at first, doubling up to 128. */
const FIRST_RUN = 8;
const MAX_RUN = 128;
const COLUMNS = 'id, time, time_ms, actor_type, actor_id, actor_name, action, resource_type, resource_id, deployment, success, status, client_ip, detail';
const NONE = new Uint16Array(0);

/** A value to look up: its field, bucket and UTF-8 bytes. */
interface Term {
  field: number;
  bucket: number;
  bytes: Buffer;
}
const term = (field: number, value: string): Term => ({ field, bucket: bucketOf(value), bytes: Buffer.from(value, 'utf8') });

/** Per term: its offsets in each block of a run; per clause: the offsets of each of its values found. */
interface Fetched {
  terms: Map<number, Uint16Array>[];
  clauses: Map<number, Uint16Array[]>[];
}

/** A visibility clause: any of these values of one field, grouped by bucket (one row read per bucket). */
interface Clause {
  field: number;
  buckets: Map<number, Buffer[]>;
  /** The buckets as a JSON list. */
  list: string;
}

export class AuditSearcher {
  private readonly bucketIn;
  private readonly bucketsIn;
  private readonly timesIn;
  private readonly idsIn;
  private readonly countIn;
  private readonly probe;
  private readonly rows;

  constructor(
    db: Journal,
    private readonly blocks: () => readonly BlockInfo[],
  ) {
    // One call reads a term's bucket over a run of blocks (consecutive rows of the key): one call per block was
    // most of the cost of a walk, and a search per block about twice a range step.
    this.bucketIn = db.prepare('SELECT block, terms FROM audit_postings WHERE field = ? AND bucket = ? AND block BETWEEN ? AND ?').raw();
    this.bucketsIn = db
      .prepare(
        `SELECT block, bucket, terms FROM audit_postings
      WHERE field = ? AND bucket IN (SELECT value FROM json_each(?)) AND block BETWEEN ? AND ?`,
      )
      .raw();
    this.timesIn = db.prepare('SELECT id FROM audit_events WHERE id BETWEEN ? AND ? AND time_ms BETWEEN ? AND ? ORDER BY id').pluck();
    this.idsIn = db.prepare('SELECT id FROM audit_events WHERE id BETWEEN ? AND ? ORDER BY id DESC LIMIT ? OFFSET ?').pluck();
    this.countIn = db.prepare('SELECT COUNT(*) FROM audit_events WHERE id BETWEEN ? AND ?').pluck();
    this.probe = db.prepare('SELECT id, time_ms FROM audit_events WHERE id BETWEEN ? AND ? ORDER BY id LIMIT 1').raw();
    this.rows = db.prepare(`SELECT ${COLUMNS} FROM audit_events WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id DESC`);
  }

  /** Block bounds of a time window (inclusive), newest first. */
  *inWindow(start: number, end: number): Generator<{ info: BlockInfo; cut: boolean }> {
    const blocks = this.blocks();
    for (let i = blocks.length - 1; i >= 0; i--) {
      const info = blocks[i]!;
      if (info.max < start || info.min > end) continue;
      yield { info, cut: info.min < start || info.max > end };
    }
  }

  search(q: AuditSearchQuery): AuditSearchResult {
    const limit = q.limit;
    const offset = q.offset ?? 0;
    const cap = q.countCap ?? DEFAULT_COUNT_CAP;
    const start = q.start_ms ?? -Infinity;
    const end = q.end_ms ?? Infinity;
    const terms: Term[] = [];
    for (const [field, value] of Object.entries(q.equals ?? {})) {
      if (value === undefined) continue;
      terms.push(term(FIELD_CODE[field as Field], field === 'success' ? (value ? '1' : '0') : String(value)));
    }
    let anyOf: Clause[] | null = null;
    if (q.anyOf) {
      anyOf = [];
      for (const c of q.anyOf) {
        const field = 'present' in c ? HAS_DEPLOYMENT : FIELD_CODE[c.field];
        const values = 'present' in c ? [''] : [...new Set(c.values)];
        if (values.length === 0) continue;
        const buckets = new Map<number, Buffer[]>();
        for (const v of values) {
          const t = term(field, v);
          buckets.set(t.bucket, [...(buckets.get(t.bucket) ?? []), t.bytes]);
        }
        anyOf.push({ field, buckets, list: JSON.stringify([...buckets.keys()]) });
      }
      if (anyOf.length === 0) return { rows: [], ids: [], total: 0, exact: true };
    }
    const filtered = terms.length > 0 || anyOf !== null;
    const need = offset + limit;
    const ids: number[] = [];
    let count = 0;
    const blocks = [...this.inWindow(start, end)];
    let fetched: Fetched | null = null;
    let fetchedTo = 0;
    let run = FIRST_RUN;
    for (let b = 0; b < blocks.length; b++) {
      const { info, cut } = blocks[b]!;
      // Postings are read for runs of blocks, growing: a page found in the newest blocks reads few.
      if (filtered && b === fetchedTo) {
        fetchedTo = Math.min(blocks.length, b + run);
        fetched = this.fetch(
          blocks.slice(b, fetchedTo).map((x) => x.info.block),
          terms,
          anyOf,
        );
        run = Math.min(run * 2, MAX_RUN);
      }
      const base = info.block * BLOCK_SIZE;
      const last = base + BLOCK_SIZE - 1;
      // The ids [lo, hi] of the block inside the window: all of them, or (a block in time order) a binary search.
      let lo = base;
      let hi = last;
      if (cut && info.ordered) {
        if (start > info.min) lo = this.cut(base, last, start);
        if (end < info.max) hi = this.cut(base, last, end + 1) - 1;
        if (lo > hi) continue;
      }
      let list: Uint16Array | null = null; // null: every row in [lo, hi]
      if (filtered) {
        list = this.match(info.block, fetched!, terms.length, anyOf);
        if (lo !== base || hi !== last) list = within(list, lo - base, hi - base);
      }
      if (cut && !info.ordered && (list === null || list.length > 0)) {
        const inTime = this.offsets(this.timesIn.all(base, last, start, end) as number[], base);
        list = list ? intersect(list, inTime) : inTime;
      }
      const n = list ? list.length : lo === base && hi === last ? info.n : (this.countIn.get(lo, hi) as number);
      if (n === 0) continue;
      if (count + n > offset && count < need) {
        const skip = Math.max(0, offset - count);
        const take = Math.min(n - skip, need - count - skip);
        if (list) for (let i = list.length - 1 - skip, k = 0; k < take; i--, k++) ids.push(base + list[i]!);
        else ids.push(...(this.idsIn.all(lo, hi, take, skip) as number[]));
      }
      count += n;
      // Unfiltered counts read no rows (block sizes): they stay exact; filtered ones stop past the cap.
      if (filtered && count > cap && count >= need) break;
    }
    const rows = ids.length === 0 || q.idsOnly ? [] : (this.rows.all(JSON.stringify(ids)) as AuditEventRow[]);
    return count > cap && filtered ? { rows, ids, total: cap, exact: false } : { rows, ids, total: count, exact: true };
  }

  /** The buckets of the terms and clauses in a run of blocks. */
  private fetch(blocks: number[], terms: Term[], anyOf: Clause[] | null): Fetched {
    const lo = blocks[blocks.length - 1]!;
    const hi = blocks[0]!;
    const f: Fetched = { terms: [], clauses: [] };
    for (const t of terms) {
      const byBlock = new Map<number, Uint16Array>();
      for (const [block, blob] of this.bucketIn.all(t.field, t.bucket, lo, hi) as [number, Buffer][]) {
        const l = find(blob, t.bytes);
        if (l.length > 0) byBlock.set(block, l);
      }
      f.terms.push(byBlock);
    }
    for (const c of anyOf ?? []) {
      const byBlock = new Map<number, Uint16Array[]>();
      for (const [block, bucket, blob] of this.bucketsIn.all(c.field, c.list, lo, hi) as [number, number, Buffer][]) {
        for (const bytes of c.buckets.get(bucket)!) {
          const l = find(blob, bytes);
          if (l.length === 0) continue;
          const parts = byBlock.get(block);
          if (parts) parts.push(l);
          else byBlock.set(block, [l]);
        }
      }
      f.clauses.push(byBlock);
    }
    return f;
  }

  /** Offsets in the block of the events matching every term and at least one visibility clause. */
  private match(block: number, f: Fetched, termCount: number, anyOf: Clause[] | null): Uint16Array | null {
    const lists: Uint16Array[] = [];
    for (let i = 0; i < termCount; i++) {
      const l = f.terms[i]!.get(block);
      if (!l) return NONE;
      lists.push(l);
    }
    lists.sort((a, b) => a.length - b.length);
    let list: Uint16Array | null = lists[0] ?? null;
    for (let i = 1; i < lists.length && list.length > 0; i++) list = intersect(list, lists[i]!);
    if (anyOf && (list === null || list.length > 0)) {
      const parts = f.clauses.flatMap((byBlock) => byBlock.get(block) ?? []);
      const visible = parts.length === 0 ? NONE : union(parts);
      list = list ? intersect(list, visible) : visible;
    }
    return list;
  }

  /**
   * In a block whose times never decrease with the id: the first id from which every row's time is >= `t`
   * (probing the first row at or after a middle id; deleted ids are skipped over).
   */
  private cut(lo: number, hi: number, t: number): number {
    let a = lo;
    let b = hi + 1;
    while (a < b) {
      const mid = Math.floor((a + b) / 2);
      const row = this.probe.get(mid, hi) as [number, number] | undefined;
      if (!row || row[1] >= t) b = mid;
      else a = row[0] + 1;
    }
    return a;
  }

  private offsets(ids: number[], base: number): Uint16Array {
    const out = new Uint16Array(ids.length);
    for (let i = 0; i < ids.length; i++) out[i] = ids[i]! - base;
    return out;
  }
}

/** The part of an ascending list within [from, to]. */
function within(list: Uint16Array | null, from: number, to: number): Uint16Array {
  if (!list) return NONE;
  let a = 0;
  let b = list.length;
  while (a < b) {
    const mid = (a + b) >>> 1;
    if (list[mid]! < from) a = mid + 1;
    else b = mid;
  }
  let c = a;
  let d = list.length;
  while (c < d) {
    const mid = (c + d) >>> 1;
    if (list[mid]! <= to) c = mid + 1;
    else d = mid;
  }
  return list.subarray(a, c);
}
