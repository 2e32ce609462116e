import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { startRegistry, type TestRegistry } from './registry.js';

const PASS = 'Str0ng-Pass-word!';
const suffix = `${process.pid}-${Date.now().toString(36)}`;

describe('registries and credentials', () => {
  let agent: TestAgent;
  let registry: TestRegistry;
  let image: string;
  let opToken: string;
  let viewerToken: string;

  beforeAll(async () => {
    registry = await startRegistry();
    // A locally built image, pushed with the registry's own credentials, then removed locally.
    image = `${registry.host}/agent-test/cred-${suffix}:1`;
    await registry.docker(['tag', 'agent-test/busybox:latest', image]);
    await registry.docker(['login', registry.host, '-u', registry.username, '-p', registry.password]);
    await registry.docker(['push', image]);
    await registry.docker(['rmi', image]);
    agent = await startAgent({ plugins: ['access', 'credentials', 'docker'] });
    // Registries and credentials are global: these users run the host's shared state (scope global).
    await agent.api('POST', '/api/users', { body: { username: 'ops', email: 'o@example.com', password: PASS, role: 'operator', scope: 'global' } });
    await agent.api('POST', '/api/users', { body: { username: 'vic', email: 'v@example.com', password: PASS, role: 'viewer', scope: 'global' } });
    opToken = await agent.login('ops', PASS);
    viewerToken = await agent.login('vic', PASS);
  });
  afterAll(async () => {
    await agent?.stop();
    await registry?.docker(['rmi', '-f', image]).catch(() => undefined);
    await registry?.stop();
  });

  it('lists the built-in registries, read-only', async () => {
    const list = await agent.api('GET', '/api/registries');
    expect(list.status).toBe(200);
    expect(list.body.data.filter((r: { builtin: boolean }) => r.builtin).map((r: { slug: string }) => r.slug)).toEqual(['dockerhub', 'ghcr', 'gitlab', 'quay']);
    expect((await agent.api('GET', '/api/registries/ghcr')).body.data).toMatchObject({ host: 'ghcr.io', type: 'ghcr', builtin: true });
    const put = await agent.api('PUT', '/api/registries/dockerhub', { body: { name: 'mine' } });
    expect(put.status).toBe(409);
    expect(put.body.code).toBe('REGISTRY_BUILTIN');
    expect((await agent.api('DELETE', '/api/registries/quay')).body.code).toBe('REGISTRY_BUILTIN');
    expect((await agent.api('GET', '/api/registries/nosuch')).status).toBe(404);
  });

  it('creates, updates and deletes custom registries by slug', async () => {
    const created = await agent.api('POST', '/api/registries', { body: { slug: 'scratch', name: 'Scratch', host: 'registry.example.com:5000' } });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ slug: 'scratch', type: 'generic', insecure: false, builtin: false });
    expect((await agent.api('POST', '/api/registries', { body: { slug: 'scratch', name: 'x', host: 'other.example.com' } })).status).toBe(409);
    expect((await agent.api('POST', '/api/registries', { body: { slug: 'twin', name: 'x', host: 'registry.example.com:5000' } })).body.code).toBe(
      'REGISTRY_EXISTS',
    );
    for (const body of [
      { slug: 'Bad Slug', name: 'x', host: 'a.example.com' },
      { slug: 'ok', name: 'x', host: 'https://a.example.com' },
      { slug: 'ok', name: 'x', host: 'a.example.com/path' },
      { slug: 'ok', name: 'x', host: 'a.example.com', type: 'dockerhub' },
      { slug: 'ok', name: 'x', host: 'a.example.com', extra: 1 },
    ])
      expect((await agent.api('POST', '/api/registries', { body })).status, JSON.stringify(body)).toBe(400);
    const upd = await agent.api('PUT', '/api/registries/scratch', { body: { name: 'Scratch 2', insecure: true } });
    expect(upd.body.data).toMatchObject({ name: 'Scratch 2', insecure: true, host: 'registry.example.com:5000' });
    expect((await agent.api('DELETE', '/api/registries/scratch')).status).toBe(200);
    expect((await agent.api('GET', '/api/registries/scratch')).status).toBe(404);
    // Viewers read registries; operators may change them; viewers may not see credentials.
    expect((await agent.api('GET', '/api/registries', { token: viewerToken })).status).toBe(200);
    expect((await agent.api('POST', '/api/registries', { token: viewerToken, body: {} })).status).toBe(403);
    expect((await agent.api('GET', '/api/credentials', { token: viewerToken })).status).toBe(403);
  });

  let credId: number;

  it('stores credentials encrypted, masked in every answer', async () => {
    await agent.api('POST', '/api/registries', { body: { slug: 'local', name: 'Local test registry', host: registry.host } });
    const bad = await agent.api('POST', '/api/credentials', {
      body: { name: 'x', type: 'registry', registry: 'nosuch', credentials: { username: 'u', password: 'p' } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('UNKNOWN_REGISTRY');
    expect((await agent.api('POST', '/api/credentials', { body: { name: 'x', type: 'ssh', credentials: { username: 'u', password: 'p' } } })).status).toBe(400);
    expect((await agent.api('POST', '/api/credentials', { body: { name: 'x', type: 'registry', credentials: { username: 'u' } } })).status).toBe(400);
    const created = await agent.api('POST', '/api/credentials', {
      token: opToken,
      body: { name: 'local-pusher', type: 'registry', registry: 'local', credentials: { username: registry.username, password: registry.password } },
    });
    expect(created.status, created.text).toBe(201);
    credId = created.body.data.id;
    expect(created.body.data).toMatchObject({
      registry: 'local',
      registry_host: registry.host,
      credentials: { username: registry.username, password: '********' },
    });
    expect(created.text).not.toContain(registry.password);
    expect(
      (await agent.api('POST', '/api/credentials', { body: { name: 'local-pusher', type: 'registry', credentials: { username: 'a', password: 'b' } } })).status,
    ).toBe(409);
    for (const res of [
      await agent.api('GET', '/api/credentials'),
      await agent.api('GET', `/api/credentials/${credId}`),
      await agent.api('GET', '/api/audit/events', { query: { limit: 1000 } }),
    ]) {
      expect(res.status).toBe(200);
      expect(res.text).not.toContain(registry.password);
    }
    // At rest: the credentials document is sealed; the password appears in no file of the data folder.
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) e.isDirectory() ? walk(join(dir, e.name)) : files.push(join(dir, e.name));
    };
    walk(agent.dataDir);
    expect(files.some((f) => f.endsWith('credentials.json.enc'))).toBe(true);
    for (const f of files) expect(readFileSync(f).includes(Buffer.from(registry.password)), f).toBe(false);
  });

  it('tests a credential by logging in to the registry', async () => {
    const ok = await agent.api('POST', `/api/credentials/${credId}/test`);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data).toMatchObject({ valid: true, registry: 'local', url: `http://${registry.host}` });
    expect((await agent.api('GET', `/api/credentials/${credId}`)).body.data.last_test).toMatchObject({ valid: true });

    const wrong = await agent.api('POST', '/api/credentials', {
      body: { name: 'wrong', type: 'registry', registry: 'local', credentials: { username: registry.username, password: 'not-the-password' } },
    });
    const refused = await agent.api('POST', `/api/credentials/${wrong.body.data.id}/test`);
    expect(refused.status).toBe(200);
    expect(refused.body.data).toMatchObject({ valid: false, status: 401, message: expect.stringContaining('unauthorized') });
    await agent.api('DELETE', `/api/credentials/${wrong.body.data.id}`);
    expect((await agent.api('POST', '/api/credentials/9999/test')).status).toBe(404);
  });

  it('keeps the password when an update leaves it out or sends it back masked', async () => {
    const masked = await agent.api('PUT', `/api/credentials/${credId}`, { body: { description: 'pushes test images', credentials: { password: '********' } } });
    expect(masked.status).toBe(200);
    expect(masked.body.data.description).toBe('pushes test images');
    expect((await agent.api('POST', `/api/credentials/${credId}/test`)).body.data.valid).toBe(true);
    expect((await agent.api('PUT', `/api/credentials/${credId}`, { body: { registry: 'nosuch' } })).status).toBe(400);
    expect((await agent.api('PUT', '/api/credentials/9999', { body: {} })).status).toBe(404);
    expect((await agent.api('DELETE', '/api/registries/local')).body.code).toBe('REGISTRY_IN_USE');
  });

  const pull = async (ref: string) => {
    const started = await agent.api('POST', '/api/images/pull', { body: { image: ref } });
    expect(started.status, started.text).toBe(202);
    const id = started.body.data.job_id as string;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const job = (await agent.api('GET', `/api/images/pulls/${id}`)).body.data;
      if (job.status !== 'running' && job.status !== 'queued' && job.status !== 'pending') return job;
      if (Date.now() > deadline) throw new Error(`pull did not finish: ${JSON.stringify(job)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  it('pulls through the agent with the stored credential', async () => {
    const job = await pull(image);
    expect(job).toMatchObject({ status: 'succeeded', authenticated: true });
    await registry.docker(['image', 'inspect', image]);
    await registry.docker(['rmi', image]);
  });

  it('fails the pull once the stored password is wrong', async () => {
    await agent.api('PUT', `/api/credentials/${credId}`, { body: { credentials: { password: 'now-wrong' } } });
    expect((await agent.api('GET', `/api/credentials/${credId}`)).body.data.last_test).toBeNull();
    const job = await pull(image);
    expect(job.status).toBe('failed');
    expect(job.authenticated).toBe(true);
    expect(JSON.stringify(job)).not.toContain(registry.password);
  });
});
