/**
 * Backups follow their deployment (issue #14): two tenants, each a scoped operator user and a key limited to its
 * deployment, against each other's backups, jobs and archives (also through the object-store routes, which are
 * global); a global operator and viewer; a deleted deployment's backups kept under its retired name, out of reach
 * of a new deployment of the same name. Real engine (busybox deployments), real S3 server (s3rver).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName, until, waitJob } from './helpers/env.js';
import { startS3Server, type S3Server } from './helpers/s3server.js';
import { createGlobal, createTenant, createUser, grant, principalsOf, type Tenant } from './helpers/tenants.js';

const A = uniqueName('ta');
const B = uniqueName('tb');
const A2 = uniqueName('ta2');
const BUCKET = 'agent-backups';
const PREFIX = 'host1/';
let agent: TestAgent;
let s3: S3Server;
/** A second S3 server: the mirror the store is replicated to. */
let s3b: S3Server;
let alice: Tenant;
let bob: Tenant;
let globalOperator: string;
let globalViewer: string;
let aliceViewer: string;
/** One backup of each deployment (made by its own tenant), uploaded to the store. */
let backupA: any;
let backupB: any;
let replicationJob: string;

const compose = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "exec httpd -f -p 80 -h /www"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

const as = (token: string) => ({ token });

async function createDeployment(name: string, token?: string) {
  const res = await agent.api('POST', '/deployments', { ...(token ? { token } : {}), body: { name, compose_content: compose, auto_start: false } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.path as string;
}

async function backupAs(token: string, deployment: string) {
  const res = await agent.api('POST', '/backups', { token, body: { deployment_name: deployment, destination: 'offsite' } });
  expect(res.status, res.text).toBe(202);
  const job = await waitJob(agent, res.body.data.job_id);
  expect(job.status, job.error).toBe('completed');
  return (await agent.api('GET', `/backups/${job.result.backup_id}`)).body.data;
}

const download = (token: string, path: string, query: Record<string, string> = {}) => {
  const url = new URL(`/api${path}`, agent.url);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  return fetch(url, { headers: { authorization: `Bearer ${token}` } }).then(async (r) => ({
    status: r.status,
    text: Buffer.from(await r.arrayBuffer()).toString('latin1'),
  }));
};

beforeAll(async () => {
  [agent, s3, s3b] = await Promise.all([startAgent({ plugins: ['access', 'docker', 'deployments', 'backups'] }), startS3Server(), startS3Server()]);
  const reg = await agent.api('POST', '/object-stores', {
    body: { name: 'offsite', endpoint: s3.endpoint, access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey, bucket: BUCKET, prefix: PREFIX },
  });
  expect(reg.status, reg.text).toBe(201);
  for (const name of [A, B]) {
    const folder = await createDeployment(name);
    mkdirSync(join(folder, 'www'), { recursive: true });
    writeFileSync(join(folder, 'www', 'index.html'), `secret page of ${name}\n`);
  }
  [alice, bob] = await Promise.all([createTenant(agent, 'alice', A), createTenant(agent, 'bob', B)]);
  globalOperator = await createGlobal(agent, 'gop', 'operator');
  globalViewer = await createGlobal(agent, 'gview', 'viewer');
  const viewer = await createUser(agent, `aview-${A}`, 'viewer');
  await grant(agent, viewer.id, A, 'read');
  aliceViewer = viewer.token;
  backupA = await backupAs(alice.user, A);
  backupB = await backupAs(bob.key, B);
  const mirror = await agent.api('POST', '/object-stores', {
    body: { name: 'mirror', endpoint: s3b.endpoint, access_key_id: s3b.accessKeyId, secret_access_key: s3b.secretAccessKey, bucket: 'mirror-backups' },
  });
  expect(mirror.status, mirror.text).toBe(201);
  const mirrored = await agent.api('POST', '/object-stores/offsite/replicate', { body: { target: 'mirror', buckets: [BUCKET] } });
  expect(mirrored.status, mirrored.text).toBe(202);
  replicationJob = mirrored.body.data.job_id;
  expect((await waitJob(agent, replicationJob)).status).toBe('completed');
}, 240_000);

afterAll(async () => {
  await agent?.stop();
  await Promise.all([s3?.stop(), s3b?.stop()]);
  cleanupDocker();
});

describe('backups follow their deployment', () => {
  it("lists only the backups and jobs of the caller's deployments", async () => {
    for (const [who, token] of principalsOf(alice)) {
      const list = await agent.api('GET', '/backups', as(token));
      expect(list.status, who).toBe(200);
      expect(
        list.body.data.map((b: any) => b.id),
        who,
      ).toEqual([backupA.id]);
      expect(list.text, who).not.toContain(B);
      expect((await agent.api('GET', '/backups', { token, query: { deployment: B } })).status, who).toBe(404);
      const jobs = await agent.api('GET', '/backups/jobs', as(token));
      expect(jobs.status, who).toBe(200);
      expect(
        jobs.body.data.every((j: any) => j.deployment === A),
        who,
      ).toBe(true);
      expect(jobs.body.meta.total, who).toBe(jobs.body.data.length);
      expect(jobs.text, who).not.toContain(B);
      expect((await agent.api('GET', '/backups/jobs', { token, query: { deployment: B } })).status, who).toBe(404);
      expect((await agent.api(`GET`, `/deployments/${B}/backups`, as(token))).status, who).toBe(404);
      expect((await agent.api(`GET`, `/deployments/${B}/backup-config`, as(token))).status, who).toBe(404);
    }
    // Global principals see both, and the replication job (of no deployment).
    for (const token of [agent.token, globalOperator, globalViewer]) {
      const ids = (await agent.api('GET', '/backups', as(token))).body.data.map((b: any) => b.id);
      expect(ids).toEqual(expect.arrayContaining([backupA.id, backupB.id]));
      const jobs = (await agent.api('GET', '/backups/jobs', { token, query: { type: 'replicate' } })).body.data.map((j: any) => j.id);
      expect(jobs).toContain(replicationJob);
    }
  });

  it("answers 404 for another tenant's backup or job by id, exactly as for an unknown one", async () => {
    const jobOfB = (await agent.api('GET', '/backups/jobs', { query: { deployment: B } })).body.data[0].id;
    const unknownBackup = 'bkp_20000101000000_00000000';
    const unknownJob = 'job_20000101000000_00000000';
    for (const [who, token] of principalsOf(alice)) {
      const probes: [string, string, unknown?][] = [
        ['GET', `/backups/${backupB.id}`],
        ['DELETE', `/backups/${backupB.id}`],
        ['GET', `/backups/${backupB.id}/download`],
        ['POST', `/backups/${backupB.id}/restore`, { target_name: A }],
        ['POST', `/backups/${backupB.id}/restore`, {}],
        ['GET', `/backups/jobs/${jobOfB}`],
        ['GET', `/backups/jobs/${replicationJob}`],
      ];
      for (const [method, path, body] of probes) {
        const res = await agent.api(method, path, { token, body });
        const unknown = await agent.api(method, path.replace(backupB.id, unknownBackup).replace(jobOfB, unknownJob).replace(replicationJob, unknownJob), {
          token,
          body,
        });
        expect([res.status, res.body.code], `${who} ${method} ${path}`).toEqual([unknown.status, unknown.body.code]);
        // A restore naming no existing target is a creation, which a key limited to a deployment may not do at all.
        const creation = who === 'key' && method === 'POST' && !(body as { target_name?: string }).target_name;
        expect(res.status, `${who} ${method} ${path}`).toBe(creation ? 403 : 404);
        expect(res.text, `${who} ${method} ${path}`).not.toContain(B);
      }
    }
    // The backup of B is untouched.
    expect((await agent.api('GET', `/backups/${backupB.id}`)).status).toBe(200);
  });

  it('downloads and restores only with write access; restoring into a new deployment is a creation', async () => {
    const dl = await download(alice.key, `/backups/${backupA.id}/download`);
    expect(dl.status).toBe(200);
    expect((await download(aliceViewer, `/backups/${backupA.id}/download`)).status).toBe(403);
    expect((await agent.api('GET', `/backups/${backupA.id}`, as(aliceViewer))).status).toBe(200);
    const viewerRestore = await agent.api('POST', `/backups/${backupA.id}/restore`, { token: aliceViewer, body: { target_name: uniqueName('vnew') } });
    expect(viewerRestore.status).toBe(403);
    // Into another tenant's deployment: 404 (B is not A's to see).
    const intoB = await agent.api('POST', `/backups/${backupA.id}/restore`, { token: alice.user, body: { target_name: B, auto_start: false } });
    expect(intoB.status).toBe(404);
    expect(intoB.body.code).not.toBe('GLOBAL_SCOPE_REQUIRED');
    // Into a new name: the scoped user may (and becomes its admin), the key limited to A may not.
    const byKey = await agent.api('POST', `/backups/${backupA.id}/restore`, { token: alice.key, body: { target_name: A2, auto_start: false } });
    expect(byKey.status).toBe(403);
    expect(byKey.body.code).toBe('GLOBAL_SCOPE_REQUIRED');
    const byUser = await agent.api('POST', `/backups/${backupA.id}/restore`, { token: alice.user, body: { target_name: A2, auto_start: false } });
    expect(byUser.status, byUser.text).toBe(202);
    const created = await waitJob(agent, byUser.body.data.job_id);
    expect(created.status, created.error).toBe('completed');
    expect((await agent.api('GET', `/deployments/${A2}`, as(alice.user))).status).toBe(200);
    expect((await agent.api('GET', `/deployments/${A2}`, as(bob.user))).status).toBe(404);
    // Into its own deployment, by its key.
    const own = await agent.api('POST', `/backups/${backupA.id}/restore`, { token: alice.key, body: { auto_start: false } });
    expect(own.status, own.text).toBe(202);
    expect((await waitJob(agent, own.body.data.job_id)).status).toBe('completed');
    // The restore jobs are the tenant's; the other tenant does not see them.
    expect((await agent.api('GET', `/backups/jobs/${own.body.data.job_id}`, as(alice.key))).status).toBe(200);
    expect((await agent.api('GET', `/backups/jobs/${own.body.data.job_id}`, as(bob.user))).status).toBe(404);
  });

  it('refuses every object-store route to scoped principals and keeps backups behind the backup checks there', async () => {
    const key = backupB.remote.key as string;
    expect(key).toBe(`${PREFIX}${B}/${backupB.id}.tar.gz`);
    const objectQuery = { bucket: BUCKET, key };
    for (const [who, token] of [...principalsOf(alice), ...principalsOf(bob)]) {
      const calls: [string, string, Record<string, unknown>?, unknown?][] = [
        ['GET', '/object-stores'],
        ['GET', '/object-stores/offsite'],
        ['GET', '/object-stores/offsite/buckets'],
        ['GET', '/object-stores/offsite/objects', { bucket: BUCKET }],
        ['GET', '/object-stores/offsite/objects/download', objectQuery],
        ['DELETE', '/object-stores/offsite/objects', objectQuery],
        ['POST', '/object-stores', undefined, { name: 'mine', endpoint: s3.endpoint, access_key_id: 'x', secret_access_key: 'y' }],
        ['POST', '/object-stores/provision-managed', undefined, { name: 'mine' }],
        ['POST', '/object-stores/offsite/buckets', undefined, { bucket: 'stolen' }],
        ['DELETE', '/object-stores/offsite/buckets/stolen'],
        ['DELETE', '/object-stores/mirror'],
        ['POST', '/object-stores/offsite/replicate', undefined, { target: 'mirror' }],
      ];
      for (const [method, path, query, body] of calls) {
        const res = await agent.api(method, path, { token, query: query as Record<string, string>, body });
        expect([res.status, res.body.code], `${who} ${method} ${path}`).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
      }
      const upload = await agent.api('POST', '/object-stores/offsite/objects', {
        token,
        query: { bucket: BUCKET, key: `${PREFIX}${B}/evil.bin` },
        raw: 'x',
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect([upload.status, upload.body.code], who).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
    }
    // Attaching a global store's credentials to one's own deployment is global too.
    const attach = await agent.api('POST', '/object-stores/offsite/attach', { token: alice.user, body: { deployment: A } });
    expect([attach.status, attach.body.code]).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
    expect((await agent.api('POST', '/object-stores/offsite/attach', { token: alice.user, body: { deployment: B } })).status).toBe(404);

    // Global principals: a viewer lists the archives but cannot download one (it holds secrets: write, as on
    // /backups/:id/download), nor the copy on the mirror it was replicated to; an operator can.
    const listed = await agent.api('GET', '/object-stores/offsite/objects', { token: globalViewer, query: { bucket: BUCKET, prefix: PREFIX } });
    expect(listed.body.data.map((o: any) => o.key)).toEqual(expect.arrayContaining([key, backupA.remote.key]));
    expect((await download(globalViewer, '/object-stores/offsite/objects/download', objectQuery)).status).toBe(403);
    expect((await download(globalViewer, '/object-stores/mirror/objects/download', { bucket: BUCKET, key })).status).toBe(403);
    for (const store of ['offsite', 'mirror']) {
      const got = await download(globalOperator, `/object-stores/${store}/objects/download`, objectQuery);
      expect(got.status, store).toBe(200);
      expect(got.text.length, store).toBe(backupB.size);
    }
  });

  it('shows scoped principals the destinations by name only', async () => {
    const scoped = await agent.api('GET', '/backup-destinations', as(alice.key));
    expect(scoped.status).toBe(200);
    expect(scoped.body.data.map((d: any) => d.name)).toEqual(['local', 'offsite', 'mirror']);
    expect(scoped.body.data.every((d: any) => d.endpoint === null && d.bucket === null && d.path === null)).toBe(true);
    expect(scoped.text).not.toContain(s3.endpoint);
    const global = await agent.api('GET', '/backup-destinations');
    expect(global.body.data.find((d: any) => d.name === 'offsite')).toMatchObject({ endpoint: s3.endpoint, bucket: BUCKET });
    // A scoped principal may send its deployment's backups to a store by name.
    const cfg = await agent.api('PUT', `/deployments/${A}/backup-config`, { token: alice.key, body: { destination: 'offsite' } });
    expect(cfg.status, cfg.text).toBe(200);
  });

  it('bounds integer query parameters', async () => {
    for (const query of [{ offset: '100000000000000000000' }, { offset: '-1' }, { limit: '0' }, { limit: '100000' }, { offset: '1.5' }]) {
      const res = await agent.api('GET', '/backups/jobs', { query });
      expect(res.status, JSON.stringify(query)).toBe(400);
    }
    expect((await agent.api('GET', '/backups/jobs', { query: { offset: 9_007_199_254_740_991 } })).status).toBe(200);
  });

  it("keeps a deleted deployment's backups under its retired name: a new deployment of the same name starts without them", async () => {
    // B is attached to the store before it goes.
    expect((await agent.api('POST', '/object-stores/offsite/attach', { token: globalOperator, body: { deployment: B } })).status).toBe(200);
    const jobsBefore = (await agent.api('GET', '/backups/jobs', { query: { deployment: B } })).body.data.map((j: any) => j.id);
    expect((await agent.api('DELETE', `/deployments/${B}`, { query: { remove_files: true } })).status).toBe(200);
    const retired = await until(
      () => agent.api('GET', `/backups/${backupB.id}`),
      (r) => r.body.data?.deployment !== B,
    );
    const retiredName = retired.body.data.deployment as string;
    expect(retiredName).toMatch(new RegExp(`^${B}~\\d{14}$`));
    expect((await agent.api('GET', '/object-stores/offsite')).body.data.attachments.map((a: any) => a.deployment)).not.toContain(B);
    const retiredJobs = (await agent.api('GET', '/backups/jobs', { query: { deployment: retiredName } })).body.data.map((j: any) => j.id);
    expect(retiredJobs.sort()).toEqual(jobsBefore.sort());

    // Someone else creates B again: it sees nothing of the old one, by name, id or listing, nor through the store routes.
    const carol = await createUser(agent, `carol-${B}`, 'operator');
    await createDeployment(B, carol.token);
    expect((await agent.api('GET', `/deployments/${B}/backups`, as(carol.token))).body.data).toEqual([]);
    expect((await agent.api('GET', '/backups', as(carol.token))).body.data).toEqual([]);
    expect((await agent.api('GET', '/backups/jobs', as(carol.token))).body.data).toEqual([]);
    expect((await agent.api('GET', '/backups', { token: carol.token, query: { deployment: retiredName } })).status).toBe(404);
    for (const [method, path, body] of [
      ['GET', `/backups/${backupB.id}`],
      ['GET', `/backups/${backupB.id}/download`],
      ['DELETE', `/backups/${backupB.id}`],
      ['POST', `/backups/${backupB.id}/restore`, { target_name: B }],
      ['GET', `/backups/jobs/${jobsBefore[0]}`],
    ] as [string, string, unknown?][]) {
      expect((await agent.api(method, path, { token: carol.token, body })).status, `${method} ${path}`).toBe(404);
    }
    expect(
      (await agent.api('GET', '/object-stores/offsite/objects/download', { token: carol.token, query: { bucket: BUCKET, key: backupB.remote.key } })).status,
    ).toBe(403);
    // The new B's own backup goes to the same layout; the old archive there is still the retired deployment's.
    const fresh = await backupAs(carol.token, B);
    expect((await agent.api('GET', '/backups', as(carol.token))).body.data.map((b: any) => b.id)).toEqual([fresh.id]);
    const remoteKeys = (
      await agent.api('GET', '/object-stores/offsite/objects', { token: globalViewer, query: { bucket: BUCKET, prefix: `${PREFIX}${B}/` } })
    ).body.data.map((o: any) => o.key);
    expect(remoteKeys.sort()).toEqual([backupB.remote.key, fresh.remote.key].sort());

    // Admins still reach the retired backups: read, download, restore into a named target (not into the retired name).
    expect((await download(agent.token, `/backups/${backupB.id}/download`)).status).toBe(200);
    expect((await download(agent.token, '/object-stores/offsite/objects/download', { bucket: BUCKET, key: backupB.remote.key })).status).toBe(200);
    const unnamed = await agent.api('POST', `/backups/${backupB.id}/restore`, { body: { auto_start: false } });
    expect(unnamed.status).toBe(400);
    const back = uniqueName('tbback');
    const restored = await agent.api('POST', `/backups/${backupB.id}/restore`, { body: { target_name: back, auto_start: false } });
    expect(restored.status, restored.text).toBe(202);
    expect((await waitJob(agent, restored.body.data.job_id)).status).toBe('completed');
    const folder = (await agent.api('GET', `/deployments/${back}`)).body.data.path as string;
    expect(readFileSync(join(folder, 'www', 'index.html'), 'utf8')).toBe(`secret page of ${B}\n`);
  });
});
