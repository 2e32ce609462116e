/**
 * The backup a change takes first when it asks `backup: true`: through the backups plugin's service when that
 * plugin runs. The service is named here by its id (`backups`, `backupsService` of `@agent/plugin-backups/api`) with
 * the part of its contract a change uses, instead of imported: the backups package depends on this one, and
 * packages (and TypeScript project references) may not depend on each other in a circle.
 */
import { createServiceRef, errors } from '@agent/sdk';

export interface BackupBeforeChange {
  /** Resolves once the backup finished (rejects with its error). */
  backup(input: {
    deployment: string;
    description?: string;
    trigger?: 'manual' | 'scheduled' | 'task';
    created_by?: string | null;
  }): Promise<{ job_id: string; backup_id: string; size: number }>;
}

export const backupsService = createServiceRef<BackupBeforeChange>('backups', 'backups of deployments (one is taken before a change that asks for it)');

/** The service, or 503 when no backups plugin runs (a change that asks for a backup never runs without one). */
export function requireBackups(service: BackupBeforeChange | undefined): BackupBeforeChange {
  if (!service) throw errors.unavailable('backup: true needs the backups plugin, which is not enabled', 'BACKUPS_UNAVAILABLE');
  return service;
}

/**
 * Waits for a backup, or stops waiting when `signal` aborts (a cancelled job): the backup is the backups plugin's
 * job and ends on its own, recorded there.
 */
export async function backupBefore(
  service: BackupBeforeChange,
  input: { deployment: string; description: string; created_by: string | null },
  signal?: AbortSignal,
): Promise<string> {
  const started = service.backup({ ...input, trigger: 'manual' });
  if (!signal) return (await started).backup_id;
  signal.throwIfAborted();
  let stop!: () => void;
  const aborted = new Promise<never>((_, reject) => {
    stop = () => reject(signal.reason);
    signal.addEventListener('abort', stop, { once: true });
  });
  try {
    return (await Promise.race([started, aborted])).backup_id;
  } finally {
    signal.removeEventListener('abort', stop);
    // A backup that ends after the wait stopped is not an unhandled rejection.
    started.catch(() => undefined);
  }
}
