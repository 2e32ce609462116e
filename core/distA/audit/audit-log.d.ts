/**
 * The audit journal. Events are queued and written in one transaction every few milliseconds (or per
 * FLUSH_BATCH events), so a burst of requests costs one commit; `flush()` runs before anything reads the table
 * through `database` or `search`, and at shutdown. Layout and invariants: layout.ts; postings: postings.ts.
 */
import type { AuditEventInput, AuditLog, AuditSearchQuery, AuditSearchResult, SqlDatabase } from '@agent/sdk';
import type { Journal } from '../store/journal.js';
export declare class CoreAuditLog implements AuditLog {
    private readonly db;
    /** Queued events, ROW_WIDTH values each in INSERT order (the id is filled in when written). */
    private queue;
    private delayMs;
    private timer;
    /** Highest id ever assigned (AUTOINCREMENT: ids are not reused) and highest id indexed in the postings. */
    private lastId;
    private indexedTo;
    private lastStamp;
    private isoMs;
    private iso;
    /** Postings of the newest block, kept in memory: each flush rewrites the terms it touched. */
    private open;
    /** Every non-empty block, ascending (mirrors `audit_blocks`). */
    private blocks;
    private readonly s;
    private readonly write;
    private readonly searcher;
    constructor(db: Journal);
    get database(): SqlDatabase;
    record(e: AuditEventInput): void;
    search(query: AuditSearchQuery): AuditSearchResult;
    idRange(start_ms?: number, end_ms?: number): {
        first: number;
        last: number;
    } | null;
    flush(): void;
    private insert;
    /** Adds a written row (flat array at `o`) to the open block; moving to the next block makes the last one final. */
    private append;
    /** At open: indexes the rows of the newest block (rebuilt from its rows, so a crash loses nothing) or all of them. */
    private load;
    /** Indexes every stored row from id `from` on, after the open block's (the next persist writes it). */
    private indexFrom;
    /** Rows another connection appended after the last indexed one. */
    private catchUp;
    /** Blocks whose rows were deleted or changed (triggers): postings rebuilt from the rows, or only their bounds. */
    private repair;
    private rebuild;
    /** Writes the postings a block changed since its last write, and its bounds. */
    private persist;
    /** Stores a block's count and bounds (an empty block is dropped), here and in `audit_blocks`. */
    private setInfo;
}
//# sourceMappingURL=audit-log.d.ts.map