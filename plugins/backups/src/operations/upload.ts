/**
 * Uploading an archive (a backup downloaded from this or another agent) as a backup of a deployment, so that the
 * restore route can restore it. The archive is verified as a restore verifies it (every component against the
 * manifest, entries no backup holds refused) before anything is recorded; it belongs to the deployment named in
 * the upload, else to the one its manifest names, and uploading it is creating a backup of that deployment.
 */
import { canReach, defineOperation, deploymentName, errors, isDeploymentName, Type } from '@agent/sdk';
import { ArchiveError, FORMAT, verifyArchive, type Component, type Manifest } from '../archive/backup-archive.js';
import { backupView } from '../backup-store.js';
import type { BackupService } from '../backup-service.js';

/** The fields of `POST /backups/upload` besides the archive. */
export const UploadFields = Type.Object({
  deployment: Type.Optional(deploymentName({ description: "the deployment the backup belongs to; default the one the archive's manifest names" })),
  description: Type.Optional(Type.String({ maxLength: 500 })),
});

const UploadInput = Type.Object({
  archive: Type.Object({ path: Type.String(), size: Type.Integer(), sha256: Type.String() }, { description: 'the uploaded file' }),
  ...UploadFields.properties,
});

const SERVICE = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
const HEX = /^[0-9a-f]{64}$/;
const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
const isText = (v: unknown, max = 1000): v is string => typeof v === 'string' && v.length <= max;
const isTexts = (v: unknown): v is string[] => Array.isArray(v) && v.length <= 10_000 && v.every((s) => isText(s));

/**
 * The manifest of an uploaded archive, checked field by field: verification proved the components match the
 * archive; this keeps what the agent reads later (a record, a restore) to the shapes its own backups have.
 */
function uploadedManifest(m: Manifest): Manifest {
  const refuse = (what: string) => new ArchiveError(`the archive's manifest is not one of a backup (${what})`);
  if (!isText(m.deployment, 200) || !m.deployment) throw refuse('deployment');
  for (const key of ['id', 'created_at', 'description'] as const) if (!isText(m[key] ?? '')) throw refuse(key);
  for (const key of ['compose_file', 'env_file'] as const) if ((m[key] ?? null) !== null && !isText(m[key])) throw refuse(key);
  if (!isTexts(m.exclude_patterns) || !isTexts(m.warnings)) throw refuse('exclude_patterns, warnings');
  const components = m.components.map((c): Component => {
    if (!isText(c.name, 100) || !isCount(c.size) || !HEX.test(String(c.sha256))) throw refuse('components');
    if (c.type === 'files') {
      if (!isCount(c.entries)) throw refuse('files');
      return { name: 'files', type: 'files', entries: c.entries, size: c.size, sha256: c.sha256 };
    }
    if (!SERVICE.test(String(c.service)) || (c.engine !== 'mysql' && c.engine !== 'postgres') || !isCount(c.parts) || !isTexts(c.databases)) {
      throw refuse(`component ${c.name}`);
    }
    return { name: c.name, type: 'database', service: c.service, engine: c.engine, databases: c.databases, parts: c.parts, size: c.size, sha256: c.sha256 };
  });
  return {
    format: FORMAT,
    id: m.id ?? '',
    deployment: m.deployment,
    created_at: m.created_at ?? '',
    description: m.description ?? '',
    compose_file: m.compose_file ?? null,
    env_file: m.env_file ?? null,
    exclude_patterns: m.exclude_patterns,
    components,
    warnings: m.warnings,
  };
}

export function uploadOperation(deps: { service: BackupService; deploymentExists(name: string): boolean }) {
  return defineOperation({
    name: 'backups.upload',
    input: UploadInput,
    resource: (input) => ({ type: 'deployment-backups', id: input.deployment ?? '(from the archive)' }),
    async prepare(input, { principal, signal }) {
      // A named deployment was checked by the core (404 for another tenant's, 403 below write); it must exist.
      if (input.deployment !== undefined && !deps.deploymentExists(input.deployment)) throw errors.notFound(`deployment '${input.deployment}' not found`);
      let manifest: Manifest;
      try {
        manifest = uploadedManifest(await verifyArchive(input.archive.path, { signal }));
      } catch (err) {
        if (err instanceof ArchiveError) throw errors.badRequest(`${err.message}; nothing was stored`, 'BACKUP_CORRUPT');
        // The client left while its archive was verified: its answer, not the agent's failure.
        if (signal?.aborted) throw errors.badRequest('the client went away while the archive was verified; nothing was stored', 'REQUEST_ABORTED');
        throw err;
      }
      const deployment = input.deployment ?? manifest.deployment;
      if (input.deployment === undefined) {
        // The archive names it: the checks the core makes for a named one. A backup is kept only for a deployment that
        // exists: under a name nobody holds, it would be handed to whoever creates a deployment of that name next.
        if (!isDeploymentName(deployment))
          throw errors.badRequest(`body.deployment: the archive was made of '${deployment}': name the deployment it belongs to`);
        // Whose it is, or whether it exists, is not told to a principal that cannot see it (the same 404 either way).
        if (!canReach(principal, deployment) || !deps.deploymentExists(deployment)) {
          throw errors.notFound("the deployment the archive was made of is not found: name one with the field 'deployment'");
        }
        if (!canReach(principal, deployment, 'write')) throw errors.forbidden(`'write' access to deployment '${deployment}' required`);
      }
      const source = `backup ${manifest.id || '(no id)'} of '${manifest.deployment}' made ${manifest.created_at || 'at an unknown time'}`;
      const description = input.description ?? `uploaded: ${source}`.slice(0, 500);
      const after = { deployment, size: input.archive.size, sha256: input.archive.sha256, components: manifest.components.map((c) => c.name), source };
      return {
        value: { file: input.archive, deployment, description, manifest },
        preview: {
          summary: `store an uploaded archive as a backup of '${deployment}'`,
          changes: [{ type: 'backup', id: deployment, actions: ['create'], after }],
        },
      };
    },
    apply: async ({ file, deployment, description, manifest }, { principal }) =>
      backupView(await deps.service.adoptUpload(file, { deployment, description, manifest, created_by: principal.name })),
  });
}
