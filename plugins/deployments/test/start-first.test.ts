/**
 * Start-first redeploys (issue 27), with the real engine and the agent's own nginx: a web service behind a domain is
 * redeployed while a client sends requests through nginx at a steady rate with a websocket open: no request fails,
 * the websocket is closed cleanly by the old container, and the new version answers afterwards. A new version whose
 * health check fails is removed while the old one keeps serving, the revision is failed and `deployment.failed`
 * reaches a notification target; cancelled at random moments, what it added is removed and the old one keeps
 * serving. Services start-first cannot switch are recreated and listed with why.
 */
import { request as httpRequest } from 'node:http';
import { execa } from 'execa';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { freePort } from '../../../test/helpers/net.js';
import { nodeWebCompose, nodeWebImage } from '../../../test/helpers/node-web.mjs';
import { startHttpSink, type HttpSink } from '../../notifications/test/sinks.js';
import { cliHome } from '../../../cli/test/helpers/cli.js';
import { ADMIN_PASSWORD } from '../../../test/helpers/agent.js';
import { assessStartFirst } from '../src/deploy/start-first.js';
import { cleanupDocker, runId, uniqueName, until } from './helpers.js';

const TAG = `agent-test/start-first-${runId}:app`;

/** One GET through nginx on a fresh connection: the version that answered, or why it failed. */
function get(port: number, host: string, path = '/'): Promise<{ ok: boolean; body: string; ms: number }> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () =>
        resolve({ ok: res.statusCode === 200, body: res.statusCode === 200 ? body : `${res.statusCode} ${body.slice(0, 80)}`, ms: Date.now() - t0 }),
      );
      res.on('error', (err) => resolve({ ok: false, body: err.message, ms: Date.now() - t0 }));
    });
    req.on('error', (err) => resolve({ ok: false, body: err.message, ms: Date.now() - t0 }));
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}

/** Requests at a steady rate (every `everyMs`) until stopped; each answer kept in order. */
function load(port: number, host: string, everyMs = 20) {
  const answers: { at: number; ok: boolean; body: string }[] = [];
  const inFlight = new Set<Promise<void>>();
  const timer = setInterval(() => {
    const at = Date.now();
    const p: Promise<void> = get(port, host).then((r) => {
      answers.push({ at, ok: r.ok, body: r.body });
      inFlight.delete(p);
    });
    inFlight.add(p);
  }, everyMs);
  return {
    answers,
    async stop() {
      clearInterval(timer);
      await Promise.all(inFlight);
      answers.sort((a, b) => a.at - b.at);
      return answers;
    },
  };
}

describe('start-first redeploys through the proxy', () => {
  let agent: TestAgent;
  let sink: HttpSink;
  let httpPort = 0;
  const names: string[] = [];
  const name = (what: string) => {
    const n = uniqueName(what);
    names.push(n);
    return n;
  };

  const job = async (id: string) => (await agent.api('GET', `/jobs/${id}`)).body.data;
  const finished = (id: string) =>
    until(
      () => job(id),
      (j) => !['pending', 'running'].includes(j?.status),
      180_000,
      200,
    );
  const webContainers = async (n: string) =>
    (
      await execa('docker', [
        'ps',
        '-a',
        '--filter',
        `label=com.docker.compose.project=${n}`,
        '--filter',
        'label=com.docker.compose.service=web',
        '--format',
        '{{.ID}} {{.State}}',
      ])
    ).stdout
      .split('\n')
      .filter(Boolean);

  beforeAll(async () => {
    await nodeWebImage(TAG, `v1-${runId}`);
    sink = await startHttpSink();
    httpPort = await freePort();
    agent = await startAgent({
      plugins: ['docker', 'deployments', 'jobs', 'edge', 'notifications', 'system'],
      config: { proxy: { http_port: httpPort, https_port: await freePort(), listen_address: '127.0.0.1' } },
    });
    const target = await agent.api('PUT', '/notifications/targets', {
      body: [{ id: 'hook', name: 'hook', url: `generic+http://127.0.0.1:${new URL(sink.url).port}/hook`, events: ['deployment.failed'] }],
    });
    expect(target.status, target.text).toBe(200);
    // The websocket stays open on the old container: it is stopped (and closes it) after this drain timeout.
    expect((await agent.api('PUT', '/settings', { body: { deployments: { redeploy_drain_timeout: 3, redeploy_health_timeout: 60 } } })).status).toBe(200);
  }, 120_000);

  afterAll(async () => {
    for (const n of names) await agent?.api('DELETE', `/deployments/${n}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await sink?.close();
    await cleanupDocker();
    await execa('docker', ['rmi', '-f', TAG, TAG.replace(':app', ':fb')], { reject: false });
  });

  it('switches a web service behind a domain with 0 failed requests and a websocket closed cleanly; a failing health check keeps the old version serving', async () => {
    const n = name('sf');
    const host = `${n}.example.test`;
    const created = await agent.api('POST', '/deployments', { body: { name: n, compose_content: nodeWebCompose(TAG), auto_start: true } });
    expect(created.status, created.text).toBe(201);
    const domain = await agent.api('POST', `/deployments/${n}/domains`, { body: { service: 'web', domain: host, container_port: 80 } });
    expect(domain.status, domain.text).toBe(201);
    expect(
      (
        await until(
          () => get(httpPort, host),
          (r) => r.ok,
        )
      ).body,
    ).toBe(`v1-${runId}`);

    // v2 under the same tag: the redeploy runs the files as they are, the new container runs the new image.
    await nodeWebImage(TAG, `v2-${runId}`);
    const ws = new WebSocket(`ws://127.0.0.1:${httpPort}/`, { headers: { host } });
    const greeting = new Promise<string>((resolve) => ws.once('message', (d) => resolve(d.toString())));
    const closed = new Promise<{ code: number; at: number }>((resolve) => ws.on('close', (code) => resolve({ code, at: Date.now() })));
    expect(await greeting).toBe(`v1-${runId}`);

    const traffic = load(httpPort, host);
    await new Promise((r) => setTimeout(r, 500));
    const started = await agent.api('POST', `/deployments/${n}/redeploy`, { body: { strategy: 'start-first', reason: 'v2' } });
    expect(started.status, started.text).toBe(202);
    expect(started.body.data).toMatchObject({ strategy: 'start-first', fallbacks: [] });
    const done = await finished(started.body.data.job_id);
    const endedAt = Date.now();
    expect(done.status, JSON.stringify(done)).toBe('succeeded');
    expect(done.result).toMatchObject({ strategy: 'start-first', fallbacks: [] });
    await new Promise((r) => setTimeout(r, 500));
    const answers = await traffic.stop();

    const failed = answers.filter((a) => !a.ok);
    expect(failed, JSON.stringify(failed.slice(0, 5))).toEqual([]);
    expect(answers.length).toBeGreaterThan(50);
    expect(answers[0]!.body).toBe(`v1-${runId}`);
    expect(answers[answers.length - 1]!.body).toBe(`v2-${runId}`);
    // Around the reload both versions answer (old nginx workers still accept for a moment); once the job ended, only
    // the new one does.
    expect(answers.filter((a) => a.at > endedAt).every((a) => a.body === `v2-${runId}`)).toBe(true);
    // The websocket stayed on the old container until it drained, then the application closed it (1001 going away).
    expect((await closed).code).toBe(1001);
    expect(await webContainers(n)).toHaveLength(1);
    expect((await get(httpPort, host)).body).toBe(`v2-${runId}`);

    // A new version whose health check fails: removed, the old one keeps serving, the revision failed, the event sent.
    await nodeWebImage(TAG, `v3-${runId}`, { unhealthy: true });
    const traffic2 = load(httpPort, host);
    const bad = await agent.api('POST', `/deployments/${n}/redeploy`, { body: { strategy: 'start-first', reason: 'v3' } });
    expect(bad.status, bad.text).toBe(202);
    const failedJob = await finished(bad.body.data.job_id);
    expect(failedJob.status).toBe('failed');
    expect(failedJob.error).toContain('unhealthy');
    expect(failedJob.error).toContain('the old container keeps serving');
    await new Promise((r) => setTimeout(r, 500));
    const answers2 = await traffic2.stop();
    expect(answers2.filter((a) => !a.ok)).toEqual([]);
    expect(new Set(answers2.map((a) => a.body))).toEqual(new Set([`v2-${runId}`]));
    expect(await webContainers(n)).toHaveLength(1);
    const revs = (await agent.api('GET', `/deployments/${n}/revisions`)).body.data;
    expect(revs[0]).toMatchObject({ action: 'redeploy', status: 'failed', strategy: 'start-first', reason: 'v3' });
    expect(revs[1]).toMatchObject({ action: 'redeploy', status: 'succeeded', strategy: 'start-first', reason: 'v2' });
    const note = await sink.waitFor((r) => r.path.startsWith('/hook') && JSON.stringify(r.body).includes(n), 'deployment.failed notification', 15_000);
    expect(JSON.stringify(note.body)).toContain('deployment.failed');

    // Cancelled at random moments of the start and the health wait: the job ends cancelled, what it added is gone,
    // and the old version kept serving throughout.
    const traffic3 = load(httpPort, host);
    for (const delay of [0, 300, 1500]) {
      const job3 = await agent.api('POST', `/deployments/${n}/redeploy`, { body: { strategy: 'start-first', reason: `cancel ${delay}` } });
      expect(job3.status, job3.text).toBe(202);
      await new Promise((r) => setTimeout(r, delay));
      expect((await agent.api('POST', `/jobs/${job3.body.data.job_id}/cancel`)).status).toBeLessThan(300);
      expect(['cancelled', 'failed']).toContain((await finished(job3.body.data.job_id)).status);
      expect(
        await until(
          () => webContainers(n),
          (c) => c.length === 1,
          10_000,
        ),
      ).toHaveLength(1);
    }
    const answers3 = await traffic3.stop();
    expect(answers3.filter((a) => !a.ok)).toEqual([]);
    expect(new Set(answers3.map((a) => a.body))).toEqual(new Set([`v2-${runId}`]));
  }, 240_000);

  it('recreates the services it cannot switch and lists them with why', async () => {
    const n = name('fb');
    const port = await freePort();
    const hc = `    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1/health"]
      interval: 1s
      retries: 2
`;
    const svc = (service: string, extra = '', withHc = true) => `  ${service}:
    image: ${TAG.replace(':app', ':fb')}
    labels:
      agent.test: "1"
${withHc ? hc : ''}${extra}`;
    // A healthy image of its own (the first test leaves TAG on an unhealthy one).
    await nodeWebImage(TAG.replace(':app', ':fb'), `fb-${runId}`);
    const compose = `services:
${svc('web')}${svc('nohc', '', false)}${svc('ported', `    ports:\n      - "127.0.0.1:${port}:80"\n`)}${svc('named', `    container_name: ${n}-named\n`)}${svc('hidden')}`;
    const created = await agent.api('POST', '/deployments', { body: { name: n, compose_content: compose, auto_start: true } });
    expect(created.status, created.text).toBe(201);
    for (const service of ['web', 'nohc', 'ported', 'named']) {
      const d = await agent.api('POST', `/deployments/${n}/domains`, { body: { service, domain: `${service}.${n}.example.test`, container_port: 80 } });
      expect(d.status, d.text).toBe(201);
    }
    await until(
      () => get(httpPort, `web.${n}.example.test`),
      (r) => r.ok,
    );
    // In the model's order (compose's: by name).
    const expected = [
      { service: 'hidden', why: 'no domain of the proxy routes to it' },
      { service: 'named', why: expect.stringContaining('container_name') },
      { service: 'nohc', why: expect.stringContaining('no healthcheck') },
      { service: 'ported', why: expect.stringContaining(`fixed host port ${port}`) },
    ];
    const started = await agent.api('POST', `/deployments/${n}/redeploy`, { body: { strategy: 'start-first' } });
    expect(started.status, started.text).toBe(202);
    expect(started.body.data.fallbacks).toEqual(expected);
    const done = await finished(started.body.data.job_id);
    expect(done.status, JSON.stringify(done)).toBe('succeeded');
    expect(done.result.fallbacks).toEqual(expected);
    // The plan shows them too.
    const plan = await agent.api('POST', `/deployments/${n}/redeploy`, { query: { plan: 'true' }, body: { strategy: 'start-first', services: ['nohc'] } });
    expect(plan.status, plan.text).toBe(201);
    expect(plan.body.data.changes).toContainEqual({
      type: 'fallback',
      id: 'nohc',
      actions: ['update'],
      after: { strategy: 'recreate', why: expect.stringContaining('no healthcheck') },
    });
  }, 180_000);

  it('agentctl deployments redeploy NAME --strategy start-first sends the strategy (a body field as an option)', async () => {
    const home = cliHome();
    try {
      const login = await home.run(['login', '--url', agent.url, '--username', 'admin'], { input: `${ADMIN_PASSWORD}\n` });
      expect(login.code, login.stderr).toBe(0);
      const n = uniqueName('cli');
      const dry = await home.run(['deployments', 'redeploy', n, '--strategy', 'start-first', '--pull', '--dry-run']);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toContain(`POST ${agent.url}/api/deployments/${n}/redeploy`);
      expect(JSON.parse(dry.stdout.slice(dry.stdout.indexOf('{')))).toEqual({ strategy: 'start-first', pull: true });
      const bad = await home.run(['deployments', 'redeploy', n, '--strategy', 'sideways', '--dry-run']);
      expect(bad.code).not.toBe(0);
    } finally {
      home.remove();
    }
  });

  it('without the proxy (no edge plugin) every service falls back', () => {
    const model = { services: { web: { healthcheck: { test: ['CMD', 'true'] } } } };
    expect(assessStartFirst({ upstreams: () => undefined }, 'x', model, ['web'], [{ service: 'web', state: 'running' }])).toEqual({
      switched: [],
      fallbacks: [{ service: 'web', why: 'the proxy (edge plugin) is not enabled on this agent' }],
    });
    // A swarm deployment's tasks are replaced by Swarm itself.
    const proxy = { upstreams: () => ({ routed: () => [{ service: 'web', unswitchable: null }], refresh: async () => undefined }) };
    expect(assessStartFirst(proxy, 'x', model, ['web'], [{ service: 'web', state: 'running' }]).switched).toEqual(['web']);
    expect(assessStartFirst(proxy, 'x', model, ['web'], [{ service: 'web', state: 'running' }], 'swarm').fallbacks[0]!.why).toContain('swarm deployment');
  });
});
