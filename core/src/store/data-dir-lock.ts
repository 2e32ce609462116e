/**
 * One agent per data folder. Two agents on one folder would rewrite each other's documents and run every
 * deployment's jobs twice, so the second one refuses to start.
 *
 * The lock is an exclusive SQLite lock (a POSIX advisory lock the kernel drops when the process ends, however it
 * ends): after a `kill -9` the next agent starts at once, with no stale lock file to clean up and no timeout to
 * wait for. The holder's pid is written next to it only to name it in the refusal.
 */
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { Database } from './sqlite.js';

export class DataDirInUseError extends Error {
  readonly code = 'DATA_DIR_IN_USE';
}

export interface DataDirLock {
  release(): void;
}

export function lockDataDir(dataDir: string): DataDirLock {
  const path = join(dataDir, 'agent.lock');
  const pidFile = join(dataDir, 'agent.pid');
  let db: BetterSqlite3.Database | null = new Database(path, { timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    // The first write takes the exclusive lock; in this locking mode it is kept until the connection closes.
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER); DELETE FROM holder;');
    db.prepare('INSERT INTO holder (pid) VALUES (?)').run(process.pid);
  } catch (err) {
    db.close();
    db = null;
    if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
    let holder = '';
    try {
      holder = ` (pid ${readFileSync(pidFile, 'utf8').trim()})`;
    } catch {
      // the holder is starting and has not written its pid yet
    }
    throw new DataDirInUseError(`the data folder ${dataDir} is in use by another agent${holder}: stop it first, or start this one with another data folder`);
  }
  chmodSync(path, 0o600);
  writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 });
  return {
    release() {
      db?.close();
      db = null;
    },
  };
}
