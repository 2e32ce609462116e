import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName } from './helpers.js';

const shipped = join(import.meta.dirname, '..', 'templates');

describe('templates', () => {
  let agent: TestAgent;
  let dir: string;
  let deploymentsDir: string;
  const discovered = uniqueName('found');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agent-templates-'));
    cpSync(shipped, dir, { recursive: true });
    // A folder with a compose file, created before the agent starts, is discovered.
    deploymentsDir = mkdtempSync(join(tmpdir(), 'agent-deployments-'));
    mkdirSync(join(deploymentsDir, discovered));
    writeFileSync(join(deploymentsDir, discovered, 'compose.yaml'), 'services:\n  a:\n    image: agent-test/busybox:latest\n');
    mkdirSync(join(deploymentsDir, 'no-compose-here'));
    agent = await startAgent({
      plugins: ['docker', 'deployments', 'access', 'system'],
      config: { templates: { path: dir }, deployments: { path: deploymentsDir } },
    });
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
    rmSync(dir, { recursive: true, force: true });
    rmSync(deploymentsDir, { recursive: true, force: true });
  });

  it('ships at least 12 valid templates with categories', async () => {
    const list = await agent.api('GET', '/templates');
    expect(list.status).toBe(200);
    expect(list.body.data.length).toBeGreaterThanOrEqual(12);
    expect(list.body.data.length).toBe(readdirSync(shipped).length);
    for (const id of ['nginx', 'postgres', 'mariadb', 'redis', 'wikijs', 'ghost', 'minio', 'uptime-kuma', 'gitea', 'n8n', 'static-site', 'wordpress']) {
      expect(list.body.data.map((t: any) => t.id)).toContain(id);
    }
    const cats = await agent.api('GET', '/templates/categories');
    expect(cats.body.data.reduce((n: number, c: any) => n + c.count, 0)).toBe(list.body.data.length);
    expect(cats.body.data.find((c: any) => c.category === 'database').count).toBeGreaterThanOrEqual(3);
    const db = await agent.api('GET', '/templates', { query: { category: 'database' } });
    expect(db.body.data.every((t: any) => t.category === 'database')).toBe(true);
    const search = await agent.api('GET', '/templates', { query: { search: 'wiki' } });
    expect(search.body.data.map((t: any) => t.id)).toContain('wikijs');
  });

  it('serves the compose file, ready to deploy under the host-safety policy', async () => {
    const list = (await agent.api('GET', '/templates')).body.data;
    for (const t of list) {
      const res = await agent.api('GET', `/templates/${t.id}/compose`);
      expect(res.status).toBe(200);
      expect(res.body.data.compose_content).toContain('services:');
      const env_vars = res.body.data.env.map((e: any) => ({ key: e.key, value: e.value || 'Generated-Secret-1' }));
      const plan = await agent.api('POST', '/deployments', {
        query: { plan: true },
        body: { name: uniqueName(`tpl-${t.id}`).slice(0, 63), compose_content: res.body.data.compose_content, env_vars },
      });
      expect(plan.status, `${t.id}: ${plan.text}`).toBe(201);
      // The same in one call: the template by name, its required variables set.
      const variables = Object.fromEntries(t.env.filter((e: any) => e.required && !e.default).map((e: any) => [e.key, 'Generated-Secret-1']));
      const byName = await agent.api('POST', '/deployments', {
        query: { plan: true },
        body: { name: uniqueName(`tpl-${t.id}`).slice(0, 63), template: t.id, variables },
      });
      expect(byName.status, `${t.id}: ${byName.text}`).toBe(201);
    }
    expect((await agent.api('GET', '/templates/nope/compose')).status).toBe(404);
    expect((await agent.api('GET', '/templates/..%2Fetc/compose')).status).toBe(400);
  });

  it('gives deployments of a template its built-in log sources', async () => {
    const name = uniqueName('nginx');
    const created = await agent.api('POST', '/deployments', { body: { name, template: 'nginx' } });
    expect(created.status, created.text).toBe(201);
    const sources = await agent.api('GET', `/deployments/${name}/log-sources`);
    expect(sources.body.data.map((s: any) => `${s.id}:${s.builtin}`)).toEqual(['stdout:true', 'access:true', 'error:true']);
    const clash = await agent.api('PUT', `/deployments/${name}/log-sources`, { body: { sources: [{ id: 'access', name: 'x', path: 'x.log' }] } });
    expect(clash.status).toBe(400);
    const missing = await agent.api('GET', `/deployments/${name}/logs`, { query: { source: 'access' } });
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('LOG_FILE_MISSING');
  });

  it('reports invalid templates on refresh without failing', async () => {
    mkdirSync(join(dir, 'broken-json'));
    writeFileSync(join(dir, 'broken-json', 'template.json'), '{ nope');
    writeFileSync(join(dir, 'broken-json', 'docker-compose.yml'), 'services:\n  a:\n    image: x\n');
    mkdirSync(join(dir, 'bad-compose'));
    writeFileSync(join(dir, 'bad-compose', 'template.json'), JSON.stringify({ id: 'bad-compose', name: 'B', description: 'b', category: 'web' }));
    writeFileSync(join(dir, 'bad-compose', 'docker-compose.yml'), 'services: [');
    mkdirSync(join(dir, 'new-one'));
    writeFileSync(
      join(dir, 'new-one', 'template.json'),
      JSON.stringify({ id: 'new-one', name: 'New', description: 'n', category: 'testing', tags: ['x'], env: [{ key: 'A', default: '1' }] }),
    );
    writeFileSync(join(dir, 'new-one', 'docker-compose.yml'), 'services:\n  a:\n    image: agent-test/busybox:latest\n');
    const res = await agent.api('POST', '/templates/refresh');
    expect(res.status).toBe(200);
    expect(res.body.data.count).toBe(readdirSync(shipped).length + 1);
    expect(res.body.data.invalid.map((i: any) => i.folder).sort()).toEqual(['bad-compose', 'broken-json']);
    expect(res.body.data.invalid.find((i: any) => i.folder === 'bad-compose').error).toMatch(/line 1/);
    expect((await agent.api('GET', '/templates/new-one')).body.data).toMatchObject({ category: 'testing', env: [{ key: 'A', default: '1', secret: false }] });
  });

  it('grants the creator admin access, filters lists for others, drops grants on delete', async () => {
    const pass = 'Operator-Pass-123!';
    for (const username of ['ops1', 'ops2']) {
      const res = await agent.api('POST', '/users', { body: { username, email: `${username}@example.com`, password: pass, role: 'operator' } });
      expect(res.status, res.text).toBe(201);
    }
    const [t1, t2] = [await agent.login('ops1', pass), await agent.login('ops2', pass)];
    const name = uniqueName('owned');
    const created = await agent.api('POST', '/deployments', {
      token: t1,
      body: { name, compose_content: 'services:\n  a:\n    image: agent-test/busybox:latest\n' },
    });
    expect(created.status, created.text).toBe(201);
    const mine = await agent.api('GET', '/deployments', { token: t1 });
    expect(mine.body.data.map((d: any) => d.name)).toEqual([name]);
    expect((await agent.api('GET', '/deployments', { token: t2 })).body.data).toEqual([]);
    expect((await agent.api('GET', `/deployments/${name}`, { token: t2 })).status).toBe(404);
    expect((await agent.api('POST', `/deployments/${name}/start`, { token: t2 })).status).toBe(404);
    const users = await agent.api('GET', `/deployments/${name}/users`);
    expect(users.body.data).toEqual(expect.arrayContaining([expect.objectContaining({ username: 'ops1', access_level: 'admin' })]));
    expect((await agent.api('DELETE', `/deployments/${name}`, { token: t1, query: { remove_files: true } })).status).toBe(200);
    const ops1 = (await agent.api('GET', '/users')).body.data.find((u: any) => u.username === 'ops1');
    expect((await agent.api('GET', `/users/${ops1.id}/deployments`)).body.data).toEqual([]);
  });

  it('lets an admin relax the host-safety policy in the settings', async () => {
    const privileged = { name: uniqueName('priv'), compose_content: 'services:\n  a:\n    image: agent-test/busybox:latest\n    privileged: true\n' };
    const settings = await agent.api('GET', '/settings');
    expect(settings.body.data.values.deployments).toMatchObject({ host_safety: true });
    expect((await agent.api('POST', '/deployments', { query: { plan: true }, body: privileged })).body.code).toBe('HOST_SAFETY');
    const off = await agent.api('PUT', '/settings', { body: { deployments: { host_safety: false } } });
    expect(off.status, off.text).toBe(200);
    expect((await agent.api('POST', '/deployments', { query: { plan: true }, body: privileged })).status).toBe(201);
    await agent.api('PUT', '/settings', { body: { deployments: { host_safety: true } } });
    expect((await agent.api('POST', '/deployments', { query: { plan: true }, body: privileged })).status).toBe(400);
  });

  it('discovered the folder that existed at start', async () => {
    const list = await agent.api('GET', '/deployments');
    expect(list.body.data.map((d: any) => d.name)).toContain(discovered);
    expect(list.body.data.map((d: any) => d.name)).not.toContain('no-compose-here');
    const d = list.body.data.find((x: any) => x.name === discovered);
    expect(d).toMatchObject({
      status: 'stopped',
      compose_file: join(deploymentsDir, discovered, 'compose.yaml'),
      services: [{ name: 'a', status: 'missing' }],
    });
  });
});

describe('deployments without an engine', () => {
  let agent: TestAgent;
  const name = uniqueName('noengine');
  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments'], config: { docker: { host: `unix:///tmp/missing-${name}.sock` } } });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('keeps the files API working and answers 503 DOCKER_UNAVAILABLE for engine work', async () => {
    const created = await agent.api('POST', '/deployments', { body: { name, compose_content: 'services:\n  a:\n    image: x\n' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.status).toBe('unknown');
    const list = await agent.api('GET', '/deployments');
    expect(list.body.data).toEqual([expect.objectContaining({ name, status: 'unknown' })]);
    for (const [method, path] of [
      ['POST', `/deployments/${name}/start`],
      ['POST', `/deployments/${name}/stop`],
      ['GET', `/deployments/${name}/logs`],
      ['GET', `/deployments/${name}/stats`],
      ['DELETE', `/deployments/${name}`],
    ] as const) {
      const res = await agent.api(method, path);
      expect(res.status, `${method} ${path}`).toBe(503);
      expect(res.body.code).toBe('DOCKER_UNAVAILABLE');
    }
    const auto = await agent.api('POST', '/deployments', { body: { name: `${name}-2`, compose_content: 'services:\n  a:\n    image: x\n', auto_start: true } });
    expect(auto.status).toBe(503);
  });
});
