/**
 * `POST /api/backups/upload` against the real agent and engine: an archive made by a backup of a real deployment
 * (files and a PostgreSQL dump), downloaded, its backup deleted, uploaded and restored (files and rows back); corrupt
 * archives refused with 400 BACKUP_CORRUPT; archives over the limit 413 (declared length and streamed); tenants
 * (a scoped user, a key limited to its deployment, a viewer) only for their own deployments. Nothing of a refused
 * upload stays on disk.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, psql, sha256, treeHashes, uniqueName, waitJob, waitPostgres } from './helpers/env.js';
import { ensurePostgresImage } from './helpers/postgres-image.js';
import { createTenant, createUser, grant, type Tenant } from './helpers/tenants.js';
import { upload } from './helpers/upload.js';

const app = uniqueName('up');
const A = uniqueName('upa');
const B = uniqueName('upb');
const LIMIT = 2 * 1024 * 1024;
let agent: TestAgent;
let folder: string;
let original: Record<string, string>;
let alice: Tenant;
let bob: Tenant;

const compose = (image: string) => `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "exec httpd -f -p 80 -h /www"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
  db:
    image: ${image}
    environment:
      POSTGRES_USER: app
      POSTGRES_PASSWORD: \${DB_PASSWORD}
      POSTGRES_DB: appdb
    volumes:
      - dbdata:/var/lib/postgresql/data
    labels:
      agent.test: "1"
volumes:
  dbdata: {}
`;

const web = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "exec httpd -f -p 80 -h /www"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

const skipAgentFile = (rel: string) => rel === '.agent.json';
const archives = () => readdirSync(join(agent.dataDir, 'plugins/backups/archives')).sort();
/** What uploads left below the data folder (request folders and their files). */
const leftovers = () => (existsSync(join(agent.dataDir, 'uploads')) ? readdirSync(join(agent.dataDir, 'uploads'), { recursive: true }) : []);

/** A backup made through the API, its archive downloaded; the backup is deleted when `drop` (only the bytes remain). */
async function archiveOf(deployment: string, drop: boolean, body: Record<string, unknown> = {}): Promise<{ id: string; bytes: Buffer; record: any }> {
  const res = await agent.api('POST', '/backups', { body: { deployment_name: deployment, ...body } });
  expect(res.status, res.text).toBe(202);
  const job = await waitJob(agent, res.body.data.job_id);
  expect(job.status, job.error).toBe('completed');
  const id = job.result.backup_id as string;
  const record = (await agent.api('GET', `/backups/${id}`)).body.data;
  const dl = await fetch(`${agent.url}/api/backups/${id}/download`, { headers: { authorization: `Bearer ${agent.token}` } });
  expect(dl.status).toBe(200);
  const bytes = Buffer.from(await dl.arrayBuffer());
  if (drop) expect((await agent.api('DELETE', `/backups/${id}`)).status).toBe(200);
  return { id, bytes, record };
}

beforeAll(async () => {
  const image = ensurePostgresImage();
  agent = await startAgent({ plugins: ['access', 'docker', 'deployments', 'backups'], config: { backups: { upload_limit: '2mb' } } });
  const created = await agent.api('POST', '/deployments', {
    body: { name: app, compose_content: compose(image), env_vars: [{ key: 'DB_PASSWORD', value: 'pg-Upload-1' }], auto_start: true },
  });
  expect(created.status, created.text).toBe(201);
  folder = created.body.data.path;
  mkdirSync(join(folder, 'data/nested'), { recursive: true });
  writeFileSync(join(folder, 'data/blob.bin'), randomBytes(512 * 1024));
  writeFileSync(join(folder, 'data/nested/notes.txt'), 'notes worth keeping\n');
  for (const name of [A, B]) {
    const res = await agent.api('POST', '/deployments', { body: { name, compose_content: web, auto_start: false } });
    expect(res.status, res.text).toBe(201);
    mkdirSync(join(res.body.data.path, 'www'), { recursive: true });
    writeFileSync(join(res.body.data.path, 'www/index.html'), `page of ${name}\n`);
  }
  [alice, bob] = await Promise.all([createTenant(agent, 'alice', A), createTenant(agent, 'bob', B)]);
  await waitPostgres(app);
  psql(app, 'CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL); INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 500) g;');
  original = treeHashes(folder, skipAgentFile);
}, 240_000);

afterAll(async () => {
  await agent?.stop();
  cleanupDocker();
});

describe('uploading a backup archive', () => {
  let made: { id: string; bytes: Buffer; record: any };

  it('keeps an uploaded archive of a real backup as a backup of its deployment, and restores it: files and rows back', async () => {
    made = await archiveOf(app, true, { include_database: true });
    expect((await agent.api('GET', `/backups/${made.id}`)).status).toBe(404);
    // The accident: files gone or changed, rows deleted.
    rmSync(join(folder, 'data/blob.bin'));
    writeFileSync(join(folder, 'data/nested/notes.txt'), 'overwritten\n');
    psql(app, 'DELETE FROM items WHERE id > 5');

    const before = archives();
    const res = await upload(agent.url, agent.token, made.bytes);
    expect(res.status, res.text).toBe(201);
    const stored = res.body.data;
    expect(stored).toMatchObject({
      deployment: app,
      status: 'completed',
      trigger: 'upload',
      destination: 'local',
      remote: null,
      size: made.bytes.length,
      sha256: sha256(made.bytes),
      include_files: true,
      include_database: true,
      created_by: 'admin',
    });
    expect(stored.id).not.toBe(made.id);
    expect(stored.description).toBe(`uploaded: backup ${made.id} of '${app}' made ${made.record.created_at}`);
    expect(stored.components).toEqual(made.record.components);
    expect(archives()).toEqual([...before, `${stored.id}.tar.gz`].sort());
    expect(leftovers()).toEqual([]);
    expect((await agent.api('GET', `/backups/${stored.id}`)).body.data).toEqual(stored);
    const dl = await fetch(`${agent.url}/api/backups/${stored.id}/download`, { headers: { authorization: `Bearer ${agent.token}` } });
    expect(Buffer.from(await dl.arrayBuffer()).equals(made.bytes)).toBe(true);

    const restore = await agent.api('POST', `/backups/${stored.id}/restore`, { body: {} });
    expect(restore.status, restore.text).toBe(202);
    const job = await waitJob(agent, restore.body.data.job_id, 180_000);
    expect(job.status, job.error).toBe('completed');
    expect(job.result).toMatchObject({ target: app, restored_files: true, restored_databases: ['db'] });
    expect(treeHashes(folder, skipAgentFile)).toEqual(original);
    await waitPostgres(app);
    expect(psql(app, 'SELECT count(*), sum(id) FROM items')).toBe('500|125250');
  });

  it('names the deployment it belongs to with `deployment`, and records the description given', async () => {
    const res = await upload(agent.url, agent.token, made.bytes, { deployment: app, description: 'from the old host' });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ deployment: app, description: 'from the old host' });
    // Audited like every change: what it created, the deployment it named, who.
    const audit = await agent.api('GET', '/audit/events', { query: { action: 'backups.upload', resource_id: res.body.data.id } });
    expect(audit.body.data).toMatchObject([{ resource_id: res.body.data.id, deployment: app, success: true, status: 201, actor_name: 'admin' }]);
    const unknown = await upload(agent.url, agent.token, made.bytes, { deployment: uniqueName('nowhere') });
    expect(unknown.status).toBe(404);
    const bad = await upload(agent.url, agent.token, made.bytes, { deployment: '../etc' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('body.deployment');
    expect(leftovers()).toEqual([]);
  });

  it('refuses a corrupt archive with 400 BACKUP_CORRUPT and keeps nothing of it', async () => {
    const flipped = Buffer.from(made.bytes);
    flipped[Math.floor(flipped.length / 2)]! ^= 0x55;
    const before = archives();
    const listed = (await agent.api('GET', '/backups', { query: { deployment: app } })).body.data.length;
    const refusals = async () =>
      (await agent.api('GET', '/audit/events', { query: { action: 'backups.upload', success: false, limit: 500 } })).body.data.filter(
        (e: any) => e.status === 400,
      ).length;
    const refusedBefore = await refusals();
    const cases: [string, Buffer][] = [
      ['a flipped byte', flipped],
      ['cut short', made.bytes.subarray(0, made.bytes.length - 4096)],
      ['not an archive', randomBytes(10_000)],
      ['gzip of something else', gzipSync(Buffer.from('just some text, no tar and no manifest'))],
      ['empty', Buffer.alloc(0)],
    ];
    for (const [what, bytes] of cases) {
      const res = await upload(agent.url, agent.token, bytes, { deployment: app });
      expect(res.status, `${what}: ${res.text}`).toBe(400);
      expect(res.body.code, what).toBe('BACKUP_CORRUPT');
      expect(res.body.error, what).toMatch(/nothing was stored$/);
    }
    expect(archives()).toEqual(before);
    expect((await agent.api('GET', '/backups', { query: { deployment: app } })).body.data).toHaveLength(listed);
    // Each refusal is audited too.
    expect(await refusals()).toBe(refusedBefore + cases.length);
    expect(leftovers()).toEqual([]);
  });

  it('answers 413 for an archive over the limit, declared or streamed, and keeps nothing of it', async () => {
    writeFileSync(join(folder, 'data/big.bin'), randomBytes(3 * 1024 * 1024));
    const big = await archiveOf(app, true, { include_database: false });
    rmSync(join(folder, 'data/big.bin'));
    expect(big.bytes.length).toBeGreaterThan(LIMIT);
    const before = archives();
    for (const chunked of [false, true]) {
      const res = await upload(agent.url, agent.token, big.bytes, {}, { chunked });
      expect(res.status, `chunked ${chunked}: ${res.text}`).toBe(413);
      expect(res.body.code).toBe('PAYLOAD_TOO_LARGE');
    }
    expect(archives()).toEqual(before);
    await expect.poll(leftovers).toEqual([]);
  });

  it('lets a scoped principal upload for its own deployments only', async () => {
    const own = await archiveOf(A, true);
    const other = await archiveOf(B, true);
    // The archive names another tenant's deployment, or the upload does: the same 404, and nothing of its name.
    for (const [who, token] of [
      ['key', alice.key],
      ['user', alice.user],
    ]) {
      const named = await upload(agent.url, token!, other.bytes);
      expect(named.status, `${who}: ${named.text}`).toBe(404);
      expect(named.text, who).not.toContain(B);
      const explicit = await upload(agent.url, token!, own.bytes, { deployment: B });
      expect(explicit.status, `${who}: ${explicit.text}`).toBe(404);
      expect(explicit.text, who).not.toContain(B);
    }
    expect((await agent.api('GET', '/backups', { query: { deployment: B } })).body.data).toEqual([]);
    // A viewer of the deployment may not create its backups: refused before the upload is read.
    const viewer = await createUser(agent, `upview-${A}`, 'viewer');
    await grant(agent, viewer.id, A, 'read');
    const refused = await upload(agent.url, viewer.token, own.bytes);
    expect(refused.status).toBe(403);
    expect(leftovers()).toEqual([]);

    const mine = await upload(agent.url, alice.key, own.bytes);
    expect(mine.status, mine.text).toBe(201);
    expect(mine.body.data).toMatchObject({ deployment: A, created_by: expect.stringContaining('alice') });
    expect((await agent.api('GET', `/backups/${mine.body.data.id}`, { token: bob.key })).status).toBe(404);
    writeFileSync(join((await agent.api('GET', `/deployments/${A}`)).body.data.path, 'www/index.html'), 'defaced\n');
    const restore = await agent.api('POST', `/backups/${mine.body.data.id}/restore`, { token: alice.key, body: { auto_start: false } });
    expect(restore.status, restore.text).toBe(202);
    expect((await waitJob(agent, restore.body.data.job_id)).status).toBe('completed');
    const dir = (await agent.api('GET', `/deployments/${A}`)).body.data.path;
    expect(treeHashes(dir, skipAgentFile)['www/index.html']).toBe(sha256(`page of ${A}\n`));
  });
});
