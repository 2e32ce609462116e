/**
 * Domains of swarm deployments through the agent's own nginx (real nginx, the real engine's single-node swarm): a
 * stack of 2 replicas answers on its domain, scaled to 3 through the API, a rolling update under continuous traffic
 * loses no request, an update failing its health check is rolled back without losing one either, a tenant's domain
 * reaches its own stack only, traffic is recorded per domain, and a delete takes the route away.
 */
import { request as httpRequest } from 'node:http';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from './helpers/agent.js';
import { freePort, waitFor } from './helpers/net.js';
import { createTenant, type Tenant } from '../plugins/docker/test/tenants.js';
import { busyboxStack, cleanupStacks, runId, uniqueName } from '../plugins/deployments/test/helpers.js';

/**
 * A web service whose page names its version and its task. SIGKILL stops a task at once (busybox httpd as PID 1
 * ignores SIGTERM and would serve on through the grace period): the hardest case for a rolling update.
 */
const stackFile = (marker: string, replicas: number, healthcheck?: string[]) =>
  busyboxStack({
    web: {
      command: ['sh', '-c', 'mkdir -p /www && echo "$$MARKER $$HOSTNAME" > /www/index.html && exec httpd -f -p 80 -h /www'],
      environment: { MARKER: marker },
      stopSignal: 'SIGKILL',
      healthcheck,
      replicas,
    },
  });
const failingHealth = ['CMD', 'false'];

interface Answer {
  status: number;
  body: string;
}

/** One GET through nginx on a fresh connection (a failure is an error or a status other than 200). */
function get(port: number, host: string, path = '/', localAddress?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, localAddress, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}

/** Clients sending requests one after the other until stopped; the failures are kept with their reason. */
function load(port: number, host: string, clients = 4) {
  let running = true;
  const failures: string[] = [];
  const bodies: string[] = [];
  let total = 0;
  const worker = async () => {
    while (running) {
      total++;
      try {
        const a = await get(port, host);
        if (a.status === 200) bodies.push(a.body.trim());
        else failures.push(`${a.status} ${a.body.slice(0, 80)}`);
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
  };
  const done = Promise.all(Array.from({ length: clients }, worker));
  return {
    failures,
    bodies,
    total: () => total,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

describe('swarm deployments behind the agent’s nginx', () => {
  let agent: TestAgent;
  let tenant: Tenant;
  let http = 0;
  const name = uniqueName('swroute');
  const host = `${name}.example.test`;
  const theirs = uniqueName('swrt');
  const theirHost = `${theirs}.example.test`;

  const domains = async (deployment: string, token?: string) =>
    (await agent.api('GET', `/deployments/${deployment}/domains`, token ? { token } : {})).body.data as { id: number; upstream: string | null }[];
  /** The distinct tasks (hostnames) and versions that answered `count` requests. */
  const answers = async (h: string, count: number) => {
    const got = await Promise.all(Array.from({ length: count }, () => get(http, h)));
    for (const a of got) expect(a.status, a.body).toBe(200);
    return { tasks: new Set(got.map((a) => a.body.trim().split(' ')[1])), versions: new Set(got.map((a) => a.body.trim().split(' ')[0])) };
  };

  beforeAll(async () => {
    const { stdout } = await execa('docker', ['info', '--format', '{{.Swarm.ControlAvailable}}']);
    if (stdout.trim() !== 'true') throw new Error('the engine manages no swarm: test/env (start.d/20-swarm.sh) initialises a single-node one');
    http = await freePort();
    agent = await startAgent({
      plugins: ['access', 'docker', 'deployments', 'edge', 'security'],
      config: { proxy: { http_port: http, https_port: await freePort(), listen_address: '127.0.0.1' } },
    });
    tenant = await createTenant(agent, `swrt${runId}`, [theirs]);
  }, 120_000);

  afterAll(async () => {
    await agent?.stop();
    await cleanupStacks();
  });

  it('routes a domain to the replicas of a stack, and to a third once scaled through the API', async () => {
    const created = await agent.api('POST', '/deployments', { body: { name, compose_content: stackFile('v1', 2), runtime: 'swarm', auto_start: true } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.start_error).toBeNull();
    const added = await agent.api('POST', `/deployments/${name}/domains`, { body: { service: 'web', domain: host, container_port: 80 } });
    expect(added.status, added.text).toBe(201);
    // Both tasks, on the engine's gateway bridge (the overlay addresses are out of the host's reach).
    expect(added.body.data.upstream.split(',')).toHaveLength(2);
    for (const a of added.body.data.upstream.split(',')) expect(a).toMatch(/^\d+\.\d+\.\d+\.\d+:80$/);
    const first = await answers(host, 20);
    expect([...first.versions]).toEqual(['v1']);
    expect(first.tasks.size).toBe(2);

    const scaled = await agent.api('POST', `/deployments/${name}/scale`, { body: { service: 'web', replicas: 3 } });
    expect(scaled.status, scaled.text).toBe(200);
    await waitFor(async () => (await domains(name))[0]?.upstream?.split(',').length === 3, 'the third task in the upstream', 60_000, 300);
    expect((await answers(host, 30)).tasks.size).toBe(3);
  });

  it('loses no request through a rolling update (start-first)', async () => {
    const before = (await answers(host, 30)).tasks;
    const traffic = load(http, host);
    await new Promise((r) => setTimeout(r, 500));
    const updated = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: stackFile('v2', 3) } });
    expect(updated.status, updated.text).toBe(200);
    // Requests go on while the last configuration settles.
    await new Promise((r) => setTimeout(r, 1500));
    await traffic.stop();
    expect(traffic.failures, `${traffic.failures.length} of ${traffic.total()} failed`).toEqual([]);
    expect(traffic.total()).toBeGreaterThan(100);
    expect(traffic.bodies.some((b) => b.startsWith('v1'))).toBe(true);
    expect(traffic.bodies.at(-1)).toMatch(/^v2 /);
    const after = await answers(host, 30);
    expect([...after.versions]).toEqual(['v2']);
    expect(after.tasks.size).toBe(3);
    for (const t of after.tasks) expect(before.has(t)).toBe(false);
  });

  it('loses no request through an update that fails its health check and is rolled back', async () => {
    const traffic = load(http, host);
    await new Promise((r) => setTimeout(r, 500));
    const updated = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: stackFile('v3', 3, failingHealth) } });
    expect(updated.status, updated.text).toBe(502);
    expect(updated.body.code).toBe('COMPOSE_FAILED');
    await new Promise((r) => setTimeout(r, 1000));
    await traffic.stop();
    expect(traffic.failures, `${traffic.failures.length} of ${traffic.total()} failed`).toEqual([]);
    expect(traffic.total()).toBeGreaterThan(100);
    // A task that never passed its check never received a request.
    expect(traffic.bodies.filter((b) => !b.startsWith('v2 '))).toEqual([]);
    // Swarm's rollback replaced the tasks it had touched: the upstream followed, still three tasks of v2.
    expect((await domains(name))[0]!.upstream!.split(',')).toHaveLength(3);
    expect((await answers(host, 30)).versions).toEqual(new Set(['v2']));
  });

  it("routes a tenant's domain to its own stack only, and keeps it from another's", async () => {
    const created = await agent.api('POST', '/deployments', {
      token: tenant.user,
      body: { name: theirs, compose_content: stackFile('tenant', 1), runtime: 'swarm', auto_start: true },
    });
    expect(created.status, created.text).toBe(201);
    // Not even the other deployment's existence.
    const foreign = await agent.api('POST', `/deployments/${name}/domains`, {
      token: tenant.user,
      body: { service: 'web', domain: theirHost, container_port: 80 },
    });
    expect(foreign.status, foreign.text).toBe(404);
    const added = await agent.api('POST', `/deployments/${theirs}/domains`, {
      token: tenant.user,
      body: { service: 'web', domain: theirHost, container_port: 80 },
    });
    expect(added.status, added.text).toBe(201);
    const mine = new Set((await domains(name))[0]!.upstream!.split(','));
    const their = (await domains(theirs, tenant.user))[0]!.upstream!.split(',');
    expect(their).toHaveLength(1);
    expect(mine.has(their[0]!)).toBe(false);
    const got = await answers(theirHost, 10);
    expect([...got.versions]).toEqual(['tenant']);
    expect((await answers(host, 10)).versions).toEqual(new Set(['v2']));
  });

  it('records the traffic and security events of a swarm domain like any other', async () => {
    expect((await get(http, host, '/.env', '127.0.0.29')).status).toBe(404);
    const event = await waitFor(
      async () => {
        const res = await agent.api('GET', '/security/events', { query: { type: 'attack_path', source_ip: '127.0.0.29' } });
        return res.body.data.length > 0 && res.body.data[0];
      },
      'the attack path event',
      30_000,
      300,
    );
    expect(event).toMatchObject({ type: 'attack_path', deployment: name });
    const served = await waitFor(
      async () => {
        const res = await agent.api('GET', '/traffic/logs', { query: { deployment: name, limit: 50 } });
        return (res.body.data as { status: number }[]).find((l) => l.status === 200);
      },
      'traffic of the swarm domain',
      30_000,
      300,
    );
    expect(served).toMatchObject({ host, deployment: name, status: 200 });
    // The tenant sees its own domain's traffic, not the other's.
    const theirsOnly = await agent.api('GET', '/traffic/logs', { token: tenant.user, query: { deployment: name } });
    expect(theirsOnly.status).toBe(404);
  });

  it('takes the route away with the deployment', async () => {
    for (const [deployment, token] of [
      [theirs, tenant.user],
      [name, agent.token],
    ] as const) {
      const removed = await agent.api('DELETE', `/deployments/${deployment}`, { token, query: { remove_files: true } });
      expect(removed.status, removed.text).toBe(200);
    }
    // The default server's answer: the domain is unknown now.
    await waitFor(async () => (await get(http, host)).status === 404, 'the route to go', 15_000, 200);
    const { stdout } = await execa('docker', ['service', 'ls', '-q', '--filter', `label=com.docker.stack.namespace=${name}`]);
    expect(stdout.trim()).toBe('');
  });
});
