/**
 * Filtered pages of the audit journal from the block postings: blocks are walked newest first; in each, the
 * postings of the filter's terms are intersected (shortest first), the visibility clauses united, and a block a
 * time window cuts is narrowed by its rows' times. Postings are read per term for runs of blocks (one key range
 * of `(field, bucket, block)`). Counting stops past the cap, so a page costs about the same whether a hundred
 * or a million events match.
 */
import type { AuditSearchQuery, AuditSearchResult } from '@agent/sdk';
import type { Journal } from '../store/journal.js';
export interface BlockInfo {
    block: number;
    n: number;
    min: number;
    max: number;
    /** Times never decrease with the id inside the block. */
    ordered: boolean;
}
export declare const DEFAULT_COUNT_CAP = 10000;
export declare class AuditSearcher {
    private readonly blocks;
    private readonly bucketIn;
    private readonly bucketsIn;
    private readonly timesIn;
    private readonly idsIn;
    private readonly countIn;
    private readonly probe;
    private readonly rows;
    constructor(db: Journal, blocks: () => readonly BlockInfo[]);
    /** Block bounds of a time window (inclusive), newest first. */
    inWindow(start: number, end: number): Generator<{
        info: BlockInfo;
        cut: boolean;
    }>;
    search(q: AuditSearchQuery): AuditSearchResult;
    /** The buckets of the terms and clauses in a run of blocks. */
    private fetch;
    /** Offsets in the block of the events matching every term and at least one visibility clause. */
    private match;
    /**
     * In a block whose times never decrease with the id: the first id from which every row's time is >= `t`
     * (probing the first row at or after a middle id; deleted ids are skipped over).
     */
    private cut;
    private offsets;
}
//# sourceMappingURL=search.d.ts.map