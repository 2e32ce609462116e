/**
 * Tenancy of the docker routes (issue #14) against the real engine: two tenants (each a scoped user and a scoped
 * key) whose deployments are compose projects of real containers, volumes and networks, plus objects of no
 * deployment. Each tenant sees and acts on its own only; the other's answer 404 by name and by id and never appear
 * in lists or messages; objects of no deployment and every global write answer 403 GLOBAL_SCOPE_REQUIRED; a global
 * operator still reaches everything.
 */
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobalUser, createTenant, expectGlobalOnly, principals, type Tenant } from './tenants.js';

const id = randomBytes(4).toString('hex');
const A = `ta-${id}`;
const B = `tb-${id}`;
const n = (what: string) => `agent-test-${what}-${id}`;
const docker = (...args: string[]) => execa('docker', args);
const project = (name: string) => ['--label', `com.docker.compose.project=${name}`];

describe('docker routes and tenants', () => {
  let agent: TestAgent;
  let alice: Tenant;
  let bob: Tenant;
  let reader: Tenant;
  let operator: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['access', 'docker'] });
    for (const [vol, labels] of [
      [n('vol-a'), project(A)],
      [n('vol-a2'), project(A)],
      [n('vol-b'), project(B)],
      [n('vol-g'), []],
    ] as const) {
      await docker('volume', 'create', '--label', 'agent.test=1', ...labels, vol);
    }
    for (const [net, labels] of [
      [n('net-a'), project(A)],
      [n('net-b'), project(B)],
      [n('net-g'), []],
    ] as const) {
      await docker('network', 'create', '--label', 'agent.test=1', ...labels, net);
    }
    const run = async (name: string, labels: readonly string[], extra: string[] = []) => {
      ids[name] = (
        await docker(
          'run',
          '-d',
          '--name',
          name,
          '--label',
          'agent.test=1',
          ...labels,
          ...extra,
          'agent-test/busybox:latest',
          'sh',
          '-c',
          `echo hello-from-${name}; while true; do sleep 1; done`,
        )
      ).stdout.trim();
    };
    await run(n('box-a'), [...project(A), '--label', 'com.docker.compose.service=web'], ['--network', n('net-a')]);
    // B's container mounts A's volume (an external volume): A must not learn its name.
    await run(n('box-b'), [...project(B), '--label', 'com.docker.compose.service=web'], ['-v', `${n('vol-a')}:/data`, '--network', n('net-b')]);
    await run(n('box-g'), []);
    [alice, bob, reader] = await Promise.all([
      createTenant(agent, `alice${id}`, [A]),
      createTenant(agent, `bob${id}`, [B]),
      createTenant(agent, `rita${id}`, [A], 'read'),
    ]);
    operator = await createGlobalUser(agent, `gop${id}`);
  });

  afterAll(async () => {
    await agent?.stop();
    const { stdout } = await docker('ps', '-aq', '--filter', `name=${id}`);
    if (stdout.trim()) await docker('rm', '-f', ...stdout.trim().split('\n'));
    for (const vol of ['vol-a', 'vol-a2', 'vol-b', 'vol-g', 'vol-new']) await docker('volume', 'rm', '-f', n(vol)).catch(() => undefined);
    for (const net of ['net-a', 'net-b', 'net-g', 'net-new']) await docker('network', 'rm', n(net)).catch(() => undefined);
  });

  it("lists only the tenant's own containers, volumes and networks, never naming the other tenant", async () => {
    for (const [who, token] of principals(alice)) {
      const containers = await agent.api('GET', '/containers', { token });
      expect(containers.status, who).toBe(200);
      const names = containers.body.data.map((c: { name: string }) => c.name);
      expect(names, who).toContain(n('box-a'));
      expect(
        containers.body.data.every((c: { deployment: string | null }) => c.deployment === A),
        who,
      ).toBe(true);
      expect(containers.text, who).not.toContain(B);

      const own = await agent.api('GET', '/containers', { token, query: { deployment: A } });
      expect(
        own.body.data.map((c: { name: string }) => c.name),
        who,
      ).toEqual([n('box-a')]);
      const foreign = await agent.api('GET', '/containers', { token, query: { deployment: B } });
      expect(foreign.status, who).toBe(404);
      expect(foreign.text, who).not.toContain(n('box-b'));

      const volumes = await agent.api('GET', '/volumes', { token });
      expect(volumes.status, who).toBe(200);
      expect(volumes.body.data.map((v: { name: string }) => v.name).sort(), who).toEqual([n('vol-a'), n('vol-a2')]);
      // In use by B's container: shown as used, without its name.
      expect(
        volumes.body.data.find((v: { name: string }) => v.name === n('vol-a')),
        who,
      ).toMatchObject({ in_use: true, containers: [] });
      expect(volumes.text, who).not.toContain(B);

      const networks = await agent.api('GET', '/networks', { token });
      expect(networks.status, who).toBe(200);
      expect(
        networks.body.data.map((x: { name: string }) => x.name),
        who,
      ).toEqual([n('net-a')]);
      expect(networks.body.data[0], who).toMatchObject({ deployment: A, containers: [n('box-a')] });
    }
    // Bob's view is the mirror image: nothing of A, nothing global.
    for (const [who, token] of principals(bob)) {
      const all = [
        await agent.api('GET', '/containers', { token }),
        await agent.api('GET', '/volumes', { token }),
        await agent.api('GET', '/networks', { token }),
      ];
      expect(
        all[0]!.body.data.map((c: { name: string }) => c.name),
        who,
      ).toEqual([n('box-b')]);
      expect(
        all[1]!.body.data.map((v: { name: string }) => v.name),
        who,
      ).toEqual([n('vol-b')]);
      expect(
        all[2]!.body.data.map((x: { name: string }) => x.name),
        who,
      ).toEqual([n('net-b')]);
      for (const res of all) expect(res.text, who).not.toContain(A);
    }
  });

  it("answers 404 for the other tenant's containers by name and by id, 403 for containers of no deployment", async () => {
    for (const [who, token] of principals(alice)) {
      for (const ref of [n('box-b'), ids[n('box-b')]!, ids[n('box-b')]!.slice(0, 12)]) {
        for (const [method, path] of [
          ['POST', `/containers/${ref}/stop`],
          ['POST', `/containers/${ref}/start`],
          ['POST', `/containers/${ref}/restart`],
          ['DELETE', `/containers/${ref}`],
          ['GET', `/containers/${ref}/logs`],
        ] as const) {
          const res = await agent.api(method, path, { token, query: method === 'POST' && !path.endsWith('start') ? { timeout: 0 } : undefined });
          expect(res.status, `${who} ${method} ${path}`).toBe(404);
          expect(res.text, `${who} ${method} ${path}`).not.toContain(B);
        }
      }
      for (const [method, path] of [
        ['POST', `/containers/${n('box-g')}/stop`],
        ['POST', `/containers/${n('box-g')}/restart`],
        ['DELETE', `/containers/${n('box-g')}`],
        ['GET', `/containers/${n('box-g')}/logs`],
        ['POST', `/containers/${ids[n('box-g')]}/stop`],
      ] as const)
        expectGlobalOnly(await agent.api(method, path, { token, query: method === 'POST' ? { timeout: 0 } : undefined }), `${who} ${method} ${path}`);
    }
    // Nothing happened to them.
    const state = async (name: string) => (await docker('inspect', '-f', '{{.State.Running}}', name)).stdout.trim();
    expect(await state(n('box-b'))).toBe('true');
    expect(await state(n('box-g'))).toBe('true');
  });

  it('lets a tenant act on its own containers at the level it holds', async () => {
    for (const [who, token] of principals(alice)) {
      const logs = await agent.api('GET', `/containers/${n('box-a')}/logs`, { token });
      expect(logs.status, who).toBe(200);
      expect(
        logs.body.data.map((l: { text: string }) => l.text),
        who,
      ).toContain(`hello-from-${n('box-a')}`);
      const restarted = await agent.api('POST', `/containers/${ids[n('box-a')]}/restart`, { token, query: { timeout: 0 } });
      expect(restarted.status, `${who}: ${restarted.text}`).toBe(200);
      expect(restarted.body.data).toMatchObject({ name: n('box-a'), state: 'running' });
    }
    // Read access: logs yes, changes no.
    for (const [who, token] of principals(reader)) {
      expect((await agent.api('GET', `/containers/${n('box-a')}/logs`, { token })).status, who).toBe(200);
      const stop = await agent.api('POST', `/containers/${n('box-a')}/stop`, { token, query: { timeout: 0 } });
      expect(stop.status, who).toBe(403);
      expect(stop.body.code, who).toBe('FORBIDDEN');
      expect((await agent.api('DELETE', `/volumes/${n('vol-a2')}`, { token })).status, who).toBe(403);
    }
  });

  it("keeps volume and network deletes to the tenant's own, without naming the other tenant's users", async () => {
    for (const [who, token] of principals(alice)) {
      expect((await agent.api('DELETE', `/volumes/${n('vol-b')}`, { token })).status, who).toBe(404);
      expectGlobalOnly(await agent.api('DELETE', `/volumes/${n('vol-g')}`, { token }), `${who} volume of no deployment`);
      expect((await agent.api('DELETE', `/networks/${n('net-b')}`, { token })).status, who).toBe(404);
      expectGlobalOnly(await agent.api('DELETE', `/networks/${n('net-g')}`, { token }), `${who} network of no deployment`);
      expectGlobalOnly(await agent.api('DELETE', '/networks/bridge', { token }), `${who} built-in network`);
      const inUse = await agent.api('DELETE', `/volumes/${n('vol-a')}`, { token });
      expect(inUse.status, who).toBe(409);
      expect(inUse.body.code).toBe('VOLUME_IN_USE');
      expect(inUse.text, who).not.toContain(B);
      expect(inUse.text, who).not.toContain(n('box-b'));
    }
    const volume = await agent.api('DELETE', `/volumes/${n('vol-a2')}`, { token: alice.key });
    expect(volume.status, volume.text).toBe(200);
    expect(volume.body.data).toEqual({ name: n('vol-a2'), deployment: A });
    await docker('network', 'disconnect', n('net-a'), n('box-a'));
    const network = await agent.api('DELETE', `/networks/${n('net-a')}`, { token: alice.user });
    expect(network.status, network.text).toBe(200);
    // The other tenant's and the global ones are still there.
    for (const vol of ['vol-b', 'vol-g']) await docker('volume', 'inspect', n(vol));
    for (const net of ['net-b', 'net-g']) await docker('network', 'inspect', n(net));
  });

  it('refuses every global write (and image reads) to scoped principals', async () => {
    for (const [who, token] of [...principals(alice), ...principals(bob)]) {
      const own = who.startsWith('alice') ? A : B;
      expectGlobalOnly(
        await agent.api('POST', '/volumes', { token, body: { name: n('vol-new'), labels: { 'com.docker.compose.project': own } } }),
        `${who} create volume`,
      );
      expectGlobalOnly(
        await agent.api('POST', '/networks', { token, body: { name: n('net-new'), labels: { 'com.docker.compose.project': own } } }),
        `${who} create network`,
      );
      expectGlobalOnly(await agent.api('POST', '/images/pull', { token, body: { image: 'agent-test/busybox:latest' } }), `${who} pull`);
      expectGlobalOnly(await agent.api('DELETE', `/images/${encodeURIComponent('agent-test/busybox:latest')}`, { token }), `${who} delete image`);
      expectGlobalOnly(await agent.api('GET', '/images', { token }), `${who} list images`);
      expectGlobalOnly(await agent.api('GET', '/images/pulls', { token }), `${who} list pulls`);
    }
    await expect(docker('volume', 'inspect', n('vol-new'))).rejects.toThrow();
    await expect(docker('network', 'inspect', n('net-new'))).rejects.toThrow();
  });

  it('lets a global operator reach everything: other projects, objects of no deployment, images with their users', async () => {
    const containers = (await agent.api('GET', '/containers', { token: operator })).body.data.map((c: { name: string }) => c.name);
    expect(containers).toEqual(expect.arrayContaining([n('box-a'), n('box-b'), n('box-g')]));
    const volumes = (await agent.api('GET', '/volumes', { token: operator })).body.data;
    expect(volumes.find((v: { name: string }) => v.name === n('vol-a'))).toMatchObject({ containers: [n('box-b')] });
    expect(volumes.map((v: { name: string }) => v.name)).toEqual(expect.arrayContaining([n('vol-b'), n('vol-g')]));
    const networks = (await agent.api('GET', '/networks', { token: operator })).body.data.map((x: { name: string }) => x.name);
    expect(networks).toEqual(expect.arrayContaining(['bridge', n('net-b'), n('net-g')]));
    const stop = await agent.api('POST', `/containers/${n('box-g')}/stop`, { token: operator, query: { timeout: 0 } });
    expect(stop.status, stop.text).toBe(200);
    expect((await agent.api('POST', `/containers/${n('box-g')}/start`, { token: operator })).body.data.state).toBe('running');
    const vol = await agent.api('POST', '/volumes', { token: operator, body: { name: n('vol-new'), labels: { 'agent.test': '1' } } });
    expect(vol.status, vol.text).toBe(201);
    const net = await agent.api('POST', '/networks', { token: operator, body: { name: n('net-new'), labels: { 'agent.test': '1' } } });
    expect(net.status, net.text).toBe(201);
    expect((await agent.api('DELETE', `/volumes/${n('vol-new')}`, { token: operator })).status).toBe(200);
    expect((await agent.api('DELETE', `/networks/${n('net-new')}`, { token: operator })).status).toBe(200);
    const images = await agent.api('GET', '/images', { token: operator });
    expect(images.status).toBe(200);
    const busybox = images.body.data.find((i: { tags: string[] }) => i.tags.includes('agent-test/busybox:latest'));
    expect(busybox.deployments).toEqual(expect.arrayContaining([A, B]));
  });

  it('bounds integer query parameters (400, never 500)', async () => {
    for (const [path, query] of [
      [`/containers/${n('box-a')}/logs`, { tail: '100000000000000000000' }],
      [`/containers/${n('box-a')}/logs`, { tail: -1 }],
      [`/containers/${n('box-a')}/stop`, { timeout: '99999999999999999999' }],
    ] as const) {
      const res = await agent.api(path.endsWith('stop') ? 'POST' : 'GET', path, { token: alice.user, query });
      expect(res.status, `${path} ${JSON.stringify(query)}`).toBe(400);
    }
  });
});
