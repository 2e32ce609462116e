/**
 * Users, API keys and grants in SQLite: one row per record, each change one transaction, so a write costs the same
 * with ten records or ten thousand (the JSON document it replaces was rewritten whole on every change). The
 * records are read once at start; the identity service answers from memory and writes through this store.
 */
import type { SqlDatabase, SqlStatement } from '@agent/sdk';
import type { ApiKeyRecord, DeploymentGrant, UserRecord } from '../api.js';

export interface StoredUser extends UserRecord {
  password_hash: string;
  token_version: number;
}

export interface StoredKey extends ApiKeyRecord {
  key_hash: string;
}

/** Everything the store holds, as loaded at start (and as an old `identity.json` held it). */
export interface IdentitySnapshot {
  users: StoredUser[];
  api_keys: StoredKey[];
  grants: DeploymentGrant[];
  next_user_id: number;
  next_key_id: number;
}

// The tables share the access plugin's database with its other state: hence the prefix. A record is kept whole as
// JSON (it is always read and written whole); the columns beside it are what SQLite must index or keep unique.
const SCHEMA = `
  CREATE TABLE IF NOT EXISTS identity_users (
    id INTEGER PRIMARY KEY, username TEXT NOT NULL COLLATE NOCASE UNIQUE, record TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS identity_api_keys (
    id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, key_hash TEXT NOT NULL UNIQUE, record TEXT NOT NULL);
  CREATE INDEX IF NOT EXISTS identity_api_keys_user ON identity_api_keys (user_id);
  CREATE TABLE IF NOT EXISTS identity_grants (
    user_id INTEGER NOT NULL, deployment TEXT NOT NULL, access_level TEXT NOT NULL, granted_at TEXT NOT NULL,
    PRIMARY KEY (user_id, deployment));
  CREATE INDEX IF NOT EXISTS identity_grants_deployment ON identity_grants (deployment);
  -- Ids are never reused (a token or an audit record may still name a deleted user): the next ones are kept here.
  CREATE TABLE IF NOT EXISTS identity_counters (name TEXT PRIMARY KEY, next INTEGER NOT NULL);
`;

type Counter = 'user' | 'api_key';

export class IdentityStore {
  private readonly sql: Record<string, SqlStatement>;
  private readonly next: Record<Counter, number>;

  constructor(private readonly db: SqlDatabase) {
    db.exec(SCHEMA);
    this.sql = {
      insertUser: db.prepare('INSERT INTO identity_users (id, username, record) VALUES (?, ?, ?)'),
      updateUser: db.prepare('UPDATE identity_users SET record = ? WHERE id = ?'),
      deleteUser: db.prepare('DELETE FROM identity_users WHERE id = ?'),
      deleteUserKeys: db.prepare('DELETE FROM identity_api_keys WHERE user_id = ?'),
      deleteUserGrants: db.prepare('DELETE FROM identity_grants WHERE user_id = ?'),
      insertKey: db.prepare('INSERT INTO identity_api_keys (id, user_id, key_hash, record) VALUES (?, ?, ?, ?)'),
      updateKey: db.prepare('UPDATE identity_api_keys SET record = ? WHERE id = ?'),
      deleteKey: db.prepare('DELETE FROM identity_api_keys WHERE id = ?'),
      putGrant: db.prepare(`INSERT INTO identity_grants (user_id, deployment, access_level, granted_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (user_id, deployment) DO UPDATE SET access_level = excluded.access_level`),
      deleteGrant: db.prepare('DELETE FROM identity_grants WHERE user_id = ? AND deployment = ?'),
      deleteDeploymentGrants: db.prepare('DELETE FROM identity_grants WHERE deployment = ?'),
      setCounter: db.prepare('INSERT INTO identity_counters (name, next) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET next = excluded.next'),
    };
    const counters = new Map((db.prepare('SELECT name, next FROM identity_counters').all() as { name: string; next: number }[]).map((r) => [r.name, r.next]));
    this.next = { user: counters.get('user') ?? 1, api_key: counters.get('api_key') ?? 1 };
  }

  /** Every record, in id order. */
  load(): IdentitySnapshot {
    const records = <T>(sql: string) => (this.db.prepare(sql).all() as { record: string }[]).map((r) => JSON.parse(r.record) as T);
    return {
      users: records<StoredUser>('SELECT record FROM identity_users ORDER BY id'),
      api_keys: records<StoredKey>('SELECT record FROM identity_api_keys ORDER BY id'),
      grants: this.db.prepare('SELECT user_id, deployment, access_level, granted_at FROM identity_grants ORDER BY rowid').all() as DeploymentGrant[],
      next_user_id: this.next.user,
      next_key_id: this.next.api_key,
    };
  }

  isEmpty(): boolean {
    return this.db.prepare('SELECT 1 FROM identity_users LIMIT 1').get() === undefined;
  }

  /** Writes `fn`'s changes in one transaction. */
  private atomically<R>(fn: () => R): R {
    return this.db.transaction(fn)();
  }

  /** Takes the next id and stores the record made with it, in one transaction. */
  insertUser(make: (id: number) => StoredUser): StoredUser {
    return this.atomically(() => {
      const user = make(this.next.user);
      this.sql.insertUser!.run(user.id, user.username, JSON.stringify(user));
      this.sql.setCounter!.run('user', user.id + 1);
      this.next.user = user.id + 1;
      return user;
    });
  }

  updateUser(user: StoredUser): void {
    this.sql.updateUser!.run(JSON.stringify(user), user.id);
  }

  /** Removes a user with its keys and grants. */
  deleteUser(id: number): void {
    this.atomically(() => {
      this.sql.deleteUserKeys!.run(id);
      this.sql.deleteUserGrants!.run(id);
      this.sql.deleteUser!.run(id);
    });
  }

  insertKey(make: (id: number) => StoredKey): StoredKey {
    return this.atomically(() => {
      const key = make(this.next.api_key);
      this.sql.insertKey!.run(key.id, key.user_id, key.key_hash, JSON.stringify(key));
      this.sql.setCounter!.run('api_key', key.id + 1);
      this.next.api_key = key.id + 1;
      return key;
    });
  }

  /** Rewrites keys (one, or the usage stamps of many) in one transaction. */
  updateKeys(keys: Iterable<StoredKey>): void {
    this.atomically(() => {
      for (const k of keys) this.sql.updateKey!.run(JSON.stringify(k), k.id);
    });
  }

  deleteKey(id: number): void {
    this.sql.deleteKey!.run(id);
  }

  putGrant(grant: DeploymentGrant): void {
    this.sql.putGrant!.run(grant.user_id, grant.deployment, grant.access_level, grant.granted_at);
  }

  deleteGrant(user_id: number, deployment: string): void {
    this.sql.deleteGrant!.run(user_id, deployment);
  }

  /** Drops a deployment's grants and rewrites the keys that listed it, in one transaction. */
  removeDeployment(deployment: string, keys: StoredKey[]): void {
    this.atomically(() => {
      this.sql.deleteDeploymentGrants!.run(deployment);
      for (const k of keys) this.sql.updateKey!.run(JSON.stringify(k), k.id);
    });
  }

  /** Imports a whole snapshot (an old `identity.json`) in one transaction: all of it, or nothing. */
  importSnapshot(snapshot: IdentitySnapshot): void {
    this.atomically(() => {
      for (const u of snapshot.users) this.sql.insertUser!.run(u.id, u.username, JSON.stringify(u));
      for (const k of snapshot.api_keys) this.sql.insertKey!.run(k.id, k.user_id, k.key_hash, JSON.stringify(k));
      for (const g of snapshot.grants) this.sql.putGrant!.run(g.user_id, g.deployment, g.access_level, g.granted_at);
      const maxId = (rows: { id: number }[]) => rows.reduce((m, r) => Math.max(m, r.id), 0) + 1;
      this.next.user = Math.max(snapshot.next_user_id, maxId(snapshot.users));
      this.next.api_key = Math.max(snapshot.next_key_id, maxId(snapshot.api_keys));
      this.sql.setCounter!.run('user', this.next.user);
      this.sql.setCounter!.run('api_key', this.next.api_key);
    });
  }
}
