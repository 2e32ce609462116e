import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { REPO_ROOT, startAgent, request, type TestAgent } from '../../../test/helpers/agent.js';

const APP = resolve(REPO_ROOT, 'examples/hello-app');
const FIXTURE = resolve(REPO_ROOT, 'core/test/fixtures/kernel-fixture');

/** A raw request: fetch would normalise `..` before sending. */
function rawGet(url: string, path: string, token: string): Promise<{ status: number; body: any }> {
  return new Promise((done, fail) => {
    const u = new URL(url);
    const req = httpRequest({ host: u.hostname, port: u.port, path, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => done({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null }));
    });
    req.on('error', fail);
    req.end();
  });
}

async function waitFor<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('app plugin behind the plugin proxy', () => {
  let agent: TestAgent;
  let viewer: { token: string };
  beforeAll(async () => {
    agent = await startAgent({ plugins: [APP, FIXTURE] });
    const created = await agent.api('POST', '/fixture/users', {
      body: { username: 'appviewer', password: 'Str0ng-Passw0rd!', role: 'viewer', grants: { alpha: 'read' } },
    });
    expect(created.status).toBe(201);
    viewer = { token: await agent.login('appviewer', 'Str0ng-Passw0rd!') };
    await waitFor(
      () => agent.api('GET', '/plugin/hello-app/whoami'),
      (r) => r.status === 200,
    );
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('forwards the authenticated principal in a signed header', async () => {
    const res = await agent.api('GET', '/plugin/hello-app/whoami');
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ type: 'user', name: 'admin', role: 'admin', deployments: { '*': 'admin' } });
    const v = await agent.api('GET', '/plugin/hello-app/whoami', { token: viewer.token });
    expect(v.body.data).toMatchObject({ name: 'appviewer', role: 'viewer', deployments: { alpha: 'read' } });
  });

  it('authenticates and enforces the permissions the app declared', async () => {
    expect((await request(agent.url, 'GET', '/plugin/hello-app/whoami')).status).toBe(401);
    const denied = await agent.api('POST', '/plugin/hello-app/notes', { token: viewer.token, body: { text: 'x', deployment: 'alpha' } });
    expect(denied.status).toBe(403);
    expect((await agent.api('POST', '/plugin/hello-app/notes', { body: { text: 'for alpha', deployment: 'alpha' } })).status).toBe(201);
    expect((await agent.api('POST', '/plugin/hello-app/notes', { body: { text: 'for beta', deployment: 'beta' } })).status).toBe(201);
    // the app filters by the grants it received
    const seen = await agent.api('GET', '/plugin/hello-app/notes', { token: viewer.token });
    expect(seen.body.data.map((n: { deployment: string }) => n.deployment)).toEqual(['alpha']);
  });

  it('forwards only declared routes and validates their params', async () => {
    expect((await agent.api('GET', '/plugin/hello-app/undeclared')).status).toBe(404);
    expect((await agent.api('DELETE', '/plugin/hello-app/notes')).status).toBe(405);
    const badParam = await agent.api('GET', '/plugin/hello-app/notes/abc');
    expect(badParam.status).toBe(400);
    expect((await agent.api('GET', '/plugin/nope/whoami')).status).toBe(404);
  });

  it('refuses dot segments and encoded separators', async () => {
    for (const path of [
      '/api/plugin/hello-app/../../api/health',
      '/api/plugin/hello-app/%2e%2e/whoami',
      '/api/plugin/hello-app/notes%2f1',
      '/api/plugin/hello-app//whoami',
    ]) {
      const res = await rawGet(agent.url, path, agent.token);
      expect(res.status, path).toBe(400);
      expect(res.body.code).toBe('INVALID_PATH');
    }
  });

  it('lets the app call the agent back with its own system principal', async () => {
    const res = await agent.api('GET', '/plugin/hello-app/agent');
    expect(res.body.data).toMatchObject({ valid: true, principal: { type: 'system', id: 'system:hello-app' } });
  });

  it("starts the app with the agent's heap sizing", async () => {
    // The helper starts the agent with --max-semi-space-size=1 --heap-growing-percent=20; the app process must get
    // them too (its memory counts in the agent's total).
    const { pid } = (await agent.api('GET', '/plugins/hello-app')).body.data.app as { pid: number };
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    expect(argv.slice(1, 4)).toEqual(['--max-semi-space-size=1', '--heap-growing-percent=20', resolve(APP, 'dist/app.js')]);
  });

  it('proxies websockets after authenticating the upgrade', async () => {
    const ws = new WebSocket(`${agent.url.replace('http', 'ws')}/api/plugin/hello-app/echo`, { headers: { authorization: `Bearer ${agent.token}` } });
    const messages: unknown[] = [];
    await new Promise<void>((done, fail) => {
      ws.on('message', (d) => {
        messages.push(JSON.parse(d.toString()));
        if (messages.length === 1) ws.send('ping');
        else done();
      });
      ws.on('error', fail);
    });
    ws.close();
    expect(messages).toEqual([{ hello: 'admin' }, { echo: 'ping' }]);
    const anon = new WebSocket(`${agent.url.replace('http', 'ws')}/api/plugin/hello-app/echo`);
    const status = await new Promise<number>((done) => anon.on('unexpected-response', (_req, res) => done(res.statusCode ?? 0)));
    expect(status).toBe(401);
  });

  it('restarts a crashed app; 502 while it is down; its state survives', async () => {
    await agent.api('POST', '/plugin/hello-app/crash');
    const down = await waitFor(
      () => agent.api('GET', '/plugin/hello-app/notes'),
      (r) => r.status === 502,
      3000,
    );
    expect(down.status).toBe(502);
    expect(down.body.code).toBe('PLUGIN_UNAVAILABLE');
    const back = await waitFor(
      () => agent.api('GET', '/plugin/hello-app/notes'),
      (r) => r.status === 200,
    );
    expect(back.status).toBe(200);
    expect(back.body.data).toHaveLength(2);
    const plugin = (await agent.api('GET', '/plugins/hello-app')).body.data;
    expect(plugin.app).toMatchObject({ status: 'running', restarts: 1, last_exit: { code: 3 } });
    expect(plugin.app.secret).toBeUndefined();
  });

  it('audits mutating requests through the proxy', async () => {
    const rows = (await agent.api('GET', '/fixture/audit')).body.data as Record<string, unknown>[];
    expect(rows.some((r) => r.action === 'hello-app.addNote' && r.success === 1 && r.status === 201)).toBe(true);
  });

  it('documents app routes in the live OpenAPI description', async () => {
    const doc = (await agent.api('GET', '/openapi.json')).body;
    expect(doc.paths['/api/plugin/hello-app/notes'].post).toMatchObject({ operationId: 'hello-app.addNote', 'x-permission': 'notes:write', 'x-app': true });
  });
});

describe('an app never outlives its agent', () => {
  it('exits when the agent is killed with SIGKILL, and the restarted agent runs its own copy', async () => {
    const first = await startAgent({ plugins: [APP], keep: true });
    await waitFor(
      () => first.api('GET', '/plugin/hello-app/whoami'),
      (r) => r.status === 200,
    );
    const { pid } = (await first.api('GET', '/plugins/hello-app')).body.data.app as { pid: number };
    // Gone or a zombie (an orphan whose new parent does not reap it still has a process entry).
    const alive = (p: number) => {
      try {
        return readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1]![0] !== 'Z';
      } catch {
        return false;
      }
    };
    expect(alive(pid)).toBe(true);
    await first.kill();
    const deadline = Date.now() + 5000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(alive(pid)).toBe(false);
    const second = await startAgent({ plugins: [APP], dataDir: first.dataDir });
    try {
      const up = await waitFor(
        () => second.api('GET', '/plugin/hello-app/whoami'),
        (r) => r.status === 200,
      );
      expect(up.status).toBe(200);
      expect((await second.api('GET', '/plugins/hello-app')).body.data.app.pid).not.toBe(pid);
    } finally {
      await second.stop();
    }
  });
});
