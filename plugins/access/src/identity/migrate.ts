/**
 * Earlier versions kept users, keys and grants in `<data>/core/identity.json`. On the first start with the SQLite
 * store, that file is imported in one transaction and then renamed, so it is imported once and kept for reference.
 */
import { existsSync, readFileSync, renameSync } from 'node:fs';
import type { IdentitySnapshot, IdentityStore } from './store.js';

export const LEGACY_FILE = ['core', 'identity.json'] as const;

/** Imports `path` into an empty store; returns how many users it held (null when there was no file). */
export function migrateLegacyFile(path: string, store: IdentityStore): number | null {
  if (!existsSync(path)) return null;
  const old = JSON.parse(readFileSync(path, 'utf8')) as Partial<IdentitySnapshot>;
  const snapshot: IdentitySnapshot = {
    // Users stored before scopes existed: admins are global, everyone else is limited to their grants.
    users: (old.users ?? []).map((u) => ({ ...u, scope: u.scope ?? (u.role === 'admin' ? 'global' : 'deployments') })),
    api_keys: old.api_keys ?? [],
    grants: old.grants ?? [],
    next_user_id: old.next_user_id ?? 1,
    next_key_id: old.next_key_id ?? 1,
  };
  // A store that already has users imported this file before (and stopped before the rename): import nothing twice.
  if (store.isEmpty()) store.importSnapshot(snapshot);
  renameSync(path, `${path}.migrated`);
  return snapshot.users.length;
}
