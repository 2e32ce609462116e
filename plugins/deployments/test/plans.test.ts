import { existsSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName, webCompose } from './helpers.js';

describe('plans of deployment mutations', () => {
  let agent: TestAgent;
  let dir: string;
  const name = uniqueName('plan');

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments'] });
    dir = join(agent.dataDir, 'deployments', name);
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
  });

  const plan = async (method: string, path: string, options: { body?: unknown; query?: Record<string, string | boolean> } = {}) => {
    const res = await agent.api(method, path, { ...options, query: { ...(options.query ?? {}), plan: true } });
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  };
  const apply = (id: string) => agent.api('POST', `/plans/${id}/apply`);
  const status = async () => (await agent.api('GET', `/deployments/${name}`)).body.data?.status;

  it('previews a create without writing anything, then applies it', async () => {
    const p = await plan('POST', '/deployments', {
      body: { name, compose_content: webCompose(), env_vars: [{ key: 'DB_PASSWORD', value: 'hunter2' }], auto_start: true },
    });
    expect(p.status).toBe('available');
    expect(existsSync(dir)).toBe(false);
    const types = p.changes.map((c: any) => `${c.type}:${c.actions[0]}`);
    expect(types).toEqual(expect.arrayContaining(['deployment:create', 'file:create', 'container:create']));
    const compose = p.changes.find((c: any) => c.id === 'docker-compose.yml');
    expect(compose.diff).toContain('+    image: agent-test/busybox:latest');
    expect(p.changes.filter((c: any) => c.type === 'container')).toHaveLength(2);
    const env = p.changes.find((c: any) => c.id === '.env');
    expect(env.after.added).toEqual(['DB_PASSWORD']);
    expect(JSON.stringify(p)).not.toContain('hunter2');
    const shown = await agent.api('GET', `/plans/${p.id}`);
    expect(JSON.stringify(shown.body)).not.toContain('hunter2');
    expect((await agent.api('GET', `/deployments/${name}`)).status).toBe(404);
    const applied = await apply(p.id);
    expect(applied.status, applied.text).toBe(201);
    expect(applied.body.data.result).toMatchObject({ name, status: 'running' });
    expect(readFileSync(join(dir, '.env'), 'utf8')).toContain('DB_PASSWORD=hunter2');
  });

  it('refuses to plan invalid input', async () => {
    const bad = await agent.api('POST', '/deployments', { query: { plan: true }, body: { name: uniqueName('x'), compose_content: 'services: [' } });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('INVALID_YAML');
    const dup = await agent.api('POST', '/deployments', { query: { plan: true }, body: { name, compose_content: webCompose() } });
    expect(dup.status).toBe(409);
    const wrongState = await agent.api('POST', `/deployments/${name}/start`, { query: { plan: true } });
    expect(wrongState.status).toBe(409);
    expect(wrongState.body.code).toBe('DEPLOYMENT_RUNNING');
  });

  it('previews and applies stop, start and restart', async () => {
    const stop = await plan('POST', `/deployments/${name}/stop`);
    expect(stop.changes.filter((c: any) => c.type === 'container' && c.actions[0] === 'update')).toHaveLength(2);
    expect(await status()).toBe('running');
    expect((await apply(stop.id)).status).toBe(200);
    expect(await status()).toBe('stopped');
    const start = await plan('POST', `/deployments/${name}/start`);
    expect(start.changes.every((c: any) => c.after.state === 'running')).toBe(true);
    expect((await apply(start.id)).status).toBe(200);
    expect(await status()).toBe('running');
    const restart = await plan('POST', `/deployments/${name}/restart`);
    expect((await apply(restart.id)).status).toBe(200);
    expect(await status()).toBe('running');
  });

  it('refuses a stale plan with 409 PLAN_STALE after the compose file changed on disk', async () => {
    const stop = await plan('POST', `/deployments/${name}/stop`);
    const file = join(dir, 'docker-compose.yml');
    writeFileSync(file, readFileSync(file, 'utf8') + '# edited by hand\n');
    const res = await apply(stop.id);
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('PLAN_STALE');
    expect(res.body.drifted).toEqual([`file:${file}`]);
    expect(await status()).toBe('running');
  });

  it('previews an update with the diff and the containers it recreates, then applies it', async () => {
    const next = webCompose().replace('tick-v1', 'tick-v2');
    const p = await plan('PUT', `/deployments/${name}`, {
      body: {
        compose_content: next,
        env_vars: [
          { key: 'DB_PASSWORD', value: 'changed' },
          { key: 'MODE', value: 'x' },
        ],
      },
    });
    const diff = p.changes.find((c: any) => c.type === 'file' && c.id === 'docker-compose.yml').diff;
    expect(diff).toContain('-    command: ["sh", "-c", "i=0; while true; do echo tick-v1');
    expect(diff).toContain('+    command: ["sh", "-c", "i=0; while true; do echo tick-v2');
    expect(p.changes.find((c: any) => c.id === '.env').after).toEqual({ added: ['MODE'], changed: ['DB_PASSWORD'], removed: [] });
    const containers = p.changes.filter((c: any) => c.type === 'container');
    expect(containers).toEqual([expect.objectContaining({ actions: ['update'], after: expect.objectContaining({ service: 'worker', recreated: true }) })]);
    expect(JSON.stringify(p)).not.toContain('"value":"changed"');
    const res = await apply(p.id);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.result.recreated).toBe(true);
    expect(readFileSync(join(dir, 'docker-compose.yml'), 'utf8')).toBe(next);
  });

  it('previews and applies a delete; a stale delete plan is refused', async () => {
    const stale = await plan('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    writeFileSync(join(dir, '.env'), 'EDITED=1\n');
    expect((await apply(stale.id)).body.code).toBe('PLAN_STALE');
    const p = await plan('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    expect(p.changes.map((c: any) => `${c.type}:${c.actions[0]}`)).toEqual(['deployment:delete', 'container:delete', 'container:delete', 'folder:delete']);
    expect(existsSync(dir)).toBe(true);
    const res = await apply(p.id);
    expect(res.status, res.text).toBe(200);
    expect(existsSync(dir)).toBe(false);
  });
});
