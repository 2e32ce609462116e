/**
 * Agents before this one kept the audit journal in the core's `<data>/core/journal.sqlite` (next to the scheduler's
 * tables). The journal takes those rows over at its first open, with their ids, and drops the old tables there
 * (and gives their space back to the file system).
 * The copy is one statement that skips ids already present, so a crash between the copy and the drop copies
 * nothing twice and the next start finishes the move.
 */
import { existsSync } from 'node:fs';
import type { Journal } from './layout.js';
import { INSERT_COLUMNS } from './layout.js';

const OLD_TABLES = ['audit_postings', 'audit_blocks', 'audit_dirty', 'audit_layout', 'audit_events'];

/** Moves the events of an older agent's journal at `legacyPath` into `db` (its `audit_events` exists); returns how many. */
export function adoptLegacyJournal(db: Journal, legacyPath: string): number {
  if (!existsSync(legacyPath)) return 0;
  db.prepare('ATTACH DATABASE ? AS legacy').run(legacyPath);
  try {
    const found = db.prepare("SELECT 1 FROM legacy.sqlite_master WHERE type = 'table' AND name = 'audit_events'").get();
    if (!found) return 0;
    const copied = db.prepare(`INSERT OR IGNORE INTO main.audit_events (${INSERT_COLUMNS}) SELECT ${INSERT_COLUMNS} FROM legacy.audit_events`).run().changes;
    db.transaction(() => {
      for (const table of OLD_TABLES) db.exec(`DROP TABLE IF EXISTS legacy.${table}`);
    })();
    // The old file keeps the pages of the dropped tables until it is rebuilt: what is left (the scheduler's
    // tables) is small, so it is rebuilt once, now.
    db.exec('VACUUM legacy');
    return copied;
  } finally {
    db.exec('DETACH DATABASE legacy');
  }
}
