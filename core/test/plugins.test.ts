import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_ENTRY, REPO_ROOT, startAgent, type TestAgent } from '../../test/helpers/agent.js';
import { APP_FIXTURE, BROKEN, FIXTURE, NEEDS_MISSING } from './helpers/fixture.js';

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

describe('app plugins', () => {
  const until = async <T>(fn: () => Promise<T>, ok: (v: T) => boolean): Promise<T> => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const v = await fn();
      if (ok(v) || Date.now() > deadline) return v;
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  it('are run by the apps plugin, which cannot be disabled', async () => {
    const agent = await startAgent({ plugins: [APP_FIXTURE, '!apps'] });
    try {
      const byName = Object.fromEntries((await agent.api('GET', '/plugins')).body.data.map((p: { name: string }) => [p.name, p]));
      expect(byName.apps).toMatchObject({ status: 'running', builtin: true, provides: ['agent.apps'] });
      expect(byName['!apps']).toMatchObject({ status: 'failed', error: "the 'apps' plugin cannot be disabled: it runs the processes of app plugins" });
      const pong = await until(
        () => agent.api('GET', '/plugin/app-fixture/ping'),
        (r) => r.status === 200,
      );
      expect(pong.body).toEqual({ data: 'pong' });
      expect((await agent.api('GET', '/plugins/app-fixture')).body.data.app).toMatchObject({ name: 'app-fixture', status: 'running', restarts: 0 });
    } finally {
      await agent.stop();
    }
  });

  it('read as not running without the apps plugin', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-no-apps-'));
    // A built-in folder with the access plugin alone: nothing runs app processes.
    mkdirSync(join(dir, 'builtin'));
    symlinkSync(join(REPO_ROOT, 'plugins', 'access'), join(dir, 'builtin', 'access'));
    const agent = await startAgent({ config: { plugins: { enabled: [APP_FIXTURE], builtin_dir: join(dir, 'builtin') } } });
    try {
      const list = (await agent.api('GET', '/plugins')).body.data as { name: string; app: unknown }[];
      expect(list.map((p) => p.name).sort()).toEqual(['access', 'app-fixture']);
      expect(list.find((p) => p.name === 'app-fixture')!.app).toEqual({ status: 'stopped' });
      const res = await agent.api('GET', '/plugin/app-fixture/ping');
      expect(res.status).toBe(502);
      expect(res.body).toEqual({ error: "app plugin 'app-fixture' is not running", code: 'PLUGIN_UNAVAILABLE' });
      // A route the app did not declare is refused before any app is looked up.
      expect((await agent.api('GET', '/plugin/app-fixture/nope')).status).toBe(404);
    } finally {
      await agent.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
