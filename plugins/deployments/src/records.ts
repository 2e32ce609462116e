/**
 * What the agent knows about each deployment besides its files: who created it and when, its template, its custom
 * log sources and the host-safety exceptions an admin granted. Kept in the plugin's own document, out of reach of
 * the deployment's containers (they may write to their folder).
 */
import type { Document } from '@agent/sdk';
import type { LogSourceSpec } from './files.js';
import type { ScaleOverrides } from './deploy/scale.js';

export interface DeploymentRecord {
  created_at: string;
  created_by: string | null;
  /** Template the deployment was created from (its kind: built-in log sources). */
  template: string | null;
  compose_file: string;
  log_sources: LogSourceSpec[];
  /** Host-safety exceptions granted by an admin, e.g. `cap_add:NET_ADMIN`. */
  exceptions: string[];
  /**
   * service → the image a rollback pinned it to (`repo@sha256:…` or `sha256:…`): every start runs the files with
   * these images, until the compose file changes or a redeploy resolves the tags again.
   */
  pins?: Record<string, string>;
  /** `swarm`: deployed as a stack of Docker Swarm (`docker stack deploy`); absent: compose on this host. */
  runtime?: 'swarm';
  /** Swarm deployments: the scale set through the API, kept across deploys of the same file (deploy/scale.ts). */
  scale?: ScaleOverrides;
}

export interface RecordsDoc {
  deployments: Record<string, DeploymentRecord>;
  /** Folders of deleted deployments kept on disk: not discovered again. */
  kept: Record<string, { deleted_at: string }>;
}

export const emptyRecords = (): RecordsDoc => ({ deployments: {}, kept: {} });

/** A deployment as the manager holds it: its record, where its files are, and what it knows of them. */
export interface Entry {
  name: string;
  dir: string;
  composeFile: string;
  record: DeploymentRecord;
  /** Service names from the compose file (cached; refreshed whenever the file is written or re-read). */
  services: string[];
  /** Why the last start failed, until a start or stop succeeds (a deployment that never came up is `failed`). */
  failure: string | null;
}

export class DeploymentRecords {
  constructor(private readonly doc: Document<RecordsDoc>) {}

  get(name: string): DeploymentRecord | undefined {
    return this.doc.data.deployments[name];
  }

  isKept(name: string): boolean {
    return name in this.doc.data.kept;
  }

  async put(name: string, record: DeploymentRecord): Promise<DeploymentRecord> {
    return this.doc.update((d) => {
      d.deployments[name] = record;
      delete d.kept[name];
      return record;
    });
  }

  async patch(name: string, patch: Partial<DeploymentRecord>): Promise<DeploymentRecord> {
    return this.doc.update((d) => {
      const next = { ...d.deployments[name]!, ...patch };
      d.deployments[name] = next;
      return next;
    });
  }

  /** Forgets a deployment; `keptFolder` marks its folder as not to be discovered again. */
  async remove(name: string, keptFolder: boolean, at = new Date()): Promise<void> {
    await this.doc.update((d) => {
      delete d.deployments[name];
      if (keptFolder) d.kept[name] = { deleted_at: at.toISOString() };
      else delete d.kept[name];
    });
  }

  /** When the deployment whose folder is kept was deleted. */
  keptSince(name: string): string | undefined {
    return this.doc.data.kept[name]?.deleted_at;
  }

  async markKept(name: string, deletedAt: string): Promise<void> {
    await this.doc.update((d) => {
      d.kept[name] = { deleted_at: deletedAt };
    });
  }
}
