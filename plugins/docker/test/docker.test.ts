import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, request, type TestAgent } from '../../../test/helpers/agent.js';

const id = randomBytes(4).toString('hex');
const name = (what: string) => `agent-test-${what}-${id}`;
const docker = (...args: string[]) => execa('docker', args);

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('docker plugin', () => {
  let agent: TestAgent;
  const project = `proj-${id}`;
  const box = name('box');

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker'] });
    await docker(
      'run',
      '-d',
      '--name',
      box,
      '--label',
      'agent.test=1',
      '--label',
      `com.docker.compose.project=${project}`,
      '--label',
      'com.docker.compose.service=web',
      'agent-test/busybox:latest',
      'sh',
      '-c',
      'echo hello-from-box; echo oops >&2; while true; do sleep 1; done',
    );
  });

  afterAll(async () => {
    await agent?.stop();
    const { stdout } = await docker('ps', '-aq', '--filter', `name=${id}`);
    if (stdout.trim()) await docker('rm', '-f', ...stdout.trim().split('\n'));
    await docker('volume', 'rm', '-f', name('vol')).catch(() => undefined);
    await docker('network', 'rm', name('net')).catch(() => undefined);
    await docker('rmi', '-f', `agent-test/img-${id}:v1`, `agent-test/img-${id}:v2`).catch(() => undefined);
  });

  it('lists containers with their deployment, service and ports', async () => {
    const res = await agent.api('GET', '/containers');
    expect(res.status).toBe(200);
    const c = res.body.data.find((x: any) => x.name === box);
    expect(c).toMatchObject({ state: 'running', deployment: project, service: 'web', health: 'none', image: 'agent-test/busybox:latest' });
    const filtered = await agent.api('GET', '/containers', { query: { deployment: project } });
    expect(filtered.body.data.map((x: any) => x.name)).toEqual([box]);
    const bad = await agent.api('GET', '/containers', { query: { deployment: '../x' } });
    expect(bad.status).toBe(400);
  });

  it('reads logs of both streams, with tail and filter', async () => {
    const res = await until(
      () => agent.api('GET', `/containers/${box}/logs`),
      (r) => r.body.data?.length >= 2,
    );
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ stream: 'stdout', text: 'hello-from-box', time: expect.stringMatching(/^\d{4}-/) }),
        expect.objectContaining({ stream: 'stderr', text: 'oops' }),
      ]),
    );
    const filtered = await agent.api('GET', `/containers/${box}/logs`, { query: { filter: 'oops', tail: 5 } });
    expect(filtered.body.data.map((l: any) => l.text)).toEqual(['oops']);
    const tail1 = await agent.api('GET', `/containers/${box}/logs`, { query: { tail: 1 } });
    expect(tail1.body.data).toHaveLength(1);
  });

  it('refuses to delete a running container, then stops, starts, restarts and deletes it', async () => {
    const del = await agent.api('DELETE', `/containers/${box}`);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('CONTAINER_RUNNING');
    const stop = await agent.api('POST', `/containers/${box}/stop`, { query: { timeout: 1 } });
    expect(stop.status).toBe(200);
    expect(stop.body.data.state).toBe('exited');
    const start = await agent.api('POST', `/containers/${box}/start`);
    expect(start.body.data.state).toBe('running');
    const restart = await agent.api('POST', `/containers/${box}/restart`, { query: { timeout: 1 } });
    expect(restart.status).toBe(200);
    expect(restart.body.data.state).toBe('running');
    await agent.api('POST', `/containers/${box}/stop`, { query: { timeout: 1 } });
    const ok = await agent.api('DELETE', `/containers/${box}`);
    expect(ok.status).toBe(200);
    expect(ok.body.data).toMatchObject({ name: box, deployment: project });
    const gone = await agent.api('POST', `/containers/${box}/start`);
    expect(gone.status).toBe(404);
    expect(gone.body.code).toBe('NOT_FOUND');
  });

  it('rejects bad container ids', async () => {
    for (const bad of ['..', '-x', 'a b']) {
      const res = await agent.api('POST', `/containers/${encodeURIComponent(bad)}/start`);
      expect([400, 404]).toContain(res.status);
      expect(res.body.code).toBeTruthy();
    }
  });

  it('lists images with users, refuses deleting one in use, untags and deletes', async () => {
    // An image of its own (a label makes a new id), so other suites' containers never count as users.
    const image = `agent-test/img-${id}`;
    await execa('docker', ['build', '-q', '-t', `${image}:v1`, '-'], { input: `FROM agent-test/busybox:latest\nLABEL agent.test.id=${id}\n` });
    const user = name('imguser');
    await docker('create', '--name', user, '--label', 'agent.test=1', '--label', `com.docker.compose.project=${project}`, `${image}:v1`, 'true');
    const list = await agent.api('GET', '/images');
    expect(list.status).toBe(200);
    const img = list.body.data.find((i: any) => i.tags.includes(`${image}:v1`));
    expect(img).toMatchObject({ in_use: true, deployment: project, deployments: [project], containers: [user] });
    const refused = await agent.api('DELETE', `/images/${encodeURIComponent(`${image}:v1`)}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('IMAGE_IN_USE');
    await docker('tag', `${image}:v1`, `${image}:v2`);
    const untag = await agent.api('DELETE', `/images/${encodeURIComponent(`${image}:v2`)}`);
    expect(untag.status, untag.text).toBe(200);
    expect(untag.body.data).toMatchObject({ untagged: [`${image}:v2`], deleted: [] });
    const byId = await agent.api('DELETE', `/images/${encodeURIComponent(img.id)}`);
    expect(byId.status).toBe(409);
    await docker('rm', user);
    const deleted = await agent.api('DELETE', `/images/${encodeURIComponent(img.id)}`);
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body.data.deleted).toContain(img.id);
    const missing = await agent.api('DELETE', `/images/${encodeURIComponent(`${image}:v1`)}`);
    expect(missing.status).toBe(404);
  });

  it('pulls in the background and reports a failed pull in the job', async () => {
    const bad = await agent.api('POST', '/images/pull', { body: { image: 'UPPER/case' } });
    expect(bad.status).toBe(400);
    const extra = await agent.api('POST', '/images/pull', { body: { image: 'x', extra: 1 } });
    expect(extra.status).toBe(400);
    const res = await agent.api('POST', '/images/pull', { body: { image: '127.0.0.1:9/agent-test/nothing' } });
    expect(res.status).toBe(202);
    expect(res.body.data).toMatchObject({ job_id: expect.any(String), image: '127.0.0.1:9/agent-test/nothing:latest' });
    const job = await until(
      () => agent.api('GET', `/images/pulls/${res.body.data.job_id}`),
      (r) => r.body.data?.status !== 'running',
    );
    expect(job.body.data).toMatchObject({ status: 'failed', error: expect.any(String), finished_at: expect.any(String) });
    const list = await agent.api('GET', '/images/pulls');
    expect(list.body.data.map((j: any) => j.id)).toContain(res.body.data.job_id);
  });

  it('creates, lists and deletes volumes; refuses deleting one in use', async () => {
    const vol = name('vol');
    const created = await agent.api('POST', '/volumes', { body: { name: vol, labels: { 'agent.test': '1' } } });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name: vol, driver: 'local', in_use: false, deployment: null });
    expect((await agent.api('POST', '/volumes', { body: { name: vol } })).status).toBe(409);
    expect((await agent.api('POST', '/volumes', { body: { name: '../etc' } })).status).toBe(400);
    const user = name('voluser');
    await docker('create', '--name', user, '--label', 'agent.test=1', '-v', `${vol}:/data`, 'agent-test/busybox:latest', 'true');
    const list = await agent.api('GET', '/volumes');
    expect(list.body.data.find((v: any) => v.name === vol)).toMatchObject({ in_use: true, containers: [user] });
    const refused = await agent.api('DELETE', `/volumes/${vol}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('VOLUME_IN_USE');
    await docker('rm', user);
    expect((await agent.api('DELETE', `/volumes/${vol}`)).status).toBe(200);
    expect((await agent.api('DELETE', `/volumes/${vol}`)).status).toBe(404);
  });

  it('creates, lists and deletes networks; refuses built-ins and networks in use', async () => {
    const net = name('net');
    const created = await agent.api('POST', '/networks', { body: { name: net, internal: true, labels: { 'agent.test': '1' } } });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name: net, driver: 'bridge', internal: true, in_use: false });
    expect((await agent.api('POST', '/networks', { body: { name: net } })).status).toBe(409);
    expect((await agent.api('POST', '/networks', { body: { name: net, driver: 'host' } })).status).toBe(400);
    const user = name('netuser');
    await docker('create', '--name', user, '--label', 'agent.test=1', '--network', net, 'agent-test/busybox:latest', 'true');
    const refused = await agent.api('DELETE', `/networks/${net}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('NETWORK_IN_USE');
    expect((await agent.api('DELETE', '/networks/bridge')).body.code).toBe('NETWORK_BUILTIN');
    await docker('rm', user);
    expect((await agent.api('DELETE', `/networks/${net}`)).status).toBe(200);
    const list = await agent.api('GET', '/networks');
    expect(list.body.data.some((n: any) => n.name === net)).toBe(false);
    expect(list.body.data.some((n: any) => n.name === 'bridge')).toBe(true);
  });
});

describe('docker plugin without an engine', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker'], config: { docker: { host: `unix:///tmp/no-docker-${id}.sock` } } });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('starts anyway and answers 503 DOCKER_UNAVAILABLE', async () => {
    expect((await request(agent.url, 'GET', '/health')).status).toBe(200);
    for (const path of ['/containers', '/images', '/volumes', '/networks']) {
      const res = await agent.api('GET', path);
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ error: expect.any(String), code: 'DOCKER_UNAVAILABLE' });
    }
    const pull = await agent.api('POST', '/images/pull', { body: { image: 'busybox' } });
    expect(pull.status).toBe(503);
  });
});
