/** SQLite journals (better-sqlite3, the build `./sqlite.ts` picks; WAL): one database file per owner. */
import { chmodSync, closeSync, existsSync, fdatasync, mkdirSync, openSync } from 'node:fs';
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

interface Tracked {
  changes: BetterSqlite3.Statement<[], number>;
  /** `total_changes()` when the last sync covering this journal started. */
  covered: number;
  wal: string;
  fd: number | null;
}

/**
 * Makes the journals' commits durable before a change is acknowledged. Journals run with `synchronous = NORMAL`:
 * a commit survives the agent's crash but not the host's (power loss) until the WAL reaches the disk. `sync()`
 * resolves once every commit made before the call is on disk: one `fdatasync` (in the thread pool) per changed
 * journal, shared by every caller waiting at that moment, so the event loop never waits for the disk and a burst of
 * changes costs one sync per journal. A checkpoint syncs the WAL itself before it copies pages into the database.
 */
export class JournalSync {
  private readonly tracked = new Map<Journal, Tracked>();
  private running: Promise<void> | null = null;
  /** The next round, not started yet: callers that come now are covered by it. */
  private queued: Promise<void> | null = null;

  constructor(private readonly syncFile: (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void = fdatasync) {}

  track(db: Journal): void {
    const changes = db.prepare('SELECT total_changes()').pluck() as BetterSqlite3.Statement<[], number>;
    this.tracked.set(db, { changes, covered: changes.get()!, wal: `${db.name}-wal`, fd: null });
  }

  sync(): Promise<void> {
    // A round that has not started yet covers every commit made until it starts: joining it needs no look.
    if (this.queued) return this.queued;
    if (this.uncovered().next().done) return this.running ?? Promise.resolve();
    const next = () => this.round();
    // A failed round fails its own callers only: the next one still runs.
    return (this.queued ??= (this.running ?? Promise.resolve()).then(next, next));
  }

  /** The open journals with commits no sync has covered yet, and their change count now; closed ones are forgotten. */
  private *uncovered(): Generator<[Tracked, number]> {
    for (const [db, t] of this.tracked) {
      if (!db.open) {
        this.forget(db, t);
        continue;
      }
      const now = t.changes.get()!;
      if (now !== t.covered) yield [t, now];
    }
  }

  private round(): Promise<void> {
    this.queued = null;
    const syncs: Promise<void>[] = [];
    for (const [t, now] of this.uncovered()) {
      t.covered = now;
      const fd = (t.fd ??= openSync(t.wal, 'r'));
      syncs.push(new Promise<void>((resolve, reject) => this.syncFile(fd, (err) => (err ? reject(err) : resolve()))));
    }
    const done = Promise.all(syncs).then(() => undefined);
    this.running = done;
    void done
      .finally(() => {
        if (this.running === done) this.running = null;
      })
      .catch(() => undefined);
    return done;
  }

  private forget(db: Journal, t: Tracked): void {
    if (t.fd !== null) closeSync(t.fd);
    this.tracked.delete(db);
  }

  /** Closes the WAL handles (the journals themselves are closed by their owners). */
  close(): void {
    for (const [db, t] of this.tracked) this.forget(db, t);
  }
}
