/** SQLite journals (better-sqlite3, the build `./sqlite.ts` picks; WAL): one database file per owner. */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { Database } from './sqlite.js';

export type Journal = BetterSqlite3.Database;

export function openJournal(path: string): Journal {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  return db;
}
