/**
 * The cluster routes against the real engine, which runs a single-node swarm (test/env leaves it as it found it:
 * these tests never init, leave or drain it), and against a stand-in engine that is in no swarm (for init and
 * the 409 NOT_SWARM_MANAGER answers, which the real one cannot give without leaving its swarm).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobalUser, createTenant, principals } from '../../docker/test/tenants.js';

const RUN = `cl${randomBytes(3).toString('hex')}`;
const LABEL = `agent.test.${RUN}`;

function docker(...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('docker', args, { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ status: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

const engineSwarm = async () => JSON.parse((await docker('info', '--format', '{{json .Swarm}}')).stdout) as { NodeID: string; LocalNodeState: string };

describe('cluster on the real engine (a single-node swarm)', () => {
  let agent: TestAgent;
  let nodeId: string;
  let labelsBefore: Record<string, string>;

  beforeAll(async () => {
    const swarm = await engineSwarm();
    if (swarm.LocalNodeState !== 'active') throw new Error('the engine is in no swarm: test/env initialises a single-node one');
    nodeId = swarm.NodeID;
    labelsBefore = JSON.parse((await docker('node', 'inspect', nodeId, '--format', '{{json .Spec.Labels}}')).stdout) ?? {};
    agent = await startAgent({ plugins: ['access', 'docker', 'cluster'] });
  });

  afterAll(async () => {
    await agent?.stop();
    // Whatever a failed run left on the node: its test label and a paused availability.
    await docker('node', 'update', '--label-rm', LABEL, nodeId);
    await docker('node', 'update', '--availability', 'active', nodeId);
  });

  it('says this host manages a swarm, with its node and cluster ids', async () => {
    const res = await agent.api('GET', '/cluster');
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ state: 'active', manager: true, node_id: nodeId, error: null });
    expect(res.body.data.cluster_id).toMatch(/^[a-z0-9]+$/);
    expect(res.body.data.nodes).toBeGreaterThanOrEqual(1);
  });

  it('refuses to init a second swarm (409 SWARM_EXISTS), planned or not', async () => {
    for (const query of [{ plan: true }, undefined]) {
      const res = await agent.api('POST', '/cluster/init', { body: {}, ...(query ? { query } : {}) });
      expect(res.status, res.text).toBe(409);
      expect(res.body.code).toBe('SWARM_EXISTS');
    }
    expect((await engineSwarm()).NodeID).toBe(nodeId);
  });

  it('lists the nodes with role, availability, labels, resources and reachability', async () => {
    const res = await agent.api('GET', '/cluster/nodes');
    expect(res.status, res.text).toBe(200);
    const self = res.body.data.find((n: { id: string }) => n.id === nodeId);
    expect(self).toMatchObject({ role: 'manager', availability: 'active', state: 'ready', leader: true, reachability: 'reachable' });
    expect(self.resources.nano_cpus).toBeGreaterThan(0);
    expect(self.resources.memory_bytes).toBeGreaterThan(0);
  });

  it('gives admins the join tokens, and writes them nowhere else', async () => {
    const res = await agent.api('GET', '/cluster/join-tokens');
    expect(res.status, res.text).toBe(200);
    const { worker, manager } = res.body.data as { worker: string; manager: string };
    expect(worker).toMatch(/^SWMTKN-1-/);
    expect(manager).toMatch(/^SWMTKN-1-/);
    expect(worker).not.toBe(manager);
    const audit = await agent.api('GET', '/audit/events', { query: { limit: 1000 } });
    expect(audit.status, audit.text).toBe(200);
    for (const secret of [worker, manager]) {
      expect(JSON.stringify(audit.body)).not.toContain(secret);
      expect(agent.output()).not.toContain(secret);
    }
  });

  it('changes node labels and availability through a plan, audited', async () => {
    const labels = { ...labelsBefore, [LABEL]: 'yes' };
    const planned = await agent.api('PATCH', `/cluster/nodes/${nodeId}`, { query: { plan: true }, body: { labels, availability: 'pause' } });
    expect(planned.status, planned.text).toBe(201);
    expect(planned.body.data.changes[0]).toMatchObject({ type: 'node', id: nodeId, actions: ['update'], after: { labels, availability: 'pause' } });
    // A plan changes nothing.
    expect((await docker('node', 'inspect', nodeId, '--format', '{{.Spec.Availability}}')).stdout.trim()).toBe('active');

    const applied = await agent.api('POST', `/plans/${planned.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(200);
    expect(applied.body.data.result).toMatchObject({ id: nodeId, availability: 'pause', labels });
    expect((await docker('node', 'inspect', nodeId, '--format', '{{.Spec.Availability}} {{index .Spec.Labels "' + LABEL + '"}}')).stdout.trim()).toBe(
      'pause yes',
    );

    // Back as it was (labels replaced whole).
    const restored = await agent.api('PATCH', `/cluster/nodes/${nodeId}`, { body: { labels: labelsBefore, availability: 'active' } });
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body.data).toMatchObject({ availability: 'active', labels: labelsBefore });
    const audit = await agent.api('GET', '/audit/events', { query: { limit: 1000 } });
    const actions = audit.body.data.filter((e: { resource_id?: string }) => e.resource_id === nodeId);
    expect(actions.length, JSON.stringify(audit.body.data.slice(0, 5))).toBeGreaterThanOrEqual(2);
  });

  it('answers 404 for an unknown node and 400 for a malformed id or label', async () => {
    expect((await agent.api('PATCH', '/cluster/nodes/nosuchnode0000000000000000', { body: { availability: 'active' } })).status).toBe(404);
    expect((await agent.api('PATCH', '/cluster/nodes/..%2Fx', { body: { availability: 'active' } })).status).toBe(400);
    const bad = await agent.api('PATCH', `/cluster/nodes/${nodeId}`, { body: { labels: { 'bad label': 'x' } } });
    expect(bad.status, bad.text).toBe(400);
    expect(JSON.parse((await docker('node', 'inspect', nodeId, '--format', '{{json .Spec.Labels}}')).stdout) ?? {}).toEqual(labelsBefore);
    expect((await agent.api('PATCH', `/cluster/nodes/${nodeId}`, { body: { availability: 'gone' } })).status).toBe(400);
  });

  it('is for admins only: operators and viewers, global or scoped, get 403', async () => {
    const operator = await createGlobalUser(agent, `op${RUN}`);
    const viewer = await createGlobalUser(agent, `vw${RUN}`, 'viewer');
    const tenant = await createTenant(agent, `te${RUN}`, [`${RUN}-app`]);
    const routes = [
      ['GET', '/cluster', undefined],
      ['GET', '/cluster/nodes', undefined],
      ['GET', '/cluster/join-tokens', undefined],
      ['POST', '/cluster/init', {}],
      ['PATCH', `/cluster/nodes/${nodeId}`, { availability: 'drain' }],
    ] as const;
    for (const [method, path, body] of routes) {
      for (const token of [operator, viewer]) {
        const res = await agent.api(method, path, { token, body });
        expect(res.status, `${method} ${path}: ${res.text}`).toBe(403);
      }
      // Scoped: no `cluster` permission at all (FORBIDDEN), and the resource is global besides.
      for (const [who, token] of principals(tenant)) {
        const res = await agent.api(method, path, { token, body });
        expect(res.status, `${who} ${method} ${path}: ${res.text}`).toBe(403);
        expect(['FORBIDDEN', 'GLOBAL_SCOPE_REQUIRED']).toContain(res.body.code);
      }
    }
    expect((await docker('node', 'inspect', nodeId, '--format', '{{.Spec.Availability}}')).stdout.trim()).toBe('active');
  });
});

/**
 * A stand-in Docker engine in no swarm: it answers ping, info (swarm inactive until its init) and swarm init, as
 * the engine's API does. The real engine cannot leave its swarm for a test (other suites' stacks run on it).
 */
function fakeEngine(): { server: Server; inits: unknown[] } {
  const inits: unknown[] = [];
  let swarm: Record<string, unknown> = { LocalNodeState: 'inactive', NodeID: '', ControlAvailable: false };
  const server = createServer((req, res) => {
    const path = (req.url ?? '').replace(/^\/v[0-9.]+/, '').split('?')[0];
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (path === '/_ping') return void res.end('OK');
      if (path === '/info') return json(200, { Swarm: swarm, Containers: 0, Images: 0 });
      if (path === '/swarm/init' && req.method === 'POST') {
        inits.push(JSON.parse(body || '{}'));
        swarm = { LocalNodeState: 'active', NodeID: 'fakenode1', ControlAvailable: true, Cluster: { ID: 'fakecluster1' }, Nodes: 1, Managers: 1 };
        return json(200, 'fakenode1');
      }
      json(404, { message: `page not found: ${req.method} ${path}` });
    });
  });
  return { server, inits };
}

describe('cluster on an engine in no swarm', () => {
  let agent: TestAgent;
  let fake: ReturnType<typeof fakeEngine>;

  beforeAll(async () => {
    fake = fakeEngine();
    await new Promise<void>((r) => fake.server.listen(0, '127.0.0.1', r));
    const port = (fake.server.address() as AddressInfo).port;
    agent = await startAgent({ plugins: ['access', 'docker', 'cluster'], config: { docker: { host: `tcp://127.0.0.1:${port}` } } });
  });

  afterAll(async () => {
    await agent?.stop();
    fake?.server.close();
  });

  it('answers 409 NOT_SWARM_MANAGER with a clear message where a manager is needed', async () => {
    const info = await agent.api('GET', '/cluster');
    expect(info.status, info.text).toBe(200);
    expect(info.body.data).toMatchObject({ state: 'inactive', manager: false, node_id: null, cluster_id: null });
    for (const path of ['/cluster/nodes', '/cluster/join-tokens']) {
      const res = await agent.api('GET', path);
      expect(res.status, res.text).toBe(409);
      expect(res.body).toMatchObject({ code: 'NOT_SWARM_MANAGER' });
      expect(res.body.error).toMatch(/not a swarm manager.*cluster\/init/);
    }
    const patch = await agent.api('PATCH', '/cluster/nodes/abc', { body: { availability: 'drain' } });
    expect(patch.status, patch.text).toBe(409);
    expect(patch.body.code).toBe('NOT_SWARM_MANAGER');
  });

  it('initialises a single-node swarm, planned first', async () => {
    const planned = await agent.api('POST', '/cluster/init', { query: { plan: true }, body: {} });
    expect(planned.status, planned.text).toBe(201);
    expect(planned.body.data.changes[0]).toMatchObject({ type: 'cluster', id: 'swarm', actions: ['create'] });
    expect(fake.inits).toHaveLength(0);
    const applied = await agent.api('POST', `/plans/${planned.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(201);
    expect(applied.body.data.result).toMatchObject({ state: 'active', manager: true, node_id: 'fakenode1', cluster_id: 'fakecluster1' });
    expect(fake.inits).toEqual([expect.objectContaining({ ListenAddr: '0.0.0.0:2377', AdvertiseAddr: '127.0.0.1' })]);
    const again = await agent.api('POST', '/cluster/init', { body: {} });
    expect(again.status, again.text).toBe(409);
    expect(again.body.code).toBe('SWARM_EXISTS');
  });
});
