/**
 * Block postings of the audit journal: for each block of BLOCK_SIZE consecutive ids and each term (a column
 * value), the ascending in-block offsets of the events carrying it. A filtered search intersects a few short
 * arrays per block instead of walking one SQLite index per filter.
 *
 * The terms of a field are grouped in BUCKETS rows per block by a hash of the value: a row write costs about as
 * much as an event row, and high-cardinality fields (resource ids, IPs) would otherwise write one row per value
 * and block (~0.45 rows per event; with buckets ~0.1). A bucket's blob is a sequence of entries in native
 * (little-endian) 16-bit words: byte length of the value (2 words, low first), the value's UTF-8 bytes padded to
 * a whole word, the count n, then n ascending offsets.
 */

/** Ids per block: offsets fit in 16 bits, and a block's postings are a few hundred rows written together. */
export const BLOCK_BITS = 12;
export const BLOCK_SIZE = 1 << BLOCK_BITS;
export const BUCKETS = 64;

/** Term fields, stored as small integers in `audit_postings.field`. */
export const FIELDS = ['actor_id', 'actor_type', 'action', 'resource_type', 'resource_id', 'deployment', 'client_ip', 'success'] as const;
export type Field = (typeof FIELDS)[number];
export const FIELD_CODE: Record<Field, number> = Object.fromEntries(FIELDS.map((f, i) => [f, i])) as Record<Field, number>;
/** Synthetic term "the event is about a deployment" (value ''), for the visibility of a `*` grant. */
export const HAS_DEPLOYMENT = FIELDS.length;
export const FIELD_COUNT = FIELDS.length + 1;

/** The bucket of a value (FNV-1a over its UTF-16 code units). */
export function bucketOf(value: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) h = Math.imul(h ^ value.charCodeAt(i), 0x01000193);
  return (h >>> 0) & (BUCKETS - 1);
}

/**
 * Positions of the term columns in a row array `[id, time, time_ms, actor_type, actor_id, actor_name, action,
 * resource_type, resource_id, deployment, success, status, client_ip, …]` (the INSERT column order), per field code.
 */
export const ROW_POS = [4, 3, 6, 7, 8, 9, 12, 10] as const;
export const ID_POS = 0;
export const TIME_POS = 2;

class Posting {
  ids = new Uint16Array(8);
  n = 0;
  /** UTF-8 length of the value. */
  readonly bytes: number;
  constructor(
    readonly value: string,
    readonly key: number,
  ) {
    this.bytes = Buffer.byteLength(value);
  }
  push(offset: number): void {
    if (this.n === this.ids.length) {
      const grown = new Uint16Array(this.n * 2);
      grown.set(this.ids);
      this.ids = grown;
    }
    this.ids[this.n++] = offset;
  }
}

export interface BucketRow {
  field: number;
  bucket: number;
  terms: Buffer;
}

/** Postings of one block being filled (the writer's open block, or a block rebuilt from its rows). */
export class BlockBuilder {
  private readonly terms: Map<string, Posting>[] = Array.from({ length: FIELD_COUNT }, () => new Map());
  private readonly buckets: Posting[][] = Array.from({ length: FIELD_COUNT * BUCKETS }, () => []);
  private readonly dirty = new Uint8Array(FIELD_COUNT * BUCKETS);
  private touched: number[] = [];
  n = 0;
  minTime = Infinity;
  maxTime = -Infinity;
  /** Times never decreased from one added row to the next (rows are added in id order). */
  ordered = true;

  constructor(readonly block: number) {}

  /** Adds the row at `o` of a flat array of rows (`ROW_POS` layout). */
  add(rows: unknown[], o: number): void {
    const offset = (rows[o + ID_POS] as number) & (BLOCK_SIZE - 1);
    const time = rows[o + TIME_POS] as number;
    if (time < this.maxTime) this.ordered = false;
    if (time < this.minTime) this.minTime = time;
    if (time > this.maxTime) this.maxTime = time;
    this.n++;
    for (let f = 0; f < ROW_POS.length; f++) {
      const v = rows[o + ROW_POS[f]!];
      if (v === null || v === undefined) continue;
      this.term(f, f === FIELD_CODE.success ? (v ? '1' : '0') : String(v), offset);
    }
    if (rows[o + ROW_POS[FIELD_CODE.deployment]] != null) this.term(HAS_DEPLOYMENT, '', offset);
  }

  private term(field: number, value: string, offset: number): void {
    const map = this.terms[field]!;
    let p = map.get(value);
    if (!p) {
      p = new Posting(value, field * BUCKETS + bucketOf(value));
      map.set(value, p);
      this.buckets[p.key]!.push(p);
    }
    p.push(offset);
    const key = p.key;
    if (this.dirty[key] === 0) {
      this.dirty[key] = 1;
      this.touched.push(key);
    }
  }

  /** Whether buckets changed since the last `takeTouched`. */
  get pending(): boolean {
    return this.touched.length > 0;
  }

  /** The buckets changed since the last call, encoded. */
  takeTouched(): BucketRow[] {
    const out = this.touched.map((key) => {
      this.dirty[key] = 0;
      return { field: Math.floor(key / BUCKETS), bucket: key % BUCKETS, terms: encode(this.buckets[key]!) };
    });
    this.touched = [];
    return out;
  }
}

function encode(postings: Posting[]): Buffer {
  let words = 0;
  for (const p of postings) words += 2 + ((p.bytes + 1) >> 1) + 1 + p.n;
  // Its own ArrayBuffer (not a pool slice), so the word view below is aligned.
  const buf = Buffer.from(new ArrayBuffer(words * 2));
  const w16 = new Uint16Array(buf.buffer);
  let w = 0;
  for (const p of postings) {
    w16[w] = p.bytes & 0xffff;
    w16[w + 1] = p.bytes >>> 16;
    w += 2;
    buf.write(p.value, w * 2, 'utf8');
    w += (p.bytes + 1) >> 1;
    w16[w++] = p.n;
    w16.set(p.ids.subarray(0, p.n), w);
    w += p.n;
  }
  return buf;
}

/** Finds a value's offsets in a bucket's blob (`value` as UTF-8 bytes); empty when absent. */
export function find(blob: Buffer | null | undefined, value: Buffer): Uint16Array {
  if (!blob || blob.length === 0) return EMPTY;
  const w16 = words(blob);
  const bytes = new Uint8Array(w16.buffer, w16.byteOffset, w16.byteLength);
  let w = 0;
  while (w < w16.length) {
    const len = w16[w]! + w16[w + 1]! * 0x10000;
    w += 2;
    let same = len === value.length;
    for (let i = 0, b = w * 2; same && i < len; i++) same = bytes[b + i] === value[i];
    w += (len + 1) >> 1;
    const n = w16[w++]!;
    if (same) return w16.subarray(w, w + n);
    w += n;
  }
  return EMPTY;
}

/** A blob as 16-bit words (copied when SQLite's buffer is not 2-byte aligned). */
function words(blob: Buffer): Uint16Array {
  if (blob.byteOffset % 2 === 0) return new Uint16Array(blob.buffer, blob.byteOffset, blob.length >> 1);
  return new Uint16Array(Uint8Array.from(blob).buffer);
}

const EMPTY = new Uint16Array(0);

/** Offsets in both ascending arrays; galloping (binary search) when one is much shorter. */
export function intersect(a: Uint16Array, b: Uint16Array): Uint16Array {
  if (a.length > b.length) [a, b] = [b, a];
  const out = new Uint16Array(a.length);
  let k = 0;
  if (a.length * 16 < b.length) {
    let lo = 0;
    for (let i = 0; i < a.length; i++) {
      const x = a[i]!;
      let hi = b.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (b[mid]! < x) lo = mid + 1;
        else hi = mid;
      }
      if (lo < b.length && b[lo] === x) out[k++] = x;
    }
  } else {
    let j = 0;
    for (let i = 0; i < a.length && j < b.length; i++) {
      const x = a[i]!;
      while (j < b.length && b[j]! < x) j++;
      if (b[j] === x) out[k++] = x;
    }
  }
  return out.subarray(0, k);
}

/** Union of ascending arrays, ascending (a bitmap of the block: lists may overlap). */
export function union(lists: Uint16Array[]): Uint16Array {
  if (lists.length === 1) return lists[0]!;
  const bits = new Uint32Array(BLOCK_SIZE >> 5);
  let total = 0;
  for (const l of lists) {
    total += l.length;
    for (let i = 0; i < l.length; i++) bits[l[i]! >> 5]! |= 1 << (l[i]! & 31);
  }
  const out = new Uint16Array(Math.min(total, BLOCK_SIZE));
  let k = 0;
  for (let w = 0; w < bits.length; w++) {
    let word = bits[w]!;
    while (word !== 0) {
      const bit = 31 - Math.clz32(word & -word);
      out[k++] = (w << 5) | bit;
      word &= word - 1;
    }
  }
  return out.subarray(0, k);
}
