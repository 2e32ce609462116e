import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, request, type TestAgent } from '../../test/helpers/agent.js';
import { FIXTURE, makeUser } from './helpers/fixture.js';

describe('request pipeline', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({ plugins: [FIXTURE], config: { api: { body_limit: '2kb' } } });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('rejects invalid JSON with 400 INVALID_JSON', async () => {
    const res = await agent.api('PUT', '/fixture/deployments/d1/widget', { raw: '{"color":', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('INVALID_JSON');
  });

  it('names the field on schema violations', async () => {
    const bad = await agent.api('PUT', '/fixture/deployments/d1/widget', { body: { color: 'green' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'VALIDATION_FAILED', error: expect.stringContaining('body.color') });
    const unknown = await agent.api('PUT', '/fixture/deployments/d1/widget', { body: { color: 'red', colour: 'red' } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toContain("unknown field 'colour'");
    const missing = await agent.api('PUT', '/fixture/deployments/d1/widget', { body: {} });
    expect(missing.body.error).toContain('body.color');
  });

  it('coerces and validates query parameters, rejecting unknown ones', async () => {
    const ok = await agent.api('GET', '/fixture/widgets', { query: { limit: '3', flag: 'true' } });
    expect(ok.status).toBe(200);
    expect(ok.body.data.query).toEqual({ limit: 3, flag: true });
    const tooBig = await agent.api('GET', '/fixture/widgets', { query: { limit: 50 } });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.error).toContain('query.limit');
    const unknown = await agent.api('GET', '/fixture/widgets', { query: { nope: 1 } });
    expect(unknown.status).toBe(400);
  });

  it('answers 413 for bodies over the limit and 400 for non-JSON bodies', async () => {
    const big = await agent.api('PUT', '/fixture/deployments/d1/widget', {
      raw: JSON.stringify({ color: 'red', pad: 'x'.repeat(5000) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(big.status).toBe(413);
    expect(big.body.code).toBe('PAYLOAD_TOO_LARGE');
    const text = await agent.api('PUT', '/fixture/deployments/d1/widget', { raw: 'color=red', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(400);
    expect(text.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  it('hides internal errors behind a 500 without details', async () => {
    const res = await agent.api('GET', '/fixture/boom');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'internal error', code: 'INTERNAL_ERROR' });
    expect(res.text).not.toContain('secret internal detail');
    expect(res.text).not.toContain('at ');
  });

  it('checks responses against their schema in test mode', async () => {
    const res = await agent.api('GET', '/fixture/bad-response');
    expect(res.status).toBe(500);
    expect(res.body.code).toBe('RESPONSE_INVALID');
  });

  it('streams downloads with their content type', async () => {
    const res = await agent.api('GET', '/fixture/download');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(res.headers.get('content-disposition')).toContain('x.txt');
    expect(res.text).toBe('hello file\n');
  });

  it('enforces permissions (403) and deployment access (404/403)', async () => {
    const viewer = await makeUser(agent, 'viewer');
    expect((await agent.api('GET', '/fixture/widgets', { token: viewer.token })).status).toBe(200);
    const denied = await agent.api('POST', '/fixture/jobs/count', { token: viewer.token });
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe('FORBIDDEN');
    // admin-only resource: operator has none
    const operator = await makeUser(agent, 'operator', { grants: { mine: 'write', peek: 'read' } });
    expect((await agent.api('GET', '/fixture/audit', { token: operator.token })).status).toBe(403);
    // deployment-scoped: write on own, read-only on peek, nothing elsewhere
    expect((await agent.api('PUT', '/fixture/deployments/mine/widget', { token: operator.token, body: { color: 'red' } })).status).toBe(200);
    const readOnly = await agent.api('PUT', '/fixture/deployments/peek/widget', { token: operator.token, body: { color: 'red' } });
    expect(readOnly.status).toBe(403);
    const hidden = await agent.api('PUT', '/fixture/deployments/other/widget', { token: operator.token, body: { color: 'red' } });
    expect(hidden.status).toBe(404);
    // An invalid query or body does not tell a hidden deployment from a missing one.
    const probing = await agent.api('PUT', '/fixture/deployments/other/widget', { token: operator.token, query: { bogus: 1 }, body: { nope: 1 } });
    expect(probing.body).toEqual({ error: "deployment 'other' not found", code: 'NOT_FOUND' });
    // list filtering by deployment access
    await agent.api('PUT', '/fixture/deployments/other/widget', { body: { color: 'blue' } });
    const seen = await agent.api('GET', '/fixture/widgets', { token: operator.token });
    expect(seen.body.data.items.map((w: { deployment: string }) => w.deployment)).toEqual(['mine']);
  });

  it('keeps principals limited to deployments away from global state, whatever their role or key says', async () => {
    const scoped = await makeUser(agent, 'operator', { grants: { tenant: 'admin' } });
    const global = await makeUser(agent, 'operator', { scope: 'global' });
    // widgets:write is held by both; running the job is global state.
    const refused = await agent.api('POST', '/fixture/jobs/count', { token: scoped.token });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('GLOBAL_SCOPE_REQUIRED');
    expect((await agent.api('POST', '/fixture/jobs/count', { token: global.token })).status).toBe(200);
    // Its own deployment and filtered lists stay open; another deployment is not there.
    expect((await agent.api('PUT', '/fixture/deployments/tenant/widget', { token: scoped.token, body: { color: 'red' } })).status).toBe(200);
    expect((await agent.api('PUT', '/fixture/deployments/other/widget', { token: scoped.token, body: { color: 'red' } })).status).toBe(404);
    expect((await agent.api('GET', '/fixture/widgets', { token: scoped.token })).status).toBe(200);
    expect((await agent.api('PUT', '/fixture/deployments/other/widget', { token: global.token, body: { color: 'red' } })).status).toBe(200);
    // A plan of a global operation is refused the same way.
    expect((await agent.api('POST', '/fixture/jobs/count', { token: scoped.token, query: { plan: true } })).body.code).toBe('GLOBAL_SCOPE_REQUIRED');
    // An admin's key limited to a deployment is no admin: scoped, operator at most.
    const key = (await agent.api('POST', '/fixture/keys', { body: { role: 'admin', deployments: ['tenant'] } })).body.data.key as string;
    const validated = (await request(agent.url, 'GET', '/auth/validate', { token: key })).body.data;
    expect(validated.principal).toMatchObject({ role: 'operator', scope: 'deployments', deployments: { tenant: 'write' } });
    expect(validated.tenancy).toMatchObject({ scope: 'deployments', global_writes: false });
    expect((await request(agent.url, 'GET', '/fixture/audit', { token: key })).status).toBe(403);
    expect((await request(agent.url, 'POST', '/fixture/jobs/count', { token: key })).body.code).toBe('GLOBAL_SCOPE_REQUIRED');
    const admin = (await agent.api('GET', '/auth/validate')).body.data;
    expect(admin.tenancy).toMatchObject({ scope: 'global', global_writes: true, deployments: { '*': 'admin' } });
  });

  it('records an audit event for every mutating request', async () => {
    await agent.api('PUT', '/fixture/deployments/audited/widget', { body: { color: 'blue', token: 'super-secret-value' } });
    await agent.api('PUT', '/fixture/deployments/audited/widget', { body: { color: 'nope' } });
    const rows = (await agent.api('GET', '/fixture/audit')).body.data as Record<string, unknown>[];
    const mine = rows.filter((r) => r.resource_id === 'audited');
    expect(mine).toHaveLength(2);
    expect(mine[0]).toMatchObject({
      actor_type: 'user',
      actor_id: 'user:1',
      action: 'fixture.putWidget',
      resource_type: 'fixture',
      success: 1,
      status: 200,
      client_ip: expect.stringContaining('127.0.0.1'),
      deployment: 'audited',
    });
    expect(mine[1]).toMatchObject({ success: 0, status: 400 });
    expect(JSON.stringify(rows)).not.toContain('super-secret-value');
    // reads are not audited
    expect(rows.some((r) => String(r.action).startsWith('fixture.widgets'))).toBe(false);
  });

  it('serves websockets with the token as first message', async () => {
    const { WebSocket } = await import('ws');
    const open = (path: string, headers: Record<string, string> = {}) => new WebSocket(agent.url.replace('http', 'ws') + path, { headers });
    const messages: unknown[] = [];
    // trust_proxy is off: a forged X-Forwarded-For is not the client's address.
    const ws = open('/api/fixture/deployments/d9/echo', { 'x-forwarded-for': '203.0.113.9' });
    const closed = new Promise<{ code: number; reason: string }>((done) => ws.on('close', (code, reason) => done({ code, reason: reason.toString() })));
    ws.on('open', () => ws.send(agent.token));
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString());
      messages.push(m);
      if (m.hello) ws.send('ping');
      if (m.echo) ws.send('bye');
    });
    expect(await closed).toEqual({ code: 1000, reason: 'bye' });
    expect(messages).toEqual([{ type: 'ready' }, { hello: 'admin', deployment: 'd9', ip: '127.0.0.1' }, { echo: 'ping' }]);

    const bad = open('/api/fixture/deployments/d9/echo');
    const badClose = new Promise<number>((done) => bad.on('close', (code) => done(code)));
    bad.on('open', () => bad.send('not-a-token'));
    expect(await badClose).toBe(1008);

    const viewer = await makeUser(agent, 'viewer', { grants: { d1: 'read' } });
    const hidden = open('/api/fixture/deployments/d9/echo');
    const hiddenClose = new Promise<{ code: number; reason: string }>((done) =>
      hidden.on('close', (code, reason) => done({ code, reason: reason.toString() })),
    );
    hidden.on('open', () => hidden.send(viewer.token));
    expect(await hiddenClose).toMatchObject({ code: 1008, reason: expect.stringContaining('NOT_FOUND') });

    // A query the socket refuses does not tell a deployment it may not see from one that does not exist: the
    // deployment is checked first, as on HTTP routes.
    const probing = open('/api/fixture/deployments/d9/echo?bogus=1');
    const probingClose = new Promise<{ code: number; reason: string }>((done) =>
      probing.on('close', (code, reason) => done({ code, reason: reason.toString() })),
    );
    probing.on('open', () => probing.send(viewer.token));
    expect(await probingClose).toMatchObject({ code: 1008, reason: expect.stringContaining('NOT_FOUND') });
    const own = open('/api/fixture/deployments/d1/echo?bogus=1');
    const ownClose = new Promise<{ code: number; reason: string }>((done) => own.on('close', (code, reason) => done({ code, reason: reason.toString() })));
    own.on('open', () => own.send(viewer.token));
    expect(await ownClose).toMatchObject({ code: 1008, reason: expect.stringContaining('VALIDATION_FAILED') });
  });

  it('runs jobs on demand and records executions', async () => {
    const res = await agent.api('POST', '/fixture/jobs/count');
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ job: 'count', plugin: 'fixture', status: 'succeeded', trigger: 'manual', output: 'counted\n' });
  });

  it('applies config sections with defaults and exposes settings', async () => {
    expect((await agent.api('GET', '/fixture/config')).body.data).toEqual({ fixture: { label: 'fx', level: 1 } });
    expect((await agent.api('GET', '/fixture/settings')).body.data).toEqual({ threshold: 5, api_secret: '' });
  });

  it('does not need auth for public routes but does for everything else', async () => {
    expect((await request(agent.url, 'GET', '/fixture/widgets')).status).toBe(401);
    expect((await request(agent.url, 'GET', '/fixture/widgets', { token: 'garbage' })).status).toBe(401);
    expect((await request(agent.url, 'GET', '/fixture/widgets', { headers: { authorization: 'Basic abc' } })).body.code).toBe('UNAUTHORIZED');
  });
});

describe('behind a trusted proxy', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({ plugins: [FIXTURE], config: { api: { trust_proxy: true } } });
  }, 60_000);
  afterAll(() => agent?.stop());

  it('takes the client address from X-Forwarded-For on websockets, as on HTTP', async () => {
    const { WebSocket } = await import('ws');
    const ws = new WebSocket(agent.url.replace('http', 'ws') + '/api/fixture/deployments/d9/echo', {
      headers: { 'x-forwarded-for': '203.0.113.9, 10.0.0.2' },
    });
    ws.on('open', () => ws.send(agent.token));
    const hello = await new Promise<Record<string, unknown>>((done) =>
      ws.on('message', (data) => {
        const m = JSON.parse(data.toString()) as Record<string, unknown>;
        if (m.hello) done(m);
      }),
    );
    ws.close();
    expect(hello).toEqual({ hello: 'admin', deployment: 'd9', ip: '203.0.113.9' });

    await agent.api('PUT', '/fixture/deployments/proxied/widget', { body: { color: 'blue' }, headers: { 'x-forwarded-for': '203.0.113.9, 10.0.0.2' } });
    const rows = (await agent.api('GET', '/fixture/audit')).body.data as Record<string, unknown>[];
    expect(rows.find((r) => r.resource_id === 'proxied')).toMatchObject({ client_ip: '203.0.113.9' });
  });
});
