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
export declare const BLOCK_BITS = 12;
export declare const BLOCK_SIZE: number;
export declare const BUCKETS = 64;
/** Term fields, stored as small integers in `audit_postings.field`. */
export declare const FIELDS: readonly ["actor_id", "actor_type", "action", "resource_type", "resource_id", "deployment", "client_ip", "success"];
export type Field = (typeof FIELDS)[number];
export declare const FIELD_CODE: Record<Field, number>;
/** Synthetic term "the event is about a deployment" (value ''), for the visibility of a `*` grant. */
export declare const HAS_DEPLOYMENT: 8;
export declare const FIELD_COUNT: number;
/** The bucket of a value (FNV-1a over its UTF-16 code units). */
export declare function bucketOf(value: string): number;
/**
 * Positions of the term columns in a row array `[id, time, time_ms, actor_type, actor_id, actor_name, action,
 * resource_type, resource_id, deployment, success, status, client_ip, …]` (the INSERT column order), per field code.
 */
export declare const ROW_POS: readonly [4, 3, 6, 7, 8, 9, 12, 10];
export declare const ID_POS = 0;
export declare const TIME_POS = 2;
export interface BucketRow {
    field: number;
    bucket: number;
    terms: Buffer;
}
/** Postings of one block being filled (the writer's open block, or a block rebuilt from its rows). */
export declare class BlockBuilder {
    readonly block: number;
    private readonly terms;
    private readonly buckets;
    private readonly dirty;
    private touched;
    n: number;
    minTime: number;
    maxTime: number;
    /** Times never decreased from one added row to the next (rows are added in id order). */
    ordered: boolean;
    constructor(block: number);
    /** Adds the row at `o` of a flat array of rows (`ROW_POS` layout). */
    add(rows: unknown[], o: number): void;
    private term;
    /** The buckets changed since the last call, encoded. */
    takeTouched(): BucketRow[];
}
/** Finds a value's offsets in a bucket's blob (`value` as UTF-8 bytes); empty when absent. */
export declare function find(blob: Buffer | null | undefined, value: Buffer): Uint16Array;
/** Offsets in both ascending arrays; galloping (binary search) when one is much shorter. */
export declare function intersect(a: Uint16Array, b: Uint16Array): Uint16Array;
/** Union of ascending arrays, ascending (a bitmap of the block: lists may overlap). */
export declare function union(lists: Uint16Array[]): Uint16Array;
//# sourceMappingURL=postings.d.ts.map