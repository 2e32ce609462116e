import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startAgent, request, type TestAgent } from '../../../test/helpers/agent.js';
import { FIXTURE, makeUser } from '../../../core/test/helpers/fixture.js';

/** A login whose connection comes from another loopback address. */
function loginFrom(agent: TestAgent, localAddress: string, username: string, password: string): Promise<number> {
  const body = JSON.stringify({ username, password });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      new URL('/api/auth/login', agent.url),
      { method: 'POST', localAddress, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('authentication', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({
      plugins: [FIXTURE],
      config: { auth: { login_max_failures: 3, login_max_failures_per_ip: 1000, lockout: '60s' } },
    });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('logs in with a password and validates the token', async () => {
    const res = await request(agent.url, 'POST', '/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ token: expect.any(String), expires_at: expect.any(String), user: { username: 'admin', role: 'admin' } });
    const v = await request(agent.url, 'GET', '/auth/validate', { token: res.body.data.token });
    expect(v.status).toBe(200);
    expect(v.body.data).toMatchObject({ valid: true, principal: { type: 'user', name: 'admin', role: 'admin' } });
  });

  it('refuses wrong credentials with 401 and locks out after repeated failures (429)', async () => {
    const user = await makeUser(agent, 'viewer');
    for (let i = 0; i < 3; i++) {
      const res = await request(agent.url, 'POST', '/auth/login', { body: { username: user.username, password: 'wrong-password' } });
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('INVALID_CREDENTIALS');
    }
    const locked = await request(agent.url, 'POST', '/auth/login', { body: { username: user.username, password: user.password } });
    expect(locked.status).toBe(429);
    expect(locked.body.code).toBe('TOO_MANY_ATTEMPTS');
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    // other users are unaffected
    expect((await request(agent.url, 'POST', '/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } })).status).toBe(200);
  });

  it('counts concurrent guesses before the password check, per account and address', async () => {
    const user = await makeUser(agent, 'viewer');
    // Ten guesses at once: with a budget of 3, only 3 reach the password check; the rest wait for the lockout.
    const statuses = await Promise.all(
      Array.from({ length: 10 }, () =>
        request(agent.url, 'POST', '/auth/login', { body: { username: user.username, password: 'wrong-password' } }).then((r) => r.status),
      ),
    );
    expect(statuses.filter((s) => s === 401)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
    // A forged X-Forwarded-For (trust_proxy is off) is not another address.
    const forged = await request(agent.url, 'POST', '/auth/login', {
      body: { username: user.username, password: user.password },
      headers: { 'x-forwarded-for': '203.0.113.9' },
    });
    expect(forged.status).toBe(429);
    // Failures from one address do not lock the account out everywhere: another client address still logs in.
    expect(await loginFrom(agent, '127.0.0.2', user.username, user.password)).toBe(200);
  });

  it('rejects ambiguous or incomplete login bodies', async () => {
    expect((await request(agent.url, 'POST', '/auth/login', { body: {} })).status).toBe(400);
    expect((await request(agent.url, 'POST', '/auth/login', { body: { username: 'admin' } })).body.error).toContain('password');
    expect((await request(agent.url, 'POST', '/auth/login', { body: { username: 'admin', password: 'x', api_key: 'agk_x' } })).status).toBe(400);
  });

  it('authenticates API keys as bearer and through login; revoked keys get 401', async () => {
    const created = await agent.api('POST', '/fixture/keys', { body: { role: 'viewer' } });
    expect(created.status).toBe(201);
    const key = created.body.data.key as string;
    expect(key).toMatch(/^agk_[A-Za-z0-9_-]{43}$/);
    const asBearer = await request(agent.url, 'GET', '/auth/validate', { token: key });
    expect(asBearer.body.data.principal).toMatchObject({ type: 'api_key', role: 'viewer' });
    const login = await request(agent.url, 'POST', '/auth/login', { body: { api_key: key } });
    expect(login.status).toBe(200);
    const viaToken = login.body.data.token as string;
    // a viewer key cannot write, even though its owner (admin) can
    expect((await request(agent.url, 'POST', '/fixture/jobs/count', { token: key })).status).toBe(403);
    await agent.api('POST', `/fixture/keys/${created.body.data.id}/revoke`);
    expect((await request(agent.url, 'GET', '/auth/validate', { token: key })).status).toBe(401);
    expect((await request(agent.url, 'GET', '/auth/validate', { token: viaToken })).status).toBe(401);
    expect((await request(agent.url, 'POST', '/auth/login', { body: { api_key: key } })).status).toBe(401);
  });

  it('caps a key at its owner: the lower of both rights applies', async () => {
    const operator = await makeUser(agent, 'operator', { grants: { alpha: 'write', beta: 'read' } });
    const created = await agent.api('POST', '/fixture/keys', { token: operator.token, body: { role: 'admin', deployments: ['alpha', 'gamma'] } });
    const key = created.body.data.key as string;
    const info = (await request(agent.url, 'GET', '/auth/validate', { token: key })).body.data.principal;
    expect(info.role).toBe('operator');
    expect(info.deployments).toEqual({ alpha: 'write' });
    expect(info.permissions).not.toContain('secrets:read');
    expect((await request(agent.url, 'PUT', '/fixture/deployments/beta/widget', { token: key, body: { color: 'red' } })).status).toBe(404);
    expect((await request(agent.url, 'PUT', '/fixture/deployments/alpha/widget', { token: key, body: { color: 'red' } })).status).toBe(200);
  });

  it('expires keys after expires_in', async () => {
    const created = await agent.api('POST', '/fixture/keys', { body: { role: 'viewer', expires_in: 1 } });
    const key = created.body.data.key as string;
    expect((await request(agent.url, 'GET', '/auth/validate', { token: key })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1200));
    expect((await request(agent.url, 'GET', '/auth/validate', { token: key })).status).toBe(401);
  });

  it('invalidates tokens of deactivated users and after a password change', async () => {
    const a = await makeUser(agent, 'viewer');
    await agent.api('POST', `/fixture/users/${a.id}/deactivate`);
    expect((await request(agent.url, 'GET', '/auth/validate', { token: a.token })).status).toBe(401);
    expect((await request(agent.url, 'POST', '/auth/login', { body: { username: a.username, password: a.password } })).status).toBe(401);

    const b = await makeUser(agent, 'viewer');
    await agent.api('POST', `/fixture/users/${b.id}/password`, { body: { password: 'An0ther-Passw0rd!' } });
    expect((await request(agent.url, 'GET', '/auth/validate', { token: b.token })).status).toBe(401);
    expect((await request(agent.url, 'POST', '/auth/login', { body: { username: b.username, password: 'An0ther-Passw0rd!' } })).status).toBe(200);
  });

  it('signs a user out when rights are taken away (lower role, narrower scope, permission withdrawn, deactivation), not when added', async () => {
    const u = await makeUser(agent, 'operator', { scope: 'global' });
    let token = u.token;
    const valid = async () => (await request(agent.url, 'GET', '/auth/validate', { token })).status;
    const update = async (body: Record<string, unknown>) => {
      const res = await agent.api('PUT', `/users/${u.id}`, { body });
      expect(res.status, res.text).toBe(200);
    };
    const relogin = async () => (token = await agent.login(u.username, u.password));

    await update({ email: 'elsewhere@example.com' });
    await update({ permissions: ['users:read'] });
    await update({ role: 'operator' });
    expect(await valid()).toBe(200);
    await update({ permissions: [] });
    expect(await valid()).toBe(401);
    await relogin();
    await update({ scope: 'deployments' });
    expect(await valid()).toBe(401);
    await relogin();
    await update({ role: 'viewer' });
    expect(await valid()).toBe(401);
    await relogin();
    // A promotion takes nothing away: the session goes on, with the new rights.
    await update({ role: 'operator', scope: 'global' });
    expect(await valid()).toBe(200);
    expect((await request(agent.url, 'GET', '/auth/validate', { token })).body.data.principal).toMatchObject({ role: 'operator', scope: 'global' });
    // Deactivated, then active again: the token issued before stays refused.
    await update({ is_active: false });
    expect(await valid()).toBe(401);
    await update({ is_active: true });
    expect(await valid()).toBe(401);
    await relogin();
    expect(await valid()).toBe(200);
  });

  it('audits logins, successful and failed, without the password', async () => {
    await request(agent.url, 'POST', '/auth/login', { body: { username: 'admin', password: 'definitely-wrong' } });
    const rows = (await agent.api('GET', '/fixture/audit')).body.data as Record<string, unknown>[];
    const logins = rows.filter((r) => r.action === 'auth.login');
    expect(logins.some((r) => r.success === 1 && r.actor_id === 'user:1')).toBe(true);
    expect(logins.some((r) => r.success === 0 && r.actor_name === 'admin')).toBe(true);
    expect(JSON.stringify(rows)).not.toContain('definitely-wrong');
  });
});

describe('token lifetime', () => {
  it('rejects expired tokens', async () => {
    const agent = await startAgent({ config: { auth: { token_ttl: '3s' } } });
    try {
      const token = await agent.login('admin', ADMIN_PASSWORD);
      const issued = Date.now();
      expect((await request(agent.url, 'GET', '/auth/validate', { token })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 4100 - (Date.now() - issued)));
      const res = await request(agent.url, 'GET', '/auth/validate', { token });
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('INVALID_TOKEN');
    } finally {
      await agent.stop();
    }
  });
});
