/** Checks the operations of the plugin share: exclude patterns, destinations, a backup as the caller sees it. */
import { assertVisible, canReach, errors, Type, type Principal } from '@agent/sdk';
import { invalidExcludePattern, invalidExcludePatterns } from '../archive/paths.js';
import type { BackupRecord } from '../backup-store.js';
import type { BackupService } from '../backup-service.js';
import type { StoreRegistry } from '../s3/stores.js';

export const BACKUP_ID = '^bkp_[0-9]{14}_[0-9a-f]{8}$';
export const JOB_ID = '^job_[0-9]{14}_[0-9a-f]{8}$';

export const ExcludePatterns = Type.Array(Type.String({ minLength: 1, maxLength: 512 }), {
  maxItems: 100,
  description: 'glob patterns relative to the deployment folder',
});

/** What a job-starting operation answers (202). */
export const Accepted = Type.Object({ job_id: Type.String(), message: Type.String() });
export interface Accepted {
  job_id: string;
  message: string;
}

export function checkPatterns(patterns: string[], field = 'body.exclude_patterns'): void {
  patterns.forEach((p, i) => {
    const problem = invalidExcludePattern(p);
    if (problem) throw errors.badRequest(`${field}[${i}]: '${p}' ${problem}`, 'INVALID_PATTERN');
  });
  const together = invalidExcludePatterns(patterns);
  if (together) throw errors.badRequest(`${field}: the patterns ${together}`, 'INVALID_PATTERN');
}

export const checkDestination = (stores: StoreRegistry, destination: string): void => {
  if (destination !== 'local' && !stores.find(destination)) throw errors.badRequest(`body.destination: no object store named '${destination}'`);
};

/** A backup by id, or undefined (a malformed or unknown id alike). */
export function findBackup(service: BackupService, id: string): BackupRecord | undefined {
  try {
    return service.get(id);
  } catch {
    return undefined;
  }
}

/** A backup by id as the principal sees it: an unknown one and another tenant's answer the same 404. */
export function visibleBackup(service: BackupService, p: Principal, id: string): BackupRecord {
  const b = findBackup(service, id);
  assertVisible(p, b?.deployment, () => errors.notFound(`backup '${id}' not found`, 'BACKUP_NOT_FOUND'));
  return b!;
}

/** Write access to a backup's deployment (changing, restoring or downloading it). */
export function requireWrite(p: Principal, b: BackupRecord): void {
  if (!canReach(p, b.deployment, 'write')) throw errors.forbidden(`'write' access to the backup's deployment required`);
}
