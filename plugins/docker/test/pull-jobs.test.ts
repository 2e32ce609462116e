/**
 * Image pulls as jobs of the jobs service, against the real engine and a real registry (Debian's docker-registry
 * with htpasswd, the credentials plugin handing the password over) behind a loopback proxy that passes 6 MB/s, so
 * a 24 MB image takes a few seconds: `POST /api/images/pull` answers 202 `{job_id}`, `GET /api/images/pulls[/:id]`
 * answer their earlier shape as views of the jobs, the job is listed at /api/jobs; pulls cancelled at random
 * moments (`CANCEL_ROUNDS`, 20 by default; the figure is 100) each end in a final state within 5 s, with no
 * docker process left; an agent without the jobs plugin still pulls (jobs of the docker plugin's own).
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createConnection, createServer, type Server } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { startRegistry, type TestRegistry } from '../../credentials/test/registry.js';

const run = promisify(execFile);
const suffix = randomBytes(3).toString('hex');
const ROUNDS = Number(process.env.CANCEL_ROUNDS ?? 20);

/** Forwards a loopback port to `target`, passing at most `rate` bytes per second towards the client. */
async function throttledProxy(target: string, rate: number): Promise<{ host: string; close(): void }> {
  const [targetHost, targetPort] = target.split(':') as [string, string];
  const server: Server = createServer((client) => {
    const upstream = createConnection(Number(targetPort), targetHost);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      upstream.pause();
      client.write(chunk);
      setTimeout(() => upstream.resume(), (chunk.length / rate) * 1000);
    });
    upstream.on('end', () => client.end());
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    upstream.on('error', close);
    client.on('error', close);
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { host: `127.0.0.1:${(server.address() as { port: number }).port}`, close: () => server.close() };
}

/** docker CLI processes pulling (none is expected: the agent pulls through the engine's API). */
async function pullProcesses(): Promise<string[]> {
  const r = await run('pgrep', ['-af', 'docker(-compose)? (.+ )?pull( |$)'], { encoding: 'utf8' }).catch(() => ({ stdout: '' }));
  return r.stdout.split('\n').filter((l) => l && !l.includes('pgrep'));
}

describe('image pulls as jobs', () => {
  let agent: TestAgent;
  let registry: TestRegistry;
  let proxy: { host: string; close(): void };
  let image: string;
  const rmi = () => run('docker', ['rmi', '-f', image]).catch(() => undefined);
  const present = () =>
    run('docker', ['image', 'inspect', image]).then(
      () => true,
      () => false,
    );

  beforeAll(async () => {
    registry = await startRegistry();
    const local = `agent-test/pull-jobs-${suffix}:1`;
    // Layers of random bytes new to this run (no build cache), so that every pull downloads them.
    const build = spawn('docker', ['build', '--no-cache', '-q', '-t', local, '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    build.stdin.end(`FROM agent-test/busybox:latest\nRUN head -c 16000000 /dev/urandom > /blob1-${suffix}\nRUN head -c 8000000 /dev/urandom > /blob2\n`);
    expect(await new Promise((r) => build.once('close', r))).toBe(0);
    await registry.docker(['login', registry.host, '-u', registry.username, '-p', registry.password]);
    await registry.docker(['tag', local, `${registry.host}/agent-test/pull-jobs:1`]);
    await registry.docker(['push', `${registry.host}/agent-test/pull-jobs:1`]);
    await registry.docker(['rmi', local, `${registry.host}/agent-test/pull-jobs:1`]);
    proxy = await throttledProxy(registry.host, 6_000_000);
    image = `${proxy.host}/agent-test/pull-jobs:1`;
    agent = await startAgent({ plugins: ['docker', 'credentials', 'jobs'] });
    expect((await agent.api('POST', '/registries', { body: { slug: 'pulljobs', name: 'Pull jobs test registry', host: proxy.host } })).status).toBe(201);
    const cred = await agent.api('POST', '/credentials', {
      body: { name: 'pull-jobs', type: 'registry', registry: 'pulljobs', credentials: { username: registry.username, password: registry.password } },
    });
    expect(cred.status, cred.text).toBe(201);
  }, 180_000);

  afterAll(async () => {
    if (image) await rmi();
    await agent?.stop();
    proxy?.close();
    await registry?.stop();
  });

  const pull = async () => {
    const res = await agent.api('POST', '/images/pull', { body: { image } });
    expect(res.status, res.text).toBe(202);
    return res.body.data.job_id as string;
  };
  const view = async (id: string) => (await agent.api('GET', `/images/pulls/${id}`)).body.data;

  it('answers 202 {job_id} and the earlier shapes, as views of a job of the jobs service', async () => {
    await rmi();
    const id = await pull();
    expect(id).toMatch(/^job_/);
    let seen: any;
    for (const end = Date.now() + 120_000; Date.now() < end;) {
      seen = await view(id);
      if (seen.status !== 'running') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(seen).toMatchObject({
      id,
      type: 'image.pull',
      image,
      status: 'succeeded',
      authenticated: true,
      error: null,
      progress: { percent: 100, layers_total: expect.any(Number) },
      finished_at: expect.any(String),
    });
    expect(seen.progress.total_bytes).toBeGreaterThan(20_000_000);
    expect(seen.output.some((l: string) => /Pull complete|Download complete/.test(l))).toBe(true);
    expect((await agent.api('GET', '/images/pulls')).body.data.map((p: any) => p.id)).toContain(id);
    const job = (await agent.api('GET', `/jobs/${id}`)).body.data;
    expect(job).toMatchObject({ kind: 'image.pull', status: 'succeeded', deployment: null, created_by: expect.stringMatching(/^user:/) });
    expect((await agent.api('GET', '/images/pulls/job_nothing')).status).toBe(404);
  });

  it(`cancels pulls at random moments (${ROUNDS} rounds): every job ends within 5 s, nothing is left pulling`, async () => {
    // How long a whole pull takes here, to spread the cancels over it.
    await rmi();
    const t0 = Date.now();
    const whole = await pull();
    while ((await view(whole)).status === 'running') await new Promise((r) => setTimeout(r, 50));
    const duration = Date.now() - t0;
    const outcomes: Record<string, number> = {};
    let stuck = 0;
    let slowest = 0;
    for (let round = 0; round < ROUNDS; round++) {
      await rmi();
      const id = await pull();
      await new Promise((r) => setTimeout(r, Math.random() * duration));
      const asked = Date.now();
      const cancel = await agent.api('POST', `/jobs/${id}/cancel`);
      slowest = Math.max(slowest, Date.now() - asked);
      expect([200, 409], cancel.text).toContain(cancel.status);
      const v = await view(id);
      if (v.status === 'running') stuck++;
      outcomes[v.status] = (outcomes[v.status] ?? 0) + 1;
      if (cancel.status === 200) {
        expect(v).toMatchObject({ status: 'cancelled', image, error: expect.stringContaining('cancelled'), finished_at: expect.any(String) });
        expect(Date.now() - asked).toBeLessThan(5500);
        // The engine stopped pulling too: long after the whole image would have arrived, it is not there.
        await new Promise((r) => setTimeout(r, 5000));
        expect(await present(), `round ${round}: the engine went on pulling after the cancel`).toBe(false);
      }
      expect(await pullProcesses()).toEqual([]);
    }
    console.log(
      `pull cancel rounds: ${ROUNDS}, outcomes ${JSON.stringify(outcomes)}, stuck jobs ${stuck}, docker pull processes left 0, slowest cancel answer ${slowest} ms, a pull ${duration} ms`,
    );
    expect(stuck).toBe(0);
    // The engine is not left pulling: the next pull completes.
    await rmi();
    const id = await pull();
    for (let i = 0; i < 600 && (await view(id)).status === 'running'; i++) await new Promise((r) => setTimeout(r, 200));
    expect((await view(id)).status).toBe('succeeded');
  }, 1_800_000);

  it('still pulls without the jobs plugin (jobs of the docker plugin’s own)', async () => {
    const alone = await startAgent({ plugins: ['docker'] });
    try {
      const res = await alone.api('POST', '/images/pull', { body: { image: '127.0.0.1:9/agent-test/nothing' } });
      expect(res.status, res.text).toBe(202);
      let v: any;
      for (let i = 0; i < 300; i++) {
        v = (await alone.api('GET', `/images/pulls/${res.body.data.job_id}`)).body.data;
        if (v.status !== 'running') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(v).toMatchObject({ status: 'failed', image: '127.0.0.1:9/agent-test/nothing:latest', authenticated: false, error: expect.any(String) });
      expect((await alone.api('GET', '/jobs')).status).toBe(404);
    } finally {
      await alone.stop();
    }
  });
});
