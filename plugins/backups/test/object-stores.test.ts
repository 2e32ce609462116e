/** Object stores against two real S3 API servers (s3rver): registration, buckets, streamed objects, replication. */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { startS3Server, type S3Server } from './helpers/s3server.js';

let agent: TestAgent;
let s3a: S3Server;
let s3b: S3Server;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function waitJob(id: string) {
  for (let i = 0; i < 300; i++) {
    const res = await agent.api('GET', `/backups/jobs/${id}`);
    if (res.body.data.status === 'completed' || res.body.data.status === 'failed') return res.body.data;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`job ${id} did not finish`);
}

async function download(store: string, bucket: string, key: string) {
  const url = new URL(`/api/object-stores/${store}/objects/download`, agent.url);
  url.searchParams.set('bucket', bucket);
  url.searchParams.set('key', key);
  const res = await fetch(url, { headers: { authorization: `Bearer ${agent.token}` } });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

const upload = (store: string, bucket: string, key: string, body: Buffer) =>
  agent.api('POST', `/object-stores/${store}/objects`, { query: { bucket, key }, raw: body, headers: { 'content-type': 'application/octet-stream' } });

beforeAll(async () => {
  [s3a, s3b, agent] = await Promise.all([startS3Server(), startS3Server(), startAgent({ plugins: ['backups'] })]);
  for (const [name, s] of [
    ['store-a', s3a],
    ['store-b', s3b],
  ] as const) {
    const res = await agent.api('POST', '/object-stores', {
      body: { name, endpoint: s.endpoint, access_key_id: s.accessKeyId, secret_access_key: `${s.secretAccessKey}`, path_style: true },
    });
    expect(res.status, res.text).toBe(201);
  }
});

afterAll(async () => {
  await agent?.stop();
  await Promise.all([s3a?.stop(), s3b?.stop()]);
});

describe('object stores', () => {
  it('registers stores without ever returning the secret, and keeps it encrypted at rest', async () => {
    const res = await agent.api('POST', '/object-stores', {
      body: { name: 'secret-check', endpoint: s3a.endpoint, access_key_id: 'AKIDCHECK', secret_access_key: 'very-secret-value-123' },
    });
    expect(res.status).toBe(201);
    expect(res.text).not.toContain('very-secret-value-123');
    const list = await agent.api('GET', '/object-stores');
    expect(list.text).not.toContain('very-secret-value-123');
    expect(list.body.data.map((s: any) => s.name)).toEqual(expect.arrayContaining(['store-a', 'store-b', 'secret-check']));
    const dir = join(agent.dataDir, 'plugins', 'backups');
    for (const f of readdirSync(dir))
      if (f.endsWith('.json') || f.endsWith('.enc')) expect(readFileSync(join(dir, f), 'utf8')).not.toContain('very-secret-value-123');
    expect(readdirSync(dir)).toContain('object-stores.json.enc');
    const dup = await agent.api('POST', '/object-stores', {
      body: { name: 'secret-check', endpoint: s3a.endpoint, access_key_id: 'x', secret_access_key: 'y' },
    });
    expect(dup.status).toBe(409);
    expect((await agent.api('DELETE', '/object-stores/secret-check')).status).toBe(200);
    const dest = await agent.api('GET', '/backup-destinations');
    expect(dest.body.data.map((d: any) => d.name)).toEqual(['local', 'store-a', 'store-b']);
  });

  it('creates buckets and round-trips objects byte for byte (streamed upload and download)', async () => {
    expect((await agent.api('POST', '/object-stores/store-a/buckets', { body: { bucket: 'photos' } })).status).toBe(201);
    expect((await agent.api('POST', '/object-stores/store-a/buckets', { body: { bucket: 'photos' } })).status).toBe(409);
    const buckets = await agent.api('GET', '/object-stores/store-a/buckets');
    expect(buckets.body.data.map((b: any) => b.name)).toContain('photos');

    const big = randomBytes(11 * 1024 * 1024 + 3); // more than one multipart part
    const up = await upload('store-a', 'photos', 'albums/2024/big.bin', big);
    expect(up.status, up.text).toBe(201);
    expect(up.body.data.size).toBe(big.length);
    for (let i = 0; i < 3; i++) expect((await upload('store-a', 'photos', `albums/small-${i}.txt`, Buffer.from(`small ${i}`))).status).toBe(201);

    const got = await download('store-a', 'photos', 'albums/2024/big.bin');
    expect(got.status).toBe(200);
    expect(got.headers.get('content-length')).toBe(String(big.length));
    expect(sha(got.body)).toBe(sha(big));

    const page1 = await agent.api('GET', '/object-stores/store-a/objects', { query: { bucket: 'photos', prefix: 'albums/', limit: 2 } });
    expect(page1.status).toBe(200);
    expect(page1.body.data).toHaveLength(2);
    expect(page1.body.meta.next_token).toBeTruthy();
    const page2 = await agent.api('GET', '/object-stores/store-a/objects', {
      query: { bucket: 'photos', prefix: 'albums/', limit: 2, token: page1.body.meta.next_token },
    });
    expect(page2.body.data).toHaveLength(2);
    const keys = [...page1.body.data, ...page2.body.data].map((o: any) => o.key).sort();
    expect(keys).toEqual(['albums/2024/big.bin', 'albums/small-0.txt', 'albums/small-1.txt', 'albums/small-2.txt']);
    const only2024 = await agent.api('GET', '/object-stores/store-a/objects', { query: { bucket: 'photos', prefix: 'albums/2024/' } });
    expect(only2024.body.data.map((o: any) => o.key)).toEqual(['albums/2024/big.bin']);

    expect((await agent.api('DELETE', '/object-stores/store-a/objects', { query: { bucket: 'photos', key: 'albums/small-2.txt' } })).status).toBe(200);
    expect((await download('store-a', 'photos', 'albums/small-2.txt')).status).toBe(404);
    expect((await agent.api('DELETE', '/object-stores/store-a/objects', { query: { bucket: 'photos', key: 'albums/small-2.txt' } })).status).toBe(404);
  });

  it('refuses traversal in keys, bad bucket names and unknown stores', async () => {
    for (const key of ['../etc/passwd', 'a/../../b', '/abs', 'a/./b']) {
      const res = await upload('store-a', 'photos', key, Buffer.from('x'));
      expect(res.status, key).toBe(400);
      expect(res.body.code).toBe('INVALID_KEY');
      expect((await download('store-a', 'photos', key)).status).toBe(400);
    }
    expect((await agent.api('POST', '/object-stores/store-a/buckets', { body: { bucket: 'Bad_Name' } })).status).toBe(400);
    expect((await agent.api('GET', '/object-stores/nope/buckets')).status).toBe(404);
    const extra = await agent.api('POST', '/object-stores/store-a/buckets', { body: { bucket: 'ok-name', other: 1 } });
    expect(extra.status).toBe(400);
  });

  it('answers 502 with a clear code when the store refuses the credentials', async () => {
    await agent.api('POST', '/object-stores', { body: { name: 'bad-creds', endpoint: s3a.endpoint, access_key_id: 'UNKNOWNKEY', secret_access_key: 'wrong' } });
    const res = await agent.api('GET', '/object-stores/bad-creds/buckets');
    expect(res.status).toBe(502);
    expect(res.body.code).toBe('OBJECT_STORE_AUTH_FAILED');
    await agent.api('DELETE', '/object-stores/bad-creds');
  });

  it('replicates a store to another, skipping identical objects on the next run', async () => {
    await agent.api('POST', '/object-stores/store-a/buckets', { body: { bucket: 'docs' } });
    const files: Record<string, Buffer> = {
      'a.txt': Buffer.from('alpha'),
      'dir/b.bin': randomBytes(200_000),
      'dir/deeper/c.bin': randomBytes(6 * 1024 * 1024),
    };
    for (const [k, v] of Object.entries(files)) expect((await upload('store-a', 'docs', k, v)).status).toBe(201);

    const first = await agent.api('POST', '/object-stores/store-a/replicate', { body: { target: 'store-b', buckets: ['docs', 'photos'] } });
    expect(first.status, first.text).toBe(202);
    const job1 = await waitJob(first.body.data.job_id);
    expect(job1.status, job1.error).toBe('completed');
    expect(job1.result).toMatchObject({ copied: 6, skipped: 0, failed: 0 });
    for (const [k, v] of Object.entries(files)) expect(sha((await download('store-b', 'docs', k)).body)).toBe(sha(v));

    files['a.txt'] = Buffer.from('alpha, changed');
    await upload('store-a', 'docs', 'a.txt', files['a.txt']);
    const second = await agent.api('POST', '/object-stores/store-a/replicate', { body: { target: 'store-b' } });
    const job2 = await waitJob(second.body.data.job_id);
    expect(job2.result).toMatchObject({ copied: 1, skipped: 5, failed: 0, bytes: files['a.txt'].length });
    expect((await download('store-b', 'docs', 'a.txt')).body.toString()).toBe('alpha, changed');

    expect((await agent.api('POST', '/object-stores/store-a/replicate', { body: { target: 'store-a' } })).status).toBe(400);
    expect((await agent.api('POST', '/object-stores/store-a/replicate', { body: { target: 'nope' } })).status).toBe(404);
  });

  it('removes buckets only when empty', async () => {
    await agent.api('POST', '/object-stores/store-b/buckets', { body: { bucket: 'empty-one' } });
    expect((await agent.api('DELETE', '/object-stores/store-b/buckets/empty-one')).status).toBe(200);
    const full = await agent.api('DELETE', '/object-stores/store-b/buckets/docs');
    expect(full.status).toBe(409);
    expect(full.body.code).toBe('BUCKET_NOT_EMPTY');
  });
});
