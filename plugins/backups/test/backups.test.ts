/**
 * Backups and restores against the real engine: a deployment with a PostgreSQL service (image built locally)
 * holding rows and files; archives uploaded to a real S3 API server (s3rver).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, psql, sha256, treeHashes, uniqueName, until, waitJob, waitPostgres } from './helpers/env.js';
import { ensurePostgresImage } from './helpers/postgres-image.js';
import { startS3Server, type S3Server } from './helpers/s3server.js';

const app = uniqueName('app');
const copy = uniqueName('copy');
let agent: TestAgent;
let s3: S3Server;
let folder: string;
let original: Record<string, string>;

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

/** Files we compare, leaving out what the backup excludes and the agent's own metadata. */
const excluded = (rel: string) => rel.endsWith('.log') || rel === 'cache' || rel.startsWith('cache/') || rel === '.agent.json';

async function backup(body: Record<string, unknown>) {
  const res = await agent.api('POST', '/backups', { body: { deployment_name: app, ...body } });
  expect(res.status, res.text).toBe(202);
  expect(res.body.data).toMatchObject({ job_id: expect.any(String), message: expect.any(String) });
  return waitJob(agent, res.body.data.job_id);
}

async function restore(id: string, body: Record<string, unknown>) {
  const res = await agent.api('POST', `/backups/${id}/restore`, { body });
  expect(res.status, res.text).toBe(202);
  return waitJob(agent, res.body.data.job_id, 180_000);
}

beforeAll(async () => {
  const image = ensurePostgresImage();
  [agent, s3] = await Promise.all([startAgent({ plugins: ['docker', 'deployments', 'backups'] }), startS3Server()]);
  const reg = await agent.api('POST', '/object-stores', {
    body: {
      name: 'offsite',
      endpoint: s3.endpoint,
      access_key_id: s3.accessKeyId,
      secret_access_key: s3.secretAccessKey,
      bucket: 'agent-backups',
      prefix: 'host1/',
    },
  });
  expect(reg.status, reg.text).toBe(201);
  const created = await agent.api('POST', '/deployments', {
    body: { name: app, compose_content: compose(image), env_vars: [{ key: 'DB_PASSWORD', value: 'pg-Secret-1' }], auto_start: true },
  });
  expect(created.status, created.text).toBe(201);
  folder = created.body.data.path;
  mkdirSync(join(folder, 'data/nested'), { recursive: true });
  mkdirSync(join(folder, 'cache'), { recursive: true });
  mkdirSync(join(folder, 'logs'), { recursive: true });
  writeFileSync(join(folder, 'data/blob.bin'), randomBytes(3 * 1024 * 1024));
  writeFileSync(join(folder, 'data/nested/notes.txt'), 'important notes\n');
  writeFileSync(join(folder, 'cache/tmp.bin'), randomBytes(1000));
  writeFileSync(join(folder, 'logs/app.log'), 'a log line\n');
  await waitPostgres(app);
  psql(app, 'CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL); INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 1000) g;');
  original = treeHashes(folder, excluded);
}, 240_000);

afterAll(async () => {
  await agent?.stop();
  await s3?.stop();
  cleanupDocker();
});

describe('backups and restores', () => {
  let full: any;

  it('backs up files and the database into one archive, uploaded to the configured store', async () => {
    const job = await backup({ include_database: true, exclude_patterns: ['*.log', 'cache'], description: 'before the accident', destination: 'offsite' });
    expect(job.status, job.error).toBe('completed');
    expect(job).toMatchObject({ type: 'backup', deployment: app, progress: { step: 'done' }, error: null });
    expect(job.progress.bytes).toBeGreaterThan(3 * 1024 * 1024);
    expect(job.duration_ms).toBeGreaterThan(0);
    const res = await agent.api('GET', `/backups/${job.result.backup_id}`);
    expect(res.status).toBe(200);
    full = res.body.data;
    expect(full).toMatchObject({ deployment: app, status: 'completed', description: 'before the accident', destination: 'offsite', upload_error: null });
    expect(full.components.map((c: any) => c.name)).toEqual(['files', 'database:db']);
    expect(full.components[1]).toMatchObject({ engine: 'postgres', databases: ['appdb'] });
    for (const c of full.components) expect(c.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(full.remote).toMatchObject({ store: 'offsite', bucket: 'agent-backups', key: `host1/${app}/${full.id}.tar.gz` });
    const remote = await agent.api('GET', '/object-stores/offsite/objects', { query: { bucket: 'agent-backups', prefix: `host1/${app}/` } });
    expect(remote.body.data.map((o: any) => [o.key, o.size])).toContainEqual([full.remote.key, full.size]);
    // The dump holds the rows and nothing of the password.
    const dl = await fetch(`${agent.url}/api/backups/${full.id}/download`, { headers: { authorization: `Bearer ${agent.token}` } });
    expect(dl.status).toBe(200);
    expect(dl.headers.get('content-type')).toBe('application/gzip');
    const bytes = Buffer.from(await dl.arrayBuffer());
    expect(dl.headers.get('content-length')).toBe(String(bytes.length));
    expect(sha256(bytes)).toBe(full.sha256);
    const listed = await agent.api('GET', '/backups', { query: { deployment: app } });
    expect(listed.body.data.map((b: any) => b.id)).toContain(full.id);
    const perDeployment = await agent.api('GET', `/deployments/${app}/backups`);
    expect(perDeployment.body.data.map((b: any) => b.id)).toEqual([full.id]);
  });

  it('restores files (identical hashes) and rows after data loss, keeping excluded files', async () => {
    rmSync(join(folder, 'data/blob.bin'));
    writeFileSync(join(folder, 'data/nested/notes.txt'), 'overwritten by mistake\n');
    writeFileSync(join(folder, 'data/new-junk.txt'), 'not in the backup');
    writeFileSync(join(folder, 'logs/app.log'), 'newer log line\n');
    psql(app, 'DELETE FROM items WHERE id > 10');
    expect(psql(app, 'SELECT count(*) FROM items')).toBe('10');

    const job = await restore(full.id, {});
    expect(job.status, job.error).toBe('completed');
    expect(job.result).toMatchObject({ target: app, restored_files: true, restored_databases: ['db'] });
    expect(treeHashes(folder, excluded)).toEqual(original);
    // Excluded paths were not in the backup: the restore keeps the current ones.
    expect(readFileSync(join(folder, 'logs/app.log'), 'utf8')).toBe('newer log line\n');
    await waitPostgres(app);
    expect(psql(app, 'SELECT count(*), sum(id) FROM items')).toBe('1000|500500');
    const d = await agent.api('GET', `/deployments/${app}`);
    expect(d.body.data.status).toBe('running');
  });

  it('restores into a new deployment', async () => {
    const job = await restore(full.id, { target_name: copy });
    expect(job.status, job.error).toBe('completed');
    const d = await agent.api('GET', `/deployments/${copy}`);
    expect(d.status).toBe(200);
    expect(d.body.data.status).toBe('running');
    expect(treeHashes(d.body.data.path, excluded)).toEqual(original);
    await waitPostgres(copy);
    expect(psql(copy, 'SELECT count(*) FROM items')).toBe('1000');
  });

  it('refuses a corrupted archive with 400 and changes nothing', async () => {
    const job = await backup({ include_database: false, exclude_patterns: ['*.log', 'cache'] });
    expect(job.status, job.error).toBe('completed');
    const id = job.result.backup_id;
    const archive = join(agent.dataDir, 'plugins/backups/archives', `${id}.tar.gz`);
    const bytes = readFileSync(archive);
    bytes[Math.floor(bytes.length / 2)]! ^= 0x55;
    writeFileSync(archive, bytes);
    writeFileSync(join(folder, 'data/after.txt'), 'written after the backup');
    const res = await agent.api('POST', `/backups/${id}/restore`, { body: {} });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('BACKUP_CORRUPT');
    expect(res.body.error).toMatch(/corrupted/);
    expect(readFileSync(join(folder, 'data/after.txt'), 'utf8')).toBe('written after the backup');
    expect(psql(app, 'SELECT count(*) FROM items')).toBe('1000');
    expect((await agent.api('DELETE', `/backups/${id}`)).status).toBe(200);
    expect(existsSync(archive)).toBe(false);
    rmSync(join(folder, 'data/after.txt'));
  });

  it('rejects bad input with clear 4xx answers', async () => {
    const unknown = await agent.api('POST', '/backups', { body: { deployment_name: 'no-such-deployment' } });
    expect(unknown.status).toBe(404);
    for (const pattern of ['../etc', '/etc/passwd', 'data/../../x']) {
      const res = await agent.api('POST', '/backups', { body: { deployment_name: app, exclude_patterns: [pattern] } });
      expect(res.status, pattern).toBe(400);
      expect(res.body.code).toBe('INVALID_PATTERN');
    }
    const cron = await agent.api('PUT', `/deployments/${app}/backup-config`, { body: { enabled: true, schedule: '61 * * * *' } });
    expect(cron.status).toBe(400);
    expect(cron.body.code).toBe('INVALID_CRON');
    expect(cron.body.error).toMatch(/schedule/);
    expect((await agent.api('PUT', `/deployments/${app}/backup-config`, { body: { destination: 'nowhere' } })).status).toBe(400);
    expect((await agent.api('GET', '/backups/bkp_20200101000000_deadbeef')).status).toBe(404);
    expect((await agent.api('GET', '/backups/not-an-id')).status).toBe(400);
    expect((await agent.api('POST', `/backups/${full.id}/restore`, { body: { target_name: '../evil' } })).status).toBe(400);
    expect((await agent.api('POST', '/backups', { body: { deployment_name: app, include_files: false, include_database: false } })).status).toBe(400);
  });

  it('a failed backup leaves no archive behind and is reported by its job', async () => {
    const before = (await agent.api('GET', '/backups', { query: { deployment: app } })).body.data.length;
    expect((await agent.api('POST', `/deployments/${app}/stop`)).status).toBe(200);
    const job = await backup({ include_database: true });
    expect(job.status).toBe('failed');
    expect(job.error).toMatch(/not running/);
    expect((await agent.api('GET', '/backups', { query: { deployment: app } })).body.data.length).toBe(before);
    const dir = join(agent.dataDir, 'plugins/backups/archives');
    expect(readdirSync(dir).filter((f) => f.endsWith('.partial'))).toEqual([]);
    expect((await agent.api('POST', `/deployments/${app}/start`)).status).toBe(200);
    await waitPostgres(app);
  });

  it('a restore that fails half-way puts the target back as it was (files and rows)', async () => {
    const other = uniqueName('other');
    const created = await agent.api('POST', '/deployments', {
      body: { name: other, compose_content: compose(ensurePostgresImage()), env_vars: [{ key: 'DB_PASSWORD', value: 'other-pw' }], auto_start: true },
    });
    expect(created.status, created.text).toBe(201);
    const otherFolder = created.body.data.path;
    writeFileSync(join(otherFolder, 'precious.txt'), 'keep me');
    await waitPostgres(other);
    // A table the backup does not know depends on 'items': loading the dump (which drops 'items') fails.
    psql(
      other,
      "CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'one'), (2, 'two'); CREATE TABLE refs (item_id int REFERENCES items(id)); INSERT INTO refs VALUES (1);",
    );
    const before = treeHashes(otherFolder);
    const job = await restore(full.id, { target_name: other });
    expect(job.status).toBe('failed');
    expect(job.error).toMatch(/loading the dump/);
    expect(treeHashes(otherFolder)).toEqual(before);
    await waitPostgres(other);
    expect(psql(other, 'SELECT count(*) FROM items')).toBe('2');
    expect(psql(other, 'SELECT count(*) FROM refs')).toBe('1');
    expect((await agent.api('GET', `/deployments/${other}`)).body.data.status).toBe('running');
    expect(readdirSync(join(otherFolder, '..')).filter((n) => n.startsWith('.restore-'))).toEqual([]);
  });

  it('runs scheduled backups from the backup config and prunes beyond the retention', async () => {
    const put = await agent.api('PUT', `/deployments/${app}/backup-config`, {
      body: { enabled: true, schedule: '*/2 * * * * *', retention: 2, include_database: true, exclude_patterns: ['*.log', 'cache'], destination: 'local' },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data).toMatchObject({ enabled: true, retention: 2, next_run: expect.any(String) });
    await until(
      () => agent.api('GET', '/backups/jobs', { query: { deployment: app, type: 'backup', limit: 100 } }),
      (r) => r.body.data.filter((j: any) => j.trigger === 'scheduled' && j.status === 'completed').length >= 3,
      90_000,
      500,
    );
    expect((await agent.api('PUT', `/deployments/${app}/backup-config`, { body: { enabled: false } })).status).toBe(200);
    await until(
      () => agent.api('GET', '/backups/jobs', { query: { deployment: app, limit: 100 } }),
      (r) => r.body.data.every((j: any) => j.status === 'completed' || j.status === 'failed'),
      60_000,
      300,
    );
    const list = (await agent.api('GET', `/deployments/${app}/backups`)).body.data;
    expect(list).toHaveLength(2);
    expect(list.every((b: any) => b.trigger === 'scheduled')).toBe(true);
    // The oldest (manual) backup was pruned, with its uploaded copy.
    expect((await agent.api('GET', `/backups/${full.id}`)).status).toBe(404);
    const remote = await agent.api('GET', '/object-stores/offsite/objects', { query: { bucket: 'agent-backups', prefix: `host1/${app}/` } });
    expect(remote.body.data).toEqual([]);
  });

  it('checks the files a backup brings back before anything of them runs', async () => {
    // What a container with the folder mounted could have written before the backup was taken.
    const file = join(folder, 'docker-compose.yml');
    const good = readFileSync(file, 'utf8');
    writeFileSync(file, good.replace('  web:\n', '  web:\n    privileged: true\n    volumes: ["/:/host"]\n'));
    const job = await backup({ include_database: false, exclude_patterns: ['*.log', 'cache'] });
    writeFileSync(file, good);
    expect(job.status, job.error).toBe('completed');
    const id = job.result.backup_id;
    const privileged = () =>
      spawnSync('docker', ['ps', '-q', '--filter', `label=com.docker.compose.project=${app}`], { encoding: 'utf8' })
        .stdout.split('\n')
        .filter(Boolean)
        .some((c) => spawnSync('docker', ['inspect', '-f', '{{.HostConfig.Privileged}}', c], { encoding: 'utf8' }).stdout.trim() === 'true');

    const intoNew = await restore(id, { target_name: uniqueName('evil') });
    expect(intoNew.status).toBe('failed');
    expect(intoNew.error).toMatch(/privileged/);
    expect((await agent.api('GET', `/deployments/${uniqueName('evil')}`)).status).toBe(404);

    const inPlace = await restore(id, { restore_database: false });
    expect(inPlace.status).toBe('failed');
    expect(inPlace.error).toMatch(/privileged/);
    // The restore rolled back: the folder holds the good file again and nothing privileged runs.
    expect(readFileSync(file, 'utf8')).toBe(good);
    expect(privileged()).toBe(false);
    expect((await agent.api('DELETE', `/backups/${id}`)).status).toBe(200);
  });
});
