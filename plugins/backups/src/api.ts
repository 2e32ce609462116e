/** The `backups` service: backups of deployments as other plugins (the scheduler) use them (provided by the backups plugin). */
import { createServiceRef } from '@agent/sdk';

export interface BackupsService {
  /**
   * Backs up a deployment (files, and database dumps unless `include_database` is false) and resolves when the
   * backup job has finished; throws with the job's error when it failed. Unset fields come from the deployment's
   * backup configuration. With `retention`, older backups of the deployment beyond that count are pruned.
   */
  backup(input: {
    deployment: string;
    include_database?: boolean;
    exclude_patterns?: string[];
    description?: string;
    destination?: string;
    retention?: number;
    trigger?: 'manual' | 'scheduled' | 'task';
    created_by?: string | null;
  }): Promise<{ job_id: string; backup_id: string; size: number }>;
  /** Completed backups, newest first. */
  list(deployment?: string): { id: string; deployment: string; size: number; created_at: string }[];
}

export const backupsService = createServiceRef<BackupsService>('backups', 'backups of deployments');

declare module '@agent/sdk' {
  interface AgentEvents {
    'backup.finished': { id: string; deployment: string; success: boolean; error?: string };
    'restore.finished': { id: string; deployment: string; success: boolean; error?: string };
  }
}
