/** SQLite journals (better-sqlite3, the build `./sqlite.ts` picks; WAL): one database file per owner. */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { Database } from './sqlite.js';

export type Journal = BetterSqlite3.Database;

/** Owner-only, whatever mode the files had before: journals hold password hashes, key hashes and audit trails. */
function ownerOnly(path: string): void {
  for (const file of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(file)) chmodSync(file, 0o600);
}

export function openJournal(path: string): Journal {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  // Created owner-only before SQLite opens it (it gives its -wal and -shm files the database file's mode).
  closeSync(openSync(path, 'a', 0o600));
  ownerOnly(path);
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  ownerOnly(path);
  return db;
}
