/** Completed backups, recorded in the plugin's journal (a backup exists here only once its archive is whole). */
import { Type, type SqlDatabase, type Static } from '@agent/sdk';
import type { Manifest } from './archive/backup-archive.js';

export const BackupView = Type.Object({
  id: Type.String(),
  deployment: Type.String(),
  description: Type.String(),
  status: Type.Literal('completed'),
  size: Type.Integer({ description: 'bytes of the .tar.gz' }),
  sha256: Type.String({ description: 'SHA-256 of the .tar.gz' }),
  include_files: Type.Boolean(),
  include_database: Type.Boolean(),
  exclude_patterns: Type.Array(Type.String()),
  components: Type.Array(
    Type.Object({
      name: Type.String(),
      type: Type.String(),
      size: Type.Integer(),
      sha256: Type.String(),
      entries: Type.Optional(Type.Integer()),
      service: Type.Optional(Type.String()),
      engine: Type.Optional(Type.String()),
      databases: Type.Optional(Type.Array(Type.String())),
      parts: Type.Optional(Type.Integer({ description: 'a dump: the parts it is cut into in the archive' })),
    }),
  ),
  warnings: Type.Array(Type.String()),
  destination: Type.String({ description: "'local' or the object store it was uploaded to" }),
  remote: Type.Union([Type.Object({ store: Type.String(), bucket: Type.String(), key: Type.String() }), Type.Null()]),
  upload_error: Type.Union([Type.String(), Type.Null()]),
  trigger: Type.String(),
  created_by: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String(),
  duration_ms: Type.Integer(),
});
export type BackupView = Static<typeof BackupView>;

export interface BackupRecord extends BackupView {
  file: string;
  manifest: Manifest;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS backups (
  id TEXT PRIMARY KEY,
  deployment TEXT NOT NULL,
  created_at TEXT NOT NULL,
  record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS backups_deployment ON backups(deployment, created_at);
`;

export const backupView = (r: BackupRecord): BackupView => {
  const { file: _file, manifest: _manifest, ...view } = r;
  return view;
};

export class BackupStore {
  constructor(private readonly db: SqlDatabase) {
    db.exec(SCHEMA);
  }

  insert(record: BackupRecord): void {
    this.db
      .prepare('INSERT INTO backups (id, deployment, created_at, record) VALUES (?, ?, ?, ?)')
      .run(record.id, record.deployment, record.created_at, JSON.stringify(record));
  }

  update(record: BackupRecord): void {
    this.db.prepare('UPDATE backups SET record = ? WHERE id = ?').run(JSON.stringify(record), record.id);
  }

  get(id: string): BackupRecord | undefined {
    const row = this.db.prepare('SELECT record FROM backups WHERE id = ?').get(id) as { record: string } | undefined;
    return row ? (JSON.parse(row.record) as BackupRecord) : undefined;
  }

  /** Newest first. */
  list(deployment?: string): BackupRecord[] {
    const rows = (
      deployment
        ? this.db.prepare('SELECT record FROM backups WHERE deployment = ? ORDER BY created_at DESC, rowid DESC').all(deployment)
        : this.db.prepare('SELECT record FROM backups ORDER BY created_at DESC, rowid DESC').all()
    ) as { record: string }[];
    return rows.map((r) => JSON.parse(r.record) as BackupRecord);
  }

  /** Records the backups of a deleted deployment under its retired name (archives and uploaded copies stay where they are). */
  retire(deployment: string, retiredAs: string): string[] {
    const ids: string[] = [];
    this.db.transaction(() => {
      for (const record of this.list(deployment)) {
        record.deployment = retiredAs;
        this.db.prepare('UPDATE backups SET deployment = ?, record = ? WHERE id = ?').run(retiredAs, JSON.stringify(record), record.id);
        ids.push(record.id);
      }
    })();
    return ids;
  }

  delete(id: string): void {
    this.db.prepare('DELETE FROM backups WHERE id = ?').run(id);
  }
}
