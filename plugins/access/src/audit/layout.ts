/**
 * Tables of the audit journal (all in the access plugin's audit.sqlite; the core's journal.sqlite held them before, see legacy.ts):
 * - `audit_events`: one row per event (documented in the SDK). Ids are assigned by the writer, and `time_ms` is
 *   stamped so that it never decreases as the id grows: "newest first" is `id DESC`, a time window is an id range.
 *   Rows written before that rule (journals from older agents) may be out of time order: answers stay exact
 *   (block time bounds below), only the order of such rows is by id.
 * - `audit_blocks`: per block of 4096 ids, its row count and time bounds: time windows skip whole blocks, counts
 *   of blocks inside a window read no rows, and only the blocks a window cuts (one or two) read rows: a binary
 *   search on the id when the block is in time order, else a scan of its times.
 * - `audit_postings`: per field, bucket of values and block, the in-block offsets of the events of each value
 *   (see postings.ts). Keyed `(field, bucket, block)`: a term's postings over a run of blocks are one key range
 *   (measured: pages 30-40% cheaper than keyed by block first), and writes still land at the tail of each
 *   (field, bucket) range (no slower to ingest). The writer rewrites the newest block's rows; others are final.
 * - `audit_dirty`: blocks whose rows were deleted or changed (triggers: a cleanup, another connection),
 *   re-indexed before the next read or write. Rows may be appended by another connection too (the writer
 *   indexes ids above its last).
 * There is no index on the columns: each one cost about 3 µs per insert (nine of them set the ingest rate).
 */
import type BetterSqlite3 from 'better-sqlite3';

/** The journal's SQLite database (better-sqlite3, the build the kernel picks). */
export type Journal = BetterSqlite3.Database;
/**
 * Version of the derived tables (blocks, postings, dirty): a journal whose `audit_layout` differs (or lacks it:
 * an older agent's journal) gets them dropped and rebuilt from its rows at open; the version is written in the
 * transaction that finishes the rebuild, so a crash half-way rebuilds again.
 */
export const LAYOUT_VERSION = 1;
export const DERIVED = `
DROP TABLE IF EXISTS audit_postings;
DROP TABLE IF EXISTS audit_blocks;
DROP TABLE IF EXISTS audit_dirty;
CREATE TABLE IF NOT EXISTS audit_layout (version INTEGER NOT NULL);
DELETE FROM audit_layout;
`;

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS audit_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time TEXT NOT NULL,
  time_ms INTEGER NOT NULL,
  actor_type TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  actor_name TEXT,
  action TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  resource_id TEXT,
  deployment TEXT,
  success INTEGER NOT NULL,
  status INTEGER,
  client_ip TEXT,
  detail TEXT
);
DROP INDEX IF EXISTS audit_time;
DROP INDEX IF EXISTS audit_actor;
DROP INDEX IF EXISTS audit_actor_type;
DROP INDEX IF EXISTS audit_action;
DROP INDEX IF EXISTS audit_resource;
DROP INDEX IF EXISTS audit_resource_type;
DROP INDEX IF EXISTS audit_resource_id;
DROP INDEX IF EXISTS audit_deployment;
DROP INDEX IF EXISTS audit_ip;
DROP INDEX IF EXISTS audit_success;
-- ordered: the block's times never decrease with the id (a window cutting it is found by binary search).
CREATE TABLE IF NOT EXISTS audit_blocks (
  block INTEGER PRIMARY KEY, n INTEGER NOT NULL, min_time INTEGER NOT NULL, max_time INTEGER NOT NULL, ordered INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS audit_postings (
  field INTEGER NOT NULL, bucket INTEGER NOT NULL, block INTEGER NOT NULL, terms BLOB NOT NULL,
  PRIMARY KEY (field, bucket, block)
) WITHOUT ROWID;
-- what: 1 = times changed (bounds only), 2 = rows deleted or terms changed (postings too).
CREATE TABLE IF NOT EXISTS audit_dirty (block INTEGER NOT NULL, what INTEGER NOT NULL, PRIMARY KEY (block, what)) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS audit_events_deleted AFTER DELETE ON audit_events BEGIN
  INSERT OR IGNORE INTO audit_dirty VALUES (old.id >> 12, 2);
END;
CREATE TRIGGER IF NOT EXISTS audit_events_retimed AFTER UPDATE OF time_ms ON audit_events BEGIN
  INSERT OR IGNORE INTO audit_dirty VALUES (old.id >> 12, 1);
END;
CREATE TRIGGER IF NOT EXISTS audit_events_changed
AFTER UPDATE OF id, actor_type, actor_id, action, resource_type, resource_id, deployment, success, client_ip ON audit_events BEGIN
  INSERT OR IGNORE INTO audit_dirty VALUES (old.id >> 12, 2);
  INSERT OR IGNORE INTO audit_dirty VALUES (new.id >> 12, 2);
END;
`;

/** Columns in INSERT order; the postings' ROW_POS refers to these positions. */
export const INSERT_COLUMNS =
  'id, time, time_ms, actor_type, actor_id, actor_name, action, resource_type, resource_id, deployment, success, status, client_ip, detail';
export const ROW_WIDTH = 14;
/** What indexing reads of a stored row, in the same positions (the other columns as NULL). */
export const INDEX_COLUMNS = 'id, NULL, time_ms, actor_type, actor_id, NULL, action, resource_type, resource_id, deployment, success, NULL, client_ip';
export const INDEX_WIDTH = 13;
