/**
 * Revocation is immediate (DESIGN.md 8): what outlives its checks — a websocket log follow of a running deployment,
 * a streamed answer of a route, a streamed request and a websocket proxied to an app plugin — ends within a second of
 * the change that takes its rights away: a key deleted or revoked, its user disabled, deleted, demoted or given a new
 * password, a grant removed or lowered. Tokens issued before a password change, a deactivation or a demotion are
 * refused from then on. What still passes stays open. The kernel's end of this is event-driven (the access plugin's
 * `principals.changed`), so the one-second bound is asserted; the measured figures (from the moment the revoking
 * request is sent to the moment the client sees its connection end) are printed at the end.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { scratchProxy, startAgent, type TestAgent } from './helpers/agent.js';
import { APP_FIXTURE, FIXTURE } from '../core/test/helpers/fixture.js';
import { cleanupDocker, uniqueName, until, webCompose } from '../plugins/deployments/test/helpers.js';

const PASS = 'Revoke-Pass-2024!x';
const BOUND_MS = 1000;

type Kind = 'log follow (websocket)' | 'system log stream' | 'streamed route answer' | 'proxied stream' | 'proxied websocket';
const figures: { trigger: string; kind: Kind; ms: number }[] = [];

interface Ended {
  at: number;
  code?: number;
  reason?: string;
  status?: number;
  complete?: boolean;
}

interface Open {
  kind: Kind;
  /** Messages (websocket) or chunks (stream) received so far. */
  received(): number;
  ended: Promise<Ended>;
  isOpen(): boolean;
}

const wsUrl = (agent: TestAgent, path: string) => new URL(`/api${path}`, agent.url.replace('http', 'ws'));

/** A log follow of the worker of `deployment` (a line every 200 ms), once its first line arrived. */
async function follow(agent: TestAgent, deployment: string, token: string): Promise<Open> {
  const url = wsUrl(agent, `/deployments/${deployment}/logs/stream`);
  url.searchParams.set('service', 'worker');
  url.searchParams.set('tail', '1');
  const ws = new WebSocket(url);
  let lines = 0;
  let open = true;
  const ended = new Promise<Ended>((done) =>
    ws.on('close', (code, reason) => {
      open = false;
      done({ at: Date.now(), code, reason: reason.toString() });
    }),
  );
  ws.on('open', () => ws.send(token));
  const first = new Promise<void>((done, fail) => {
    ws.on('message', (data) => {
      if ((JSON.parse(data.toString()) as { type: string }).type === 'line' && ++lines === 1) done();
    });
    void ended.then((e) => fail(new Error(`follow closed before its first line: ${e.code} ${e.reason}`)));
  });
  await first;
  return { kind: 'log follow (websocket)', received: () => lines, ended, isOpen: () => open };
}

/** A system log stream (the proxy's access log), once it is ready. */
async function systemLogs(agent: TestAgent, token: string, deployment?: string): Promise<Open> {
  const url = wsUrl(agent, '/system/logs/stream');
  url.searchParams.set('source', 'proxy-access');
  if (deployment) url.searchParams.set('deployment', deployment);
  const ws = new WebSocket(url);
  let messages = 0;
  let open = true;
  const ended = new Promise<Ended>((done) =>
    ws.on('close', (code, reason) => {
      open = false;
      done({ at: Date.now(), code, reason: reason.toString() });
    }),
  );
  ws.on('open', () => ws.send(token));
  await new Promise<void>((done, fail) => {
    ws.on('message', (data) => {
      messages++;
      if ((JSON.parse(data.toString()) as { type?: string }).type === 'ready') done();
    });
    void ended.then((e) => fail(new Error(`system log stream closed before it was ready: ${e.code} ${e.reason}`)));
  });
  return { kind: 'system log stream', received: () => messages, ended, isOpen: () => open };
}

/** A streamed GET (a route's or a proxied one), once its first chunk arrived. */
async function stream(agent: TestAgent, path: string, token: string, kind: Kind): Promise<Open> {
  const u = new URL(`/api${path}`, agent.url);
  let chunks = 0;
  let open = true;
  let answer: IncomingMessage | null = null;
  let markEnded: (e: Ended) => void = () => undefined;
  const ended = new Promise<Ended>((done) => (markEnded = done));
  const end = (e: Omit<Ended, 'at'>) => {
    if (!open) return;
    open = false;
    markEnded({ at: Date.now(), ...e });
  };
  await new Promise<void>((first, fail) => {
    const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname, headers: { authorization: `Bearer ${token}` } }, (res) => {
      answer = res;
      if (res.statusCode !== 200) fail(new Error(`${path}: ${res.statusCode}`));
      res.on('data', () => {
        if (++chunks === 1) first();
      });
      res.on('error', () => undefined);
      res.on('close', () => end({ status: res.statusCode, complete: res.complete }));
    });
    req.on('error', () => end({ status: answer?.statusCode, complete: false }));
    req.end();
  });
  return { kind, received: () => chunks, ended, isOpen: () => open };
}

/** A websocket proxied to the app fixture (it echoes), once the app's greeting arrived. */
async function proxiedSocket(agent: TestAgent, token: string): Promise<Open> {
  const ws = new WebSocket(wsUrl(agent, '/plugin/app-fixture/echo'), { headers: { authorization: `Bearer ${token}` } });
  let messages = 0;
  let open = true;
  const ended = new Promise<Ended>((done) =>
    ws.on('close', (code, reason) => {
      open = false;
      done({ at: Date.now(), code, reason: reason.toString() });
    }),
  );
  ws.on('error', () => undefined);
  await new Promise<void>((done, fail) => {
    ws.on('message', () => {
      if (++messages === 1) done();
    });
    void ended.then((e) => fail(new Error(`proxied socket closed before the app greeted: ${e.code}`)));
  });
  return { kind: 'proxied websocket', received: () => messages, ended, isOpen: () => open };
}

/** Waits for `c` to end, records the time since `since`, and asserts the bound. */
async function endedWithin(c: Open, trigger: string, since: number): Promise<Ended> {
  const timeout = new Promise<null>((done) => setTimeout(() => done(null), 10_000));
  const e = await Promise.race([c.ended, timeout]);
  expect(e, `${trigger}: ${c.kind} still open after 10 s`).not.toBeNull();
  const ms = e!.at - since;
  figures.push({ trigger, kind: c.kind, ms });
  expect(ms, `${trigger}: ${c.kind} ended after ${ms} ms`).toBeLessThan(BOUND_MS);
  return e!;
}

/** Asserts that `c` is still open and still receiving, some time after a change that must not end it. */
async function staysOpen(c: Open, what: string): Promise<void> {
  const before = c.received();
  await until(
    async () => c.received(),
    (n) => n > before + 1,
    5_000,
    50,
  );
  expect(c.isOpen(), `${what} was ended`).toBe(true);
  expect(c.received(), `${what} stopped receiving`).toBeGreaterThan(before + 1);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

describe('revocation of open connections', () => {
  let agent: TestAgent;
  const X = uniqueName('revoke-x');
  const Y = uniqueName('revoke-y');
  let n = 0;

  const user = async (role: 'admin' | 'operator' | 'viewer', grants: Record<string, 'read' | 'write' | 'admin'> = {}) => {
    const username = `rev${++n}${role}`;
    const res = await agent.api('POST', '/users', { body: { username, email: `${username}@example.org`, password: PASS, role } });
    expect(res.status, res.text).toBe(201);
    const id = res.body.data.id as number;
    for (const [deployment_name, access_level] of Object.entries(grants)) {
      const grant = await agent.api('POST', `/users/${id}/deployments`, { body: { deployment_name, access_level } });
      expect(grant.status, grant.text).toBe(201);
    }
    return { id, token: await agent.login(username, PASS) };
  };
  const key = async (token: string, body: Record<string, unknown> = {}) => {
    const res = await agent.api('POST', '/apikeys', { token, body: { name: `k${++n}`, ...body } });
    expect(res.status, res.text).toBe(201);
    return { id: res.body.data.id as number, key: res.body.data.key as string };
  };
  const status = async (token: string) => (await agent.api('GET', '/auth/validate', { token })).status;

  beforeAll(async () => {
    // The edge plugin serves the system log streams; it renders into a scratch folder and never touches nginx.
    const edge = mkdtempSync(join(tmpdir(), 'revocation-edge-'));
    writeFileSync(join(edge, 'access.log'), '');
    agent = await startAgent({ plugins: ['docker', 'deployments', 'edge', APP_FIXTURE, FIXTURE], config: { proxy: scratchProxy(edge) } });
    const x = await agent.api('POST', '/deployments', { body: { name: X, compose_content: webCompose(), auto_start: true } });
    expect(x.status, x.text).toBe(201);
    const y = await agent.api('POST', '/deployments', { body: { name: Y, compose_content: webCompose(), auto_start: false } });
    expect(y.status, y.text).toBe(201);
    const app = await until(
      () => agent.api('GET', '/plugin/app-fixture/ping'),
      (r) => r.status === 200,
      20_000,
    );
    expect(app.status, app.text).toBe(200);
  });
  afterAll(async () => {
    if (figures.length) {
      const line = (label: string, xs: number[]) =>
        `${label.padEnd(26)} n=${String(xs.length).padStart(2)}  min ${Math.min(...xs)} ms  median ${median(xs)} ms  max ${Math.max(...xs)} ms`;
      const kinds = [...new Set(figures.map((f) => f.kind))];
      console.log(
        [
          'revocation → end of connection (client side):',
          ...kinds.map((k) =>
            line(
              k,
              figures.filter((f) => f.kind === k).map((f) => f.ms),
            ),
          ),
          line(
            'all',
            figures.map((f) => f.ms),
          ),
        ].join('\n'),
      );
      for (const f of figures) console.log(`  ${f.trigger.padEnd(16)} ${f.kind.padEnd(24)} ${f.ms} ms`);
    }
    await agent?.stop();
    await cleanupDocker();
  });

  it('key deleted: its log follow (4401), streamed answer, proxied stream and proxied websocket end; the app side too', async () => {
    const u = await user('operator', { [X]: 'write' });
    const k = await key(u.token, { deployments: [X] });
    const open = [
      await follow(agent, X, k.key),
      await stream(agent, `/fixture/deployments/${X}/stream`, k.key, 'streamed route answer'),
      await stream(agent, '/plugin/app-fixture/ticks', k.key, 'proxied stream'),
      await proxiedSocket(agent, k.key),
    ];
    const since = Date.now();
    expect((await agent.api('DELETE', `/apikeys/${k.id}`, { token: u.token })).status).toBe(200);
    const [f, s, p, w] = await Promise.all(open.map((c) => endedWithin(c, 'key deleted', since)));
    expect(f).toMatchObject({ code: 4401, reason: expect.stringMatching(/^TOKEN_REVOKED: /) });
    // Cut off mid-answer: the client sees an incomplete answer, not a clean end.
    expect(s).toMatchObject({ status: 200, complete: false });
    expect(p).toMatchObject({ status: 200, complete: false });
    expect(w.code).toBe(1006);
    // The app's side of the proxied stream and socket was ended with the client's.
    const inApp = await until(
      async () => (await agent.api('GET', '/plugin/app-fixture/open')).body.data,
      (d) => d.ticks === 0 && d.sockets === 0,
      5_000,
      50,
    );
    expect(inApp).toEqual({ ticks: 0, sockets: 0 });
    expect(await status(k.key)).toBe(401);
  });

  it('key revoked: the same, and the user itself keeps its own follow', async () => {
    const u = await user('operator', { [X]: 'read' });
    const k = await key(u.token, { deployments: [X] });
    const own = await follow(agent, X, u.token);
    const open = [await follow(agent, X, k.key), await stream(agent, '/plugin/app-fixture/ticks', k.key, 'proxied stream'), await proxiedSocket(agent, k.key)];
    const since = Date.now();
    expect((await agent.api('POST', `/apikeys/${k.id}/revoke`, { token: u.token })).status).toBe(200);
    const [f] = await Promise.all(open.map((c) => endedWithin(c, 'key revoked', since)));
    expect(f).toMatchObject({ code: 4401 });
    await staysOpen(own, "the user's own follow");
    expect(await status(k.key)).toBe(401);
  });

  it('user disabled: its token and its keys end (4401); its old token stays refused once it is enabled again', async () => {
    const u = await user('operator', { [X]: 'read' });
    const k = await key(u.token);
    const open = [
      await follow(agent, X, u.token),
      await follow(agent, X, k.key),
      await stream(agent, `/fixture/deployments/${X}/stream`, u.token, 'streamed route answer'),
      await stream(agent, '/plugin/app-fixture/ticks', u.token, 'proxied stream'),
    ];
    const since = Date.now();
    expect((await agent.api('PUT', `/users/${u.id}`, { body: { is_active: false } })).status).toBe(200);
    const [byToken, byKey] = await Promise.all(open.map((c) => endedWithin(c, 'user disabled', since)));
    expect(byToken.code).toBe(4401);
    expect(byKey.code).toBe(4401);
    expect(await status(u.token)).toBe(401);
    expect(await status(k.key)).toBe(401);
    expect((await agent.api('PUT', `/users/${u.id}`, { body: { is_active: true } })).status).toBe(200);
    // Signed out by the deactivation: the token issued before stays refused; the key is a credential of its own.
    expect(await status(u.token)).toBe(401);
    expect(await status(k.key)).toBe(200);
  });

  it('user deleted: its token and its keys end (4401)', async () => {
    const u = await user('operator', { [X]: 'read' });
    const k = await key(u.token, { deployments: [X] });
    const open = [await follow(agent, X, u.token), await follow(agent, X, k.key), await stream(agent, '/plugin/app-fixture/ticks', k.key, 'proxied stream')];
    const since = Date.now();
    expect((await agent.api('DELETE', `/users/${u.id}`)).status).toBe(200);
    const ended = await Promise.all(open.map((c) => endedWithin(c, 'user deleted', since)));
    expect(ended.slice(0, 2).map((e) => e.code)).toEqual([4401, 4401]);
  });

  it('user demoted: its sessions are signed out (4401); its key loses the deployment and global logs (4403) and the proxied stream ends', async () => {
    // An admin is global; demoted to operator it is limited to its grants (it has none).
    const u = await user('admin');
    const k = await key(u.token);
    const open = [
      await follow(agent, X, u.token),
      await follow(agent, X, k.key),
      await systemLogs(agent, u.token),
      await systemLogs(agent, k.key),
      await stream(agent, '/plugin/app-fixture/ticks', u.token, 'proxied stream'),
      await stream(agent, '/plugin/app-fixture/ticks', k.key, 'proxied stream'),
    ];
    const since = Date.now();
    expect((await agent.api('PUT', `/users/${u.id}`, { body: { role: 'operator' } })).status).toBe(200);
    const [byToken, byKey, logsByToken, logsByKey] = await Promise.all(open.map((c) => endedWithin(c, 'user demoted', since)));
    expect(byToken.code).toBe(4401);
    expect(byKey).toMatchObject({ code: 4403, reason: expect.stringMatching(/^ACCESS_REVOKED: access revoked: deployment/) });
    expect(logsByToken.code).toBe(4401);
    expect(logsByKey).toMatchObject({ code: 4403, reason: expect.stringMatching(/^ACCESS_REVOKED: access revoked: .* limited to its deployments/) });
    expect(await status(u.token)).toBe(401);
    const validated = await agent.api('GET', '/auth/validate', { token: k.key });
    expect(validated.status).toBe(200);
    expect(validated.body.data.principal).toMatchObject({ role: 'operator', scope: 'deployments', deployments: {} });
  });

  it('grant lowered, then removed: what still passes stays open, the rest ends (4403)', async () => {
    const u = await user('operator', { [X]: 'read', [Y]: 'write' });
    const logs = await follow(agent, X, u.token);
    const accessLog = await systemLogs(agent, u.token, X);
    const route = await stream(agent, `/fixture/deployments/${X}/stream`, u.token, 'streamed route answer');
    const proxied = await stream(agent, '/plugin/app-fixture/ticks', u.token, 'proxied stream');
    // Y lowered to read: the follow and the stream of X still pass; the app was given write on Y, so its stream ends.
    let since = Date.now();
    expect((await agent.api('PUT', `/users/${u.id}/deployments/${Y}`, { body: { access_level: 'read' } })).status).toBe(200);
    await endedWithin(proxied, 'grant lowered', since);
    await staysOpen(logs, 'the follow of X');
    await staysOpen(route, 'the streamed answer about X');
    expect(accessLog.isOpen()).toBe(true);
    // X removed: both end.
    since = Date.now();
    expect((await agent.api('DELETE', `/users/${u.id}/deployments/${X}`)).status).toBe(200);
    const [f, s, a] = await Promise.all([
      endedWithin(logs, 'grant removed', since),
      endedWithin(route, 'grant removed', since),
      endedWithin(accessLog, 'grant removed', since),
    ]);
    expect(f).toMatchObject({ code: 4403, reason: `ACCESS_REVOKED: access revoked: deployment '${X}' not found` });
    expect(a.code).toBe(4403);
    expect(s.complete).toBe(false);
    // The token itself is still good (grants are not the account): only what needed X was ended.
    expect(await status(u.token)).toBe(200);
  });

  it('password changed: every connection of the old token ends (4401), the keys stay, the new token works', async () => {
    const u = await user('operator', { [X]: 'read' });
    const k = await key(u.token, { deployments: [X] });
    const byKey = await follow(agent, X, k.key);
    const open = [await follow(agent, X, u.token), await stream(agent, '/plugin/app-fixture/ticks', u.token, 'proxied stream')];
    const since = Date.now();
    const changed = await agent.api('PUT', '/users/me/password', { token: u.token, body: { current_password: PASS, new_password: `${PASS}-2` } });
    expect(changed.status, changed.text).toBe(200);
    const [f] = await Promise.all(open.map((c) => endedWithin(c, 'password changed', since)));
    expect(f!.code).toBe(4401);
    await staysOpen(byKey, 'the follow of the key');
    expect(await status(u.token)).toBe(401);
    expect(await status(changed.body.data.token)).toBe(200);
  });
});
