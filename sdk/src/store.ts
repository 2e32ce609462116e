/** Storage a plugin gets: JSON documents for configuration-sized state, SQLite for journals. */

export interface Document<T> {
  /** The current value; mutate it inside `update` so it is written. */
  readonly data: T;
  /** Applies `fn` and writes the document atomically (temp file + rename). Calls are serialised. */
  update<R>(fn: (data: T) => R | Promise<R>): Promise<R>;
  /** Absolute path of the file. */
  readonly path: string;
}

/** The subset of better-sqlite3 plugins use, so the SDK does not depend on it. */
export interface SqlStatement {
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
}

export interface SqlDatabase {
  exec(sql: string): void;
  prepare(sql: string): SqlStatement;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R;
  pragma(source: string, options?: { simple?: boolean }): unknown;
}

export interface PluginStore {
  /** The plugin's JSON document `name` (default `state`), created with `defaults` when missing. */
  document<T extends object>(defaults: T, name?: string): Promise<Document<T>>;
  /**
   * The plugin's SQLite journal `name` (default `journal`: `<plugin data>/<name>.sqlite`, WAL mode), one connection
   * per name, closed by the core after the plugin stopped. A separate name keeps data with its own growth or
   * durability settings (e.g. `synchronous`) apart from the rest. Its commits are on disk before the change they
   * belong to is acknowledged: the kernel syncs the changed journals with the change's audit record. Pass
   * `syncBeforeAck: false` (on the first call) for a journal that makes its own commits durable, or whose records
   * can be made again after a crash (e.g. read again from a log): it is then left out of that.
   */
  journal(name?: string, options?: { syncBeforeAck?: boolean }): SqlDatabase;
  /** Like `document`, but the file is encrypted at rest (AES-256-GCM with the agent's data key). */
  secureDocument<T extends object>(defaults: T, name?: string): Promise<Document<T>>;
}

/** Symmetric encryption with the agent's data key (AES-256-GCM), for credentials kept at rest. */
export interface Sealer {
  seal(plain: string): string;
  open(sealed: string): string;
}
