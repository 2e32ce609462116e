/**
 * Backups in object stores belong to their deployment, also when reached through the object-store routes. A backup
 * is uploaded to `<store bucket>/<store prefix><deployment>/<backup id>.tar.gz` (BackupService.upload) and keeps
 * that key when a store is replicated elsewhere. So an object belongs to a deployment when:
 * - its file name is a backup archive whose record we hold: the record's deployment (a retired name once the
 *   deployment was deleted, whatever the key still says);
 * - otherwise, when it lies under the backup layout of a registered store with that bucket (`<prefix><name>/…`):
 *   the deployment `<name>` (a leftover archive, or anything else put there).
 * Objects outside every layout belong to no deployment (plain global objects of the store).
 */
import { canReach, errors, isDeploymentOrRetiredName, type Principal } from '@agent/sdk';
import type { StoreRecord } from './stores.js';

const ARCHIVE = /^(bkp_[0-9]{14}_[0-9a-f]{8})\.tar\.gz$/;

export interface ObjectOwner {
  /** Deployments (or retired names) the object belongs to; empty: none. */
  deployments: string[];
  /** A backup archive (its file name says so): reading it is downloading a backup. */
  archive: boolean;
}

export function objectOwner(stores: readonly StoreRecord[], backupDeployment: (id: string) => string | undefined, bucket: string, key: string): ObjectOwner {
  const file = key.slice(key.lastIndexOf('/') + 1);
  const archive = ARCHIVE.exec(file);
  const recorded = archive ? backupDeployment(archive[1]!) : undefined;
  if (recorded) return { deployments: [recorded], archive: true };
  const owners = new Set<string>();
  for (const s of stores) {
    if (s.bucket !== bucket || !key.startsWith(s.prefix)) continue;
    const rest = key.slice(s.prefix.length);
    const slash = rest.indexOf('/');
    if (slash > 0 && isDeploymentOrRetiredName(rest.slice(0, slash))) owners.add(rest.slice(0, slash));
  }
  return { deployments: [...owners], archive: archive !== null };
}

/**
 * What the backup routes would ask for the same object: reading an archive is a download (backups:write and write
 * on its deployment: it holds the .env and the dumps), reading anything else of a deployment needs read on it,
 * changing (upload, delete) needs write. Retired names: global principals only (canReach).
 */
export function mayTouch(p: Principal, owner: ObjectOwner, access: 'read' | 'write'): boolean {
  if (owner.deployments.length === 0) return true;
  const level = access === 'write' || owner.archive ? 'write' : 'read';
  const permission = level === 'write' ? 'backups:write' : 'backups:read';
  return p.can(permission) && owner.deployments.every((d) => canReach(p, d, level));
}

/** Listing shows names and sizes only: read access to the deployment (and backups:read) is enough. */
export const mayList = (p: Principal, owner: ObjectOwner): boolean =>
  owner.deployments.length === 0 || (p.can('backups:read') && owner.deployments.every((d) => canReach(p, d, 'read')));

/** 404 for an object of a deployment the principal may not see, 403 when its access is too low. */
export function assertMayTouch(p: Principal, owner: ObjectOwner, access: 'read' | 'write', key: string): void {
  if (mayTouch(p, owner, access)) return;
  if (!owner.deployments.every((d) => canReach(p, d, 'read'))) throw errors.notFound(`object '${key}' not found`, 'OBJECT_NOT_FOUND');
  throw errors.forbidden(
    `object '${key}' is a backup of a deployment: ${access === 'write' || owner.archive ? "'backups:write' and write access to the deployment" : "'backups:read'"} required`,
  );
}
