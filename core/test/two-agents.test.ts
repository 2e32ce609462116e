/**
 * Two agents in one Node.js process (started by fixtures/two-agents.mjs), every built-in plugin loaded in both: a plugin instance holds its own state, so what
 * one agent stores, schedules or serves never shows in the other, and stopping one leaves the other working. The
 * plugins' modules are imported once per process (one module cache), which is what makes module-level state a bug.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { request, scratchProxy } from '../../test/helpers/agent.js';

interface InProcessAgent {
  url: string;
  token: string;
}

const work = mkdtempSync(join(tmpdir(), 'two-agents-'));

function config(name: string): string {
  const dir = join(work, name);
  const edge = join(work, `${name}-edge`);
  const file = join(work, `${name}.yaml`);
  writeFileSync(
    file,
    stringify({
      listen: '127.0.0.1:0',
      data_dir: join(dir, 'data'),
      admin_password: `Admin-${name}-Pass-1`,
      log: { level: 'warn' },
      plugins: { enabled: ['*'] },
      // No host nginx: the edge renders into a scratch folder and its test/reload commands do nothing.
      proxy: scratchProxy(edge),
      deployments: { path: join(dir, 'deployments') },
    }),
  );
  return file;
}

async function admin(url: string, name: string): Promise<InProcessAgent> {
  const login = await request(url, 'POST', '/auth/login', { body: { username: 'admin', password: `Admin-${name}-Pass-1` } });
  expect(login.status).toBe(200);
  return { url, token: login.body.data.token as string };
}

describe('two agents in one process', () => {
  let a: InProcessAgent;
  let b: InProcessAgent;
  const api = (agent: InProcessAgent, method: string, path: string, body?: unknown) =>
    request(agent.url, method, path, { defaultToken: agent.token, ...(body === undefined ? {} : { body }) });

  let child: ChildProcess;
  let output = '';
  const printed = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not printed in 60 s: ${pattern}\n${output}`)), 60_000);
      const check = () => {
        const m = pattern.exec(output);
        if (!m) return;
        clearTimeout(timer);
        child.stdout!.off('data', check);
        resolve(m);
      };
      child.stdout!.on('data', check);
      check();
    });

  beforeAll(async () => {
    child = spawn(process.execPath, [join(import.meta.dirname, 'fixtures', 'two-agents.mjs'), config('a'), config('b')], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const urls = JSON.parse((await printed(/^\{"first".*$/m))[0]) as { first: string; second: string };
    [a, b] = await Promise.all([admin(urls.first, 'a'), admin(urls.second, 'b')]);
  }, 90_000);
  afterAll(async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(work, { recursive: true, force: true });
  });

  it('run every plugin in both, each with its own instance', async () => {
    const plugins = async (agent: InProcessAgent) =>
      ((await api(agent, 'GET', '/plugins')).body.data as { name: string; status: string }[]).map((p) => `${p.name}:${p.status}`).sort();
    const inA = await plugins(a);
    expect(inA.length).toBeGreaterThanOrEqual(14);
    expect(inA.every((p) => p.endsWith(':running'))).toBe(true);
    expect(await plugins(b)).toEqual(inA);
  });

  it('keep users, keys, dashboards, notification targets and settings apart', async () => {
    expect((await api(a, 'POST', '/users', { username: 'only-in-a', email: 'a@example.com', password: 'Str0ng-Passw0rd!', role: 'viewer' })).status).toBe(201);
    expect((await api(a, 'POST', '/apikeys', { name: 'key-of-a' })).status).toBe(201);
    expect((await api(a, 'POST', '/dashboards', { name: 'board-of-a', panels: [] })).status).toBe(201);
    expect((await api(a, 'PUT', '/notifications/targets', [{ id: 'hook-a', name: 'hook-a', url: 'generic+https://hooks.example.com/a' }])).status).toBe(200);
    expect((await api(a, 'PUT', '/settings', { dns: { api_url: 'http://127.0.0.1:18181' } })).status).toBe(200);

    const names = (rows: { username?: string; name?: string }[]) => rows.map((r) => r.username ?? r.name);
    expect(names((await api(b, 'GET', '/users')).body.data)).not.toContain('only-in-a');
    expect(names((await api(b, 'GET', '/apikeys')).body.data)).not.toContain('key-of-a');
    expect(names((await api(b, 'GET', '/dashboards')).body.data)).not.toContain('board-of-a');
    expect(JSON.stringify((await api(b, 'GET', '/notifications/targets')).body.data)).not.toContain('hook-a');
    expect((await api(b, 'GET', '/settings')).body.data.values.dns.api_url).not.toBe('http://127.0.0.1:18181');

    expect(names((await api(a, 'GET', '/users')).body.data)).toContain('only-in-a');
    expect((await api(a, 'GET', '/settings')).body.data.values.dns.api_url).toBe('http://127.0.0.1:18181');
  });

  it('accept only their own tokens', async () => {
    expect((await request(b.url, 'GET', '/auth/validate', { token: a.token })).status).toBe(401);
    expect((await request(a.url, 'GET', '/auth/validate', { token: b.token })).status).toBe(401);
  });

  it('the other keeps serving when one stops', async () => {
    child.kill('SIGUSR2');
    await printed(/^first stopped$/m);
    await expect(fetch(`${a.url}/api/health`)).rejects.toThrow();
    expect((await api(b, 'GET', '/health')).status).toBe(200);
    expect((await api(b, 'GET', '/openapi.json')).status).toBe(200);
    expect((await api(b, 'POST', '/users', { username: 'after-a-stopped', email: 'b@example.com', password: 'Str0ng-Passw0rd!', role: 'viewer' })).status).toBe(
      201,
    );
  });
});
