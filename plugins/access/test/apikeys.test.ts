import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const PASS = 'Str0ng-Pass-word!';
const until = async (check: () => Promise<boolean>, ms = 5000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('condition not met in time');
};

describe('API keys', () => {
  let agent: TestAgent;
  let opId: number;
  let opToken: string;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['access'] });
    const op = await agent.api('POST', '/users', { body: { username: 'ops', email: 'ops@example.com', password: PASS, role: 'operator' } });
    opId = op.body.data.id;
    await agent.api('POST', `/users/${opId}/deployments`, { body: { deployment_name: 'web', access_level: 'write' } });
    await agent.api('POST', `/users/${opId}/deployments`, { body: { deployment_name: 'api', access_level: 'read' } });
    opToken = await agent.login('ops', PASS);
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('creates a key whose secret is shown once, and uses it', async () => {
    const created = await agent.api('POST', '/api/apikeys', { body: { name: 'ci', description: 'pipeline', role: 'viewer' } });
    expect(created.status).toBe(201);
    const { id, key, name, created_at, key_prefix } = created.body.data;
    expect(key).toMatch(/^agk_[A-Za-z0-9_-]{40,}$/);
    expect(key.startsWith(key_prefix)).toBe(true);
    expect({ name, created_at: typeof created_at }).toEqual({ name: 'ci', created_at: 'string' });
    const details = await agent.api('GET', `/api/apikeys/${id}`);
    expect(details.body.data).toMatchObject({ id, name: 'ci', status: 'active', role: 'viewer', username: 'admin' });
    expect(details.text).not.toContain(key);
    expect((await agent.api('GET', '/api/apikeys')).text).not.toContain(key);

    // As a bearer token and through the login exchange.
    const me = await agent.api('GET', '/users/me', { token: key });
    expect(me.body.data).toMatchObject({ username: 'admin', principal_type: 'api_key' });
    // A viewer key of an admin is a viewer: no writes.
    expect((await agent.api('POST', '/users', { token: key, body: {} })).status).toBe(403);
    const login = await request(agent.url, 'POST', '/auth/login', { body: { api_key: key } });
    expect(login.status).toBe(200);
    await until(async () => (await agent.api('GET', `/api/apikeys/${id}`)).body.data.last_used_at !== null);
    expect((await agent.api('GET', `/api/apikeys/${id}`)).body.data.last_used_ip).toBe('127.0.0.1');
  });

  it('revokes (kept, 401) and deletes keys', async () => {
    const { id, key } = (await agent.api('POST', '/api/apikeys', { body: { name: 'temp', role: 'operator' } })).body.data;
    const exchanged = (await request(agent.url, 'POST', '/auth/login', { body: { api_key: key } })).body.data.token as string;
    expect((await agent.api('GET', '/users/me', { token: key })).status).toBe(200);
    const revoked = await agent.api('POST', `/api/apikeys/${id}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.data).toMatchObject({ active: false, status: 'revoked', revoked_at: expect.any(String) });
    expect((await agent.api('GET', '/users/me', { token: key })).status).toBe(401);
    expect((await agent.api('GET', '/users/me', { token: exchanged })).status).toBe(401);
    expect((await request(agent.url, 'POST', '/auth/login', { body: { api_key: key } })).status).toBe(401);
    expect((await agent.api('GET', `/api/apikeys/${id}`)).body.data.status).toBe('revoked');
    expect((await agent.api('DELETE', `/api/apikeys/${id}`)).status).toBe(200);
    expect((await agent.api('GET', `/api/apikeys/${id}`)).status).toBe(404);
    expect((await agent.api('DELETE', `/api/apikeys/${id}`)).status).toBe(404);
    expect((await agent.api('POST', '/api/apikeys/99999/revoke')).status).toBe(404);
  });

  it('expires keys after expires_in', async () => {
    const { id, key, expires_at } = (await agent.api('POST', '/api/apikeys', { body: { name: 'short', expires_in: 1 } })).body.data;
    expect(Date.parse(expires_at) - Date.now()).toBeLessThanOrEqual(1000);
    await until(async () => (await agent.api('GET', '/users/me', { token: key })).status === 401);
    expect((await agent.api('GET', `/api/apikeys/${id}`)).body.data.status).toBe('expired');
  });

  it('validates the body', async () => {
    expect((await agent.api('POST', '/api/apikeys', { body: {} })).status).toBe(400);
    expect((await agent.api('POST', '/api/apikeys', { body: { name: 'x', role: 'root' } })).status).toBe(400);
    expect((await agent.api('POST', '/api/apikeys', { body: { name: 'x', expires_in: 0 } })).status).toBe(400);
    expect((await agent.api('POST', '/api/apikeys', { body: { name: 'x', deployments: ['../x'] } })).status).toBe(400);
    expect((await agent.api('POST', '/api/apikeys', { body: { name: 'x', permissions: ['nosuch:read'] } })).body.code).toBe('INVALID_PERMISSION');
    expect((await agent.api('POST', '/api/apikeys', { body: { name: 'x', secret: 'y' } })).status).toBe(400);
  });

  it('never lets a non-admin grant more than it holds', async () => {
    const adminRole = await agent.api('POST', '/api/apikeys', { token: opToken, body: { name: 'x', role: 'admin' } });
    expect(adminRole.status).toBe(403);
    expect(adminRole.body.code).toBe('GRANT_EXCEEDS_OWN');
    expect((await agent.api('POST', '/api/apikeys', { token: opToken, body: { name: 'x', permissions: ['users:read'] } })).status).toBe(403);
    expect((await agent.api('POST', '/api/apikeys', { token: opToken, body: { name: 'x', deployments: ['elsewhere'] } })).status).toBe(403);
    const ok = await agent.api('POST', '/api/apikeys', { token: opToken, body: { name: 'deploy-web', role: 'operator', deployments: ['web'] } });
    expect(ok.status).toBe(201);
    expect(ok.body.data).toMatchObject({ user_id: opId, username: 'ops', deployments: ['web'] });
  });

  it("gives a key the lower of its own and its owner's rights", async () => {
    const { key } = (await agent.api('POST', '/api/apikeys', { token: opToken, body: { name: 'all', role: 'operator' } })).body.data;
    const me = (await agent.api('GET', '/users/me', { token: key })).body.data;
    // The owner only reads `api`, so the key does too, whatever its role.
    expect(me.deployments).toEqual(
      expect.arrayContaining([
        { deployment: 'web', access_level: 'write' },
        { deployment: 'api', access_level: 'read' },
      ]),
    );
    const viewerKey = (await agent.api('POST', '/api/apikeys', { token: opToken, body: { name: 'ro', role: 'viewer' } })).body.data.key;
    const ro = (await agent.api('GET', '/users/me', { token: viewerKey })).body.data;
    expect(ro.deployments).toEqual(expect.arrayContaining([{ deployment: 'web', access_level: 'read' }]));
    expect(ro.effective_permissions).not.toContain('apikeys:write');
    expect((await agent.api('POST', '/api/apikeys', { token: viewerKey, body: { name: 'more' } })).status).toBe(403);
  });

  it('keeps a key minted by a key inside its parent', async () => {
    const parent = (
      await agent.api('POST', '/api/apikeys', { token: opToken, body: { name: 'parent', role: 'operator', deployments: ['web'], expires_in: 3600 } })
    ).body.data;
    const child = await agent.api('POST', '/api/apikeys', { token: parent.key, body: { name: 'child', expires_in: 86400 } });
    expect(child.status).toBe(201);
    expect(child.body.data.deployments).toEqual(['web']);
    expect(Date.parse(child.body.data.expires_at)).toBeLessThanOrEqual(Date.parse(parent.expires_at));
    expect((await agent.api('POST', '/api/apikeys', { token: parent.key, body: { name: 'wider', deployments: ['api'] } })).status).toBe(403);
  });

  it('lists own keys for users and every key for admins', async () => {
    const own = (await agent.api('GET', '/api/apikeys', { token: opToken })).body.data as { user_id: number; id: number }[];
    expect(own.length).toBeGreaterThan(0);
    expect(own.every((k) => k.user_id === opId)).toBe(true);
    const all = (await agent.api('GET', '/api/apikeys')).body.data as { user_id: number }[];
    expect(all.some((k) => k.user_id !== opId)).toBe(true);
    expect((await agent.api('GET', '/api/apikeys', { query: { user_id: opId } })).body.data.every((k: { user_id: number }) => k.user_id === opId)).toBe(true);
    const adminKey = all.find((k) => k.user_id !== opId) as unknown as { id: number };
    // Someone else's key is invisible to a non-admin: 404, not 403.
    expect((await agent.api('GET', `/api/apikeys/${adminKey.id}`, { token: opToken })).status).toBe(404);
    expect((await agent.api('POST', `/api/apikeys/${adminKey.id}/revoke`, { token: opToken })).status).toBe(404);
    expect((await agent.api('DELETE', `/api/apikeys/${adminKey.id}`, { token: opToken })).status).toBe(404);
  });
});
