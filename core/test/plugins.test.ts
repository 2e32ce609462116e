import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_ENTRY, startAgent, type TestAgent } from '../../test/helpers/agent.js';
import { BROKEN, FIXTURE, NEEDS_MISSING } from './helpers/fixture.js';

describe('plugin loader', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({ plugins: [FIXTURE, BROKEN, NEEDS_MISSING, 'no-such-plugin'] });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('keeps running when a plugin fails, and reports why', async () => {
    const list = await agent.api('GET', '/plugins');
    expect(list.status).toBe(200);
    const byName = Object.fromEntries(list.body.data.map((p: { name: string }) => [p.name, p]));
    expect(byName.fixture).toMatchObject({ status: 'running', error: null, builtin: false });
    expect(byName.broken).toMatchObject({ status: 'failed', error: expect.stringContaining('cannot initialise the broken plugin') });
    expect(byName['needs-missing']).toMatchObject({ status: 'failed', error: expect.stringContaining("'nothing-provides-this'") });
    expect(byName['no-such-plugin']).toMatchObject({ status: 'failed', error: expect.stringContaining('neither a built-in plugin') });
    expect((await agent.api('GET', '/health')).body.data.status).toBe('degraded');
  });

  it('leaves nothing of a failed plugin behind', async () => {
    expect((await agent.api('GET', '/broken/ping')).status).toBe(404);
    const doc = (await agent.api('GET', '/openapi.json')).body;
    expect(doc['x-permissions'].some((r: { resource: string }) => r.resource === 'broken')).toBe(false);
  });

  it('shows one plugin with its routes, jobs and resources', async () => {
    const res = await agent.api('GET', '/plugins/fixture');
    expect(res.status).toBe(200);
    expect(res.body.data.routes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ method: 'PUT', path: '/api/fixture/deployments/:name/widget', plan: true, permission: 'widgets:write' }),
      ]),
    );
    expect(res.body.data.jobs).toEqual([expect.objectContaining({ name: 'count', cron: '0 0 1 1 *', next_run: expect.any(String) })]);
    expect(res.body.data.resources.map((r: { name: string }) => r.name).sort()).toEqual(['secrets', 'widgets']);
    expect((await agent.api('GET', '/plugins/nope')).status).toBe(404);
  });
});

describe('principal directory', () => {
  it('refuses to start when no plugin provides it, naming what is missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-no-directory-'));
    try {
      // A built-in folder without the access plugin: nothing could authenticate a request.
      mkdirSync(join(dir, 'builtin'));
      writeFileSync(join(dir, 'agent.yaml'), `plugins:\n  builtin_dir: ${join(dir, 'builtin')}\n  enabled: []\n`);
      const r = spawnSync(process.execPath, [AGENT_ENTRY, '--config', join(dir, 'agent.yaml')], {
        env: { ...process.env, AGENT_DATA_DIR: join(dir, 'data'), AGENT_LISTEN: '127.0.0.1:0' },
        encoding: 'utf8',
        timeout: 20_000,
      });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain("no plugin provides the principal directory ('principals')");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
