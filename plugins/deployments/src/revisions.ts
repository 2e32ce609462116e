/**
 * Revisions: every change of a deployment (create, update of its files, redeploy, rollback) as one row of the
 * plugin's journal, written when the change starts (`pending`) and completed when it ends: the compose file and the
 * checked model that ran, the `.env` sealed with the agent's data key, the image every service ran (id and registry
 * digest, read from its container after the run), who, when, why, the outcome, and the backup taken first. A change
 * the agent was running when it stopped is `interrupted` at the next start. The newest `keep` revisions of each
 * deployment are kept; a deleted deployment's are kept under its retired name.
 */
import type { Sealer, SqlDatabase } from '@agent/sdk';
import type { DockerService } from '@agent/plugin-docker/api';
import { parseEnv, serializeEnv } from './env-file.js';

export type RevisionAction = 'create' | 'update' | 'redeploy' | 'rollback';
export type RevisionStatus = 'pending' | 'succeeded' | 'failed' | 'cancelled' | 'interrupted';

export interface RevisionImage {
  /** The image as the model names it. */
  image: string;
  /** The image the container ran (`sha256:…`). */
  id: string | null;
  /** `repo@sha256:…` of that image in its registry; null for one built or tagged on this host. */
  digest: string | null;
}

/** A service as a failed or cancelled change left it. */
export interface LeftService {
  service: string;
  container: string | null;
  state: string;
  image_id: string | null;
  recreated: boolean;
}

export interface Revision {
  deployment: string;
  rev: number;
  action: RevisionAction;
  status: RevisionStatus;
  error: string | null;
  reason: string | null;
  created_at: string;
  finished_at: string | null;
  created_by: string | null;
  created_by_name: string | null;
  ran: boolean;
  images: Record<string, RevisionImage>;
  pins: Record<string, string>;
  strategy: string | null;
  services: string[] | null;
  rollback_of: number | null;
  backup_id: string | null;
  job_id: string | null;
  left: LeftService[] | null;
}

/** A revision with its files (the `.env` still sealed: `env()` opens it). */
export interface RevisionRecord extends Revision {
  compose_file: string;
  compose_content: string;
  env_sealed: string;
  model: Record<string, unknown> | null;
  model_hash: string | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS revisions (
  deployment TEXT NOT NULL,
  rev INTEGER NOT NULL,
  action TEXT NOT NULL,
  status TEXT NOT NULL,
  error TEXT,
  reason TEXT,
  created_at TEXT NOT NULL,
  finished_at TEXT,
  created_by TEXT,
  created_by_name TEXT,
  compose_file TEXT NOT NULL,
  compose_content TEXT NOT NULL,
  env_sealed TEXT NOT NULL,
  model TEXT,
  model_hash TEXT,
  ran INTEGER NOT NULL DEFAULT 0,
  images TEXT NOT NULL DEFAULT '{}',
  pins TEXT NOT NULL DEFAULT '{}',
  strategy TEXT,
  services TEXT,
  rollback_of INTEGER,
  backup_id TEXT,
  job_id TEXT,
  left_services TEXT,
  PRIMARY KEY (deployment, rev)
) WITHOUT ROWID;
`;

interface Row {
  deployment: string;
  rev: number;
  action: RevisionAction;
  status: RevisionStatus;
  error: string | null;
  reason: string | null;
  created_at: string;
  finished_at: string | null;
  created_by: string | null;
  created_by_name: string | null;
  compose_file: string;
  compose_content: string;
  env_sealed: string;
  model: string | null;
  model_hash: string | null;
  ran: number;
  images: string;
  pins: string;
  strategy: string | null;
  services: string | null;
  rollback_of: number | null;
  backup_id: string | null;
  job_id: string | null;
  left_services: string | null;
}

const SUMMARY_COLUMNS =
  'deployment, rev, action, status, error, reason, created_at, finished_at, created_by, created_by_name, ran, images, pins, strategy, services, rollback_of, backup_id, job_id, left_services';

const parse = <T>(text: string | null, fallback: T): T => (text === null ? fallback : (JSON.parse(text) as T));

function summaryOf(r: Row): Revision {
  return {
    deployment: r.deployment,
    rev: r.rev,
    action: r.action,
    status: r.status,
    error: r.error,
    reason: r.reason,
    created_at: r.created_at,
    finished_at: r.finished_at,
    created_by: r.created_by,
    created_by_name: r.created_by_name,
    ran: r.ran === 1,
    images: parse(r.images, {}),
    pins: parse(r.pins, {}),
    strategy: r.strategy,
    services: parse<string[] | null>(r.services, null),
    rollback_of: r.rollback_of,
    backup_id: r.backup_id,
    job_id: r.job_id,
    left: parse<LeftService[] | null>(r.left_services, null),
  };
}

export interface BeginRevision {
  deployment: string;
  action: RevisionAction;
  principal: { id: string; name: string } | null;
  reason?: string | null;
  composeFile: string;
  content: string;
  env: Record<string, string>;
  model: Record<string, unknown> | null;
  modelHash: string | null;
  strategy?: string | null;
  services?: string[] | null;
  pins?: Record<string, string>;
  rollbackOf?: number | null;
  backupId?: string | null;
  jobId?: string | null;
}

export interface FinishRevision {
  status: Exclude<RevisionStatus, 'pending'>;
  error?: string | null;
  ran?: boolean;
  images?: Record<string, RevisionImage>;
  left?: LeftService[] | null;
}

export class Revisions {
  constructor(
    private readonly db: SqlDatabase,
    private readonly sealer: Sealer,
    private readonly keep: () => number,
  ) {
    db.exec(SCHEMA);
    // A change the agent was running when it stopped did not finish: its revision says so.
    db.prepare(`UPDATE revisions SET status = 'interrupted', finished_at = ?, error = ? WHERE status = 'pending'`).run(
      new Date().toISOString(),
      'the agent stopped while the change ran',
    );
  }

  /** Records a change as it starts; returns its revision number. */
  begin(input: BeginRevision): number {
    const next = this.db.transaction(() => {
      const { max } = this.db.prepare('SELECT MAX(rev) AS max FROM revisions WHERE deployment = ?').get(input.deployment) as { max: number | null };
      const rev = (max ?? 0) + 1;
      this.db
        .prepare(
          `INSERT INTO revisions (deployment, rev, action, status, reason, created_at, created_by, created_by_name, compose_file, compose_content,
             env_sealed, model, model_hash, pins, strategy, services, rollback_of, backup_id, job_id)
           VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          input.deployment,
          rev,
          input.action,
          input.reason ?? null,
          new Date().toISOString(),
          input.principal?.id ?? null,
          input.principal?.name ?? null,
          input.composeFile,
          input.content,
          this.sealer.seal(serializeEnv(input.env)),
          input.model ? JSON.stringify(input.model) : null,
          input.modelHash,
          JSON.stringify(input.pins ?? {}),
          input.strategy ?? null,
          input.services ? JSON.stringify(input.services) : null,
          input.rollbackOf ?? null,
          input.backupId ?? null,
          input.jobId ?? null,
        );
      return rev;
    });
    return next();
  }

  finish(deployment: string, rev: number, outcome: FinishRevision): void {
    this.db
      .prepare(
        `UPDATE revisions SET status = ?, error = ?, finished_at = ?, ran = ?, images = COALESCE(?, images), left_services = ?
         WHERE deployment = ? AND rev = ? AND status = 'pending'`,
      )
      .run(
        outcome.status,
        outcome.error ?? null,
        new Date().toISOString(),
        outcome.ran ? 1 : 0,
        outcome.images ? JSON.stringify(outcome.images) : null,
        outcome.left ? JSON.stringify(outcome.left) : null,
        deployment,
        rev,
      );
    this.prune(deployment);
  }

  /**
   * A deployment whose files changed without a run (an update or a create without start) ran that revision's model
   * later (a start): the images are recorded then, for the newest revision of that very model.
   */
  ranLater(deployment: string, modelHash: string, images: Record<string, RevisionImage>): void {
    this.db
      .prepare(
        `UPDATE revisions SET ran = 1, images = ? WHERE deployment = ? AND ran = 0 AND status = 'succeeded' AND model_hash = ?
           AND rev = (SELECT MAX(rev) FROM revisions WHERE deployment = ?)`,
      )
      .run(JSON.stringify(images), deployment, modelHash, deployment);
  }

  /** The deployment's revisions, newest first. */
  list(deployment: string, limit: number, offset: number): { items: Revision[]; total: number } {
    const { n } = this.db.prepare('SELECT COUNT(*) AS n FROM revisions WHERE deployment = ?').get(deployment) as { n: number };
    const rows = this.db
      .prepare(`SELECT ${SUMMARY_COLUMNS} FROM revisions WHERE deployment = ? ORDER BY rev DESC LIMIT ? OFFSET ?`)
      .all(deployment, limit, offset) as Row[];
    return { items: rows.map(summaryOf), total: n };
  }

  get(deployment: string, rev: number): RevisionRecord | null {
    const r = this.db.prepare('SELECT * FROM revisions WHERE deployment = ? AND rev = ?').get(deployment, rev) as Row | undefined;
    if (!r) return null;
    return {
      ...summaryOf(r),
      compose_file: r.compose_file,
      compose_content: r.compose_content,
      env_sealed: r.env_sealed,
      model: parse<Record<string, unknown> | null>(r.model, null),
      model_hash: r.model_hash,
    };
  }

  /** The newest revision of a deployment. */
  latest(deployment: string): Revision | null {
    const r = this.db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM revisions WHERE deployment = ? ORDER BY rev DESC LIMIT 1`).get(deployment) as Row | undefined;
    return r ? summaryOf(r) : null;
  }

  /** The newest revision before `rev` that succeeded and ran (what the deployment ran before that change). */
  lastGood(deployment: string, rev: number): Revision | null {
    const r = this.db
      .prepare(
        `SELECT ${SUMMARY_COLUMNS} FROM revisions WHERE deployment = ? AND rev < ? AND status = 'succeeded' AND ran = 1 AND model IS NOT NULL
           ORDER BY rev DESC LIMIT 1`,
      )
      .get(deployment, rev) as Row | undefined;
    return r ? summaryOf(r) : null;
  }

  /** The `.env` values of a revision (secrets in clear: never answer them). */
  env(record: RevisionRecord): Record<string, string> {
    return parseEnv(this.sealer.open(record.env_sealed));
  }

  /** Drops the oldest finished revisions of a deployment beyond the setting. */
  prune(deployment: string): number {
    const keep = this.keep();
    return this.db
      .prepare(
        `DELETE FROM revisions WHERE deployment = ? AND status != 'pending'
           AND rev NOT IN (SELECT rev FROM revisions WHERE deployment = ? ORDER BY rev DESC LIMIT ?)`,
      )
      .run(deployment, deployment, keep).changes;
  }

  /** A deleted deployment's revisions stay under its retired name (global principals read them). */
  retire(deployment: string, retiredAs: string): number {
    return this.db.prepare('UPDATE revisions SET deployment = ? WHERE deployment = ?').run(retiredAs, deployment).changes;
  }
}

/** Docker Hub spells the same repository several ways: `nginx`, `library/nginx`, `docker.io/library/nginx`. */
function canonicalRepository(ref: string): string {
  const at = ref.indexOf('@');
  let repo = at === -1 ? ref : ref.slice(0, at);
  const slash = repo.lastIndexOf('/');
  const colon = repo.lastIndexOf(':');
  if (colon > slash) repo = repo.slice(0, colon);
  repo = repo.replace(/^(docker\.io|index\.docker\.io|registry-1\.docker\.io)\//, '');
  if (!repo.includes('/')) repo = `library/${repo}`;
  return repo;
}

/** The registry digest of `image` among an image's digests: the one of the repository the model names. */
export function digestFor(image: string, digests: string[]): string | null {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return image;
  const repo = canonicalRepository(image);
  return digests.find((d) => canonicalRepository(d) === repo) ?? null;
}

/** What a pinned service runs: the registry digest when there is one (the same repository), else the image id. */
export const pinOf = (image: RevisionImage): string | null => image.digest ?? image.id;

/**
 * The image each service of a model runs now, read from its containers (a running one first): its id, and the
 * registry digest of the repository the model names.
 */
export async function imagesOf(docker: DockerService, project: string, model: Readonly<Record<string, any>>): Promise<Record<string, RevisionImage>> {
  const containers = await docker.images.ofProject(project);
  const out: Record<string, RevisionImage> = {};
  const inspected = new Map<string, Promise<string[]>>();
  for (const [service, def] of Object.entries((model.services ?? {}) as Record<string, any>)) {
    const mine = containers.filter((c) => c.service === service);
    const container = mine.find((c) => c.state === 'running') ?? mine[0];
    const image = typeof def?.image === 'string' ? def.image : (container?.image ?? '');
    if (!container) {
      out[service] = { image, id: null, digest: null };
      continue;
    }
    let digests = inspected.get(container.image_id);
    if (!digests) {
      digests = docker.images.inspect(container.image_id).then((i) => i?.digests ?? []);
      inspected.set(container.image_id, digests);
    }
    out[service] = { image, id: container.image_id, digest: digestFor(image, await digests) };
  }
  return out;
}
