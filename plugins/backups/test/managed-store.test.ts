/**
 * A managed object store: provisioned on this host (image built locally from the agent's Node binary and the
 * bundled S3 server), used through the S3 API with its generated credentials, attached to a deployment (env vars
 * + network), and used as a backup destination.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, runId, sha256, uniqueName, waitJob } from './helpers/env.js';

const store = uniqueName('store');
const client = uniqueName('client');
let agent: TestAgent;

beforeAll(async () => {
  agent = await startAgent({
    plugins: ['docker', 'deployments', 'backups'],
    config: { backups: { managed_store_labels: { 'agent.test': '1' } } },
  });
  const res = await agent.api('POST', '/deployments', {
    body: {
      name: client,
      auto_start: true,
      compose_content:
        'services:\n  app:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    env_file: .env\n    stop_signal: SIGKILL\n    labels:\n      agent.test: "1"\n',
    },
  });
  expect(res.status, res.text).toBe(201);
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  cleanupDocker();
  cleanupDocker(`objstore-b${runId}`);
  spawnSync('docker', ['network', 'rm', `agent-objstore-${store}`]);
});

describe('managed object store', () => {
  it('provisions a store on this host and registers it with generated credentials', async () => {
    const res = await agent.api('POST', '/object-stores/provision-managed', { body: { name: store, bucket: 'backups-here' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({
      name: store,
      type: 'managed',
      deployment: `objstore-${store}`,
      bucket: 'backups-here',
      internal_endpoint: `http://objstore-${store}:9000`,
    });
    expect(res.text).not.toMatch(/secret_access_key/);
    const buckets = await agent.api('GET', `/object-stores/${store}/buckets`);
    expect(buckets.body.data.map((b: any) => b.name)).toEqual(['backups-here']);
    const dest = await agent.api('GET', '/backup-destinations');
    expect(dest.body.data).toContainEqual(expect.objectContaining({ name: store, type: 'managed' }));
    expect((await agent.api('POST', '/object-stores/provision-managed', { body: { name: store } })).status).toBe(409);
  });

  it('round-trips objects through its S3 API and refuses wrong credentials', async () => {
    const body = randomBytes(9 * 1024 * 1024 + 5);
    const up = await agent.api('POST', `/object-stores/${store}/objects`, {
      query: { bucket: 'backups-here', key: 'dir/data file.bin' },
      raw: body,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(up.status, up.text).toBe(201);
    const url = new URL(`/api/object-stores/${store}/objects/download`, agent.url);
    url.searchParams.set('bucket', 'backups-here');
    url.searchParams.set('key', 'dir/data file.bin');
    const got = await fetch(url, { headers: { authorization: `Bearer ${agent.token}` } });
    expect(sha256(Buffer.from(await got.arrayBuffer()))).toBe(sha256(body));
    const s = (await agent.api('GET', `/object-stores/${store}`)).body.data;
    const wrong = await agent.api('POST', '/object-stores', {
      body: { name: uniqueName('wrong'), endpoint: s.endpoint, access_key_id: 'AKNOTTHEKEY', secret_access_key: 'nope' },
    });
    expect(wrong.status).toBe(201);
    const denied = await agent.api('GET', `/object-stores/${uniqueName('wrong')}/buckets`);
    expect(denied.status).toBe(502);
    expect(denied.body.code).toBe('OBJECT_STORE_AUTH_FAILED');
  });

  it('attaches a deployment: S3_* variables and network access, the deployment recreated', async () => {
    const res = await agent.api('POST', `/object-stores/${store}/attach`, { body: { deployment: client, bucket: 'app-data', prefix: 'uploads/' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ deployment: client, endpoint: `http://objstore-${store}:9000`, bucket: 'app-data' });
    expect(res.body.data.env).toEqual(expect.arrayContaining(['S3_ENDPOINT', 'S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY', 'S3_BUCKET']));
    const id = spawnSync('docker', ['ps', '-q', '--filter', `label=com.docker.compose.project=${client}`], { encoding: 'utf8' }).stdout.trim();
    const env = spawnSync('docker', ['exec', id, 'env'], { encoding: 'utf8' }).stdout;
    expect(env).toContain(`S3_ENDPOINT=http://objstore-${store}:9000`);
    expect(env).toContain('S3_BUCKET=app-data');
    // Reachable by name from inside the deployment: anonymous requests get the store's 403 answer.
    const probe = spawnSync('docker', ['exec', id, 'wget', '-q', '-O', '-', `http://objstore-${store}:9000/`], { encoding: 'utf8' });
    expect(`${probe.stdout}${probe.stderr}`).toMatch(/403/);
    const buckets = await agent.api('GET', `/object-stores/${store}/buckets`);
    expect(buckets.body.data.map((b: any) => b.name)).toContain('app-data');
  });

  it('takes backups as a destination', async () => {
    const res = await agent.api('POST', '/backups', { body: { deployment_name: client, include_database: false, destination: store } });
    expect(res.status, res.text).toBe(202);
    const job = await waitJob(agent, res.body.data.job_id);
    expect(job.status, job.error).toBe('completed');
    const b = (await agent.api('GET', `/backups/${job.result.backup_id}`)).body.data;
    expect(b.remote).toMatchObject({ store, bucket: 'backups-here' });
    const objects = await agent.api('GET', `/object-stores/${store}/objects`, { query: { bucket: 'backups-here', prefix: `${client}/` } });
    expect(objects.body.data.map((o: any) => [o.key, o.size])).toEqual([[b.remote.key, b.size]]);
  });
});
