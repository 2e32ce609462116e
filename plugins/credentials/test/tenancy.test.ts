/**
 * Tenancy of registries and credentials (issue #14), against a real registry (Debian's docker-registry with htpasswd)
 * and a second HTTP server standing for a host that should never get the password:
 * - both are global: two tenants (each a scoped user and a scoped key) are refused every route, the test included;
 * - a secret stays bound to where it was entered: moving a credential to another registry, or a registry that
 *   credentials use to another URL, needs the password again in the same request (400 SECRET_REENTRY_REQUIRED and
 *   nothing changed otherwise); a credential whose registry moved without that (its file edited while the agent was
 *   stopped) is neither tested (409) nor used for pulls; the other host never sees the password.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobalUser, createTenant, expectGlobalOnly, principals, type Tenant } from '../../docker/test/tenants.js';
import { startRegistry, type TestRegistry } from './registry.js';

/** A host that answers like a registry asking for Basic auth and records every Authorization header it gets. */
async function startCollector(): Promise<{ host: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const server: Server = createServer((req, res) => {
    const auth = req.headers.authorization;
    if (auth) seen.push(auth);
    if (auth) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    else res.writeHead(401, { 'www-authenticate': 'Basic realm="collector"', 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    host: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const basicPassword = (header: string) =>
  Buffer.from(header.replace(/^Basic /, ''), 'base64')
    .toString('utf8')
    .split(':')
    .slice(1)
    .join(':');

describe('registries, credentials and tenants', () => {
  let registry: TestRegistry;
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let agent: TestAgent;
  let dataDir: string;
  let firstWorkDir: string;
  let alice: Tenant;
  let bob: Tenant;
  let operator: string;
  let credId: number;

  beforeAll(async () => {
    [registry, collector] = await Promise.all([startRegistry(), startCollector()]);
    agent = await startAgent({ plugins: ['access', 'credentials', 'docker'], keep: true });
    dataDir = agent.dataDir;
    firstWorkDir = agent.workDir;
    [alice, bob] = await Promise.all([createTenant(agent, 'alice', ['shop']), createTenant(agent, 'bob', ['blog'])]);
    operator = await createGlobalUser(agent, 'gop');
    // `other` names the collector as localhost: `local` may then be moved to its address (hosts are unique).
    for (const [slug, host] of [
      ['local', registry.host],
      ['other', collector.host.replace('127.0.0.1', 'localhost')],
    ]) {
      const created = await agent.api('POST', '/registries', { token: operator, body: { slug, name: slug, host } });
      expect(created.status, created.text).toBe(201);
    }
    const cred = await agent.api('POST', '/credentials', {
      token: operator,
      body: { name: 'pusher', type: 'registry', registry: 'local', credentials: { username: registry.username, password: registry.password } },
    });
    expect(cred.status, cred.text).toBe(201);
    credId = cred.body.data.id;
  });
  afterAll(async () => {
    await agent?.stop();
    await Promise.all([registry?.stop(), collector?.close()]);
    // Kept for the restart with the same data folder.
    if (firstWorkDir) rmSync(firstWorkDir, { recursive: true, force: true });
  });

  it('refuses every registry and credential route to scoped principals, the test included', async () => {
    for (const [who, token] of [...principals(alice), ...principals(bob)]) {
      for (const [method, path, body] of [
        ['GET', '/registries', undefined],
        ['GET', '/registries/local', undefined],
        ['POST', '/registries', { slug: 'mine', name: 'mine', host: 'mine.example.com' }],
        ['PUT', '/registries/local', { host: collector.host }],
        ['DELETE', '/registries/other', undefined],
        ['GET', '/credentials', undefined],
        ['GET', `/credentials/${credId}`, undefined],
        ['POST', '/credentials', { name: 'mine', type: 'registry', registry: 'other', credentials: { username: 'u', password: 'p' } }],
        ['PUT', `/credentials/${credId}`, { registry: 'other', credentials: { password: 'p' } }],
        ['DELETE', `/credentials/${credId}`, undefined],
        ['POST', `/credentials/${credId}/test`, undefined],
      ] as const)
        expectGlobalOnly(await agent.api(method, path, { token, body }), `${who} ${method} ${path}`);
    }
    const cred = (await agent.api('GET', `/credentials/${credId}`, { token: operator })).body.data;
    expect(cred).toMatchObject({ registry: 'local', registry_host: registry.host, bound_url: `http://${registry.host}`, bound: true });
    expect((await agent.api('GET', '/registries/local', { token: operator })).body.data.host).toBe(registry.host);
    expect(collector.seen).toEqual([]);
  });

  it('tests a credential against the registry it was entered for (global operator)', async () => {
    const ok = await agent.api('POST', `/credentials/${credId}/test`, { token: operator });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data).toMatchObject({ valid: true, url: `http://${registry.host}` });
  });

  it('needs the password again to move a credential to another registry', async () => {
    for (const body of [
      { registry: 'other' },
      { registry: 'other', credentials: { password: '********' } },
      { registry: 'other', credentials: { username: 'someone' } },
    ]) {
      const res = await agent.api('PUT', `/credentials/${credId}`, { token: operator, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ code: 'SECRET_REENTRY_REQUIRED', credentials: [credId] });
    }
    expect((await agent.api('GET', `/credentials/${credId}`, { token: operator })).body.data).toMatchObject({
      registry: 'local',
      credentials: { username: registry.username },
    });
    // Other changes need nothing more.
    expect((await agent.api('PUT', `/credentials/${credId}`, { token: operator, body: { description: 'test images' } })).status).toBe(200);
    expect(collector.seen).toEqual([]);
  });

  it('needs the passwords of its credentials again to point a registry at another URL', async () => {
    const moved = await agent.api('PUT', '/registries/local', { token: operator, body: { host: collector.host } });
    expect(moved.status).toBe(400);
    expect(moved.body).toMatchObject({ code: 'SECRET_REENTRY_REQUIRED', credentials: [credId] });
    expect(moved.text).not.toContain(registry.password);
    const masked = await agent.api('PUT', '/registries/local', {
      token: operator,
      body: { host: 'elsewhere.example.com', credentials: [{ id: credId, password: '********' }] },
    });
    expect(masked.status).toBe(400);
    const foreign = await agent.api('PUT', '/registries/other', { token: operator, body: { name: 'x', credentials: [{ id: credId, password: 'x' }] } });
    expect(foreign.status).toBe(400);
    expect((await agent.api('GET', '/registries/local', { token: operator })).body.data.host).toBe(registry.host);
    // The URL does not change (a loopback registry is plain HTTP anyway): nothing to re-enter.
    const same = await agent.api('PUT', '/registries/local', { token: operator, body: { insecure: true, name: 'Local' } });
    expect(same.status, same.text).toBe(200);
    expect((await agent.api('POST', `/credentials/${credId}/test`, { token: operator })).body.data.valid).toBe(true);
    expect(collector.seen).toEqual([]);

    // With the password given for the new place, the credential goes there, bound to it.
    const rebound = await agent.api('PUT', '/registries/local', {
      token: operator,
      body: { host: collector.host, credentials: [{ id: credId, password: 'meant-for-the-other-host' }] },
    });
    expect(rebound.status, rebound.text).toBe(200);
    const cred = (await agent.api('GET', `/credentials/${credId}`, { token: operator })).body.data;
    expect(cred).toMatchObject({ bound_url: `http://${collector.host}`, bound: true, last_test: null });
    const tested = await agent.api('POST', `/credentials/${credId}/test`, { token: operator });
    expect(tested.body.data).toMatchObject({ valid: true, url: `http://${collector.host}` });
    expect(collector.seen.map(basicPassword)).toEqual(['meant-for-the-other-host']);

    // Back, with the real password entered again.
    const back = await agent.api('PUT', '/registries/local', {
      token: operator,
      body: { host: registry.host, credentials: [{ id: credId, password: registry.password }] },
    });
    expect(back.status, back.text).toBe(200);
    expect((await agent.api('POST', `/credentials/${credId}/test`, { token: operator })).body.data).toMatchObject({
      valid: true,
      url: `http://${registry.host}`,
    });
  });

  it("neither tests nor pulls with a credential whose registry moved behind the agent's back", async () => {
    await agent.stop();
    // An edit of the registry file while the agent is stopped: the credential was entered for the real registry.
    const file = join(dataDir, 'plugins', 'credentials', 'registries.json');
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    doc.registries.find((r: { slug: string }) => r.slug === 'local').host = collector.host;
    writeFileSync(file, JSON.stringify(doc));
    agent = await startAgent({ plugins: ['access', 'credentials', 'docker'], dataDir });
    operator = await agent.login('gop', 'Tenant-Pass-2024!x');
    const before = collector.seen.length;

    const cred = (await agent.api('GET', `/credentials/${credId}`, { token: operator })).body.data;
    expect(cred).toMatchObject({ bound_url: `http://${registry.host}`, bound: false });
    const tested = await agent.api('POST', `/credentials/${credId}/test`, { token: operator });
    expect(tested.status).toBe(409);
    expect(tested.body).toMatchObject({ code: 'SECRET_REENTRY_REQUIRED', credentials: [credId] });

    const started = await agent.api('POST', '/images/pull', { token: operator, body: { image: `${collector.host}/agent-test/none:1` } });
    expect(started.status, started.text).toBe(202);
    let job: { status: string; authenticated: boolean } = { status: 'running', authenticated: true };
    const deadline = Date.now() + 60_000;
    while (job.status === 'running' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      job = (await agent.api('GET', `/images/pulls/${started.body.data.job_id}`, { token: operator })).body.data;
    }
    expect(job).toMatchObject({ status: 'failed', authenticated: false });
    expect(collector.seen.slice(before)).toEqual([]);
    expect(collector.seen.map(basicPassword)).not.toContain(registry.password);
  });
});
