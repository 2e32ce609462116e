import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, request, startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const PASS = 'Str0ng-Pass-word!';

describe('users and per-deployment access', () => {
  let agent: TestAgent;
  const createUser = async (username: string, role: string, extra: Record<string, unknown> = {}) => {
    const res = await agent.api('POST', '/users', { body: { username, email: `${username}@example.com`, password: PASS, role, ...extra } });
    expect(res.status, res.text).toBe(201);
    return res.body.data as { id: number; username: string };
  };

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['access'] });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('shows and updates the current user', async () => {
    const me = await agent.api('GET', '/users/me');
    expect(me.status).toBe(200);
    expect(me.body.data).toMatchObject({ username: 'admin', role: 'admin', principal_type: 'user', effective_permissions: ['*:write'] });
    expect(me.body.data).not.toHaveProperty('password_hash');
    const upd = await agent.api('PUT', '/users/me', { body: { email: 'root@example.org' } });
    expect(upd.status).toBe(200);
    expect(upd.body.data.email).toBe('root@example.org');
    expect((await agent.api('PUT', '/users/me', { body: { email: 'not-an-address' } })).body.code).toBe('INVALID_EMAIL');
    const unknown = await agent.api('PUT', '/users/me', { body: { email: 'a@example.org', role: 'viewer' } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatch(/unknown field 'role'/);
  });

  it('creates users with validation and refuses duplicates and weak passwords', async () => {
    const weak = await agent.api('POST', '/users', { body: { username: 'weakling', email: 'w@example.com', password: 'short', role: 'viewer' } });
    expect(weak.status).toBe(400);
    expect(weak.body.code).toBe('WEAK_PASSWORD');
    const badName = await agent.api('POST', '/users', { body: { username: '../x', email: 'w@example.com', password: PASS, role: 'viewer' } });
    expect(badName.status).toBe(400);
    const badRole = await agent.api('POST', '/users', { body: { username: 'roley', email: 'w@example.com', password: PASS, role: 'root' } });
    expect(badRole.status).toBe(400);
    const badPerm = await agent.api('POST', '/users', {
      body: { username: 'permy', email: 'w@example.com', password: PASS, role: 'viewer', permissions: ['nosuch:read'] },
    });
    expect(badPerm.body.code).toBe('INVALID_PERMISSION');
    const created = await createUser('alice', 'operator');
    expect(created).toMatchObject({ username: 'alice', is_active: true });
    expect(created).not.toHaveProperty('password');
    const dup = await agent.api('POST', '/users', { body: { username: 'Alice', email: 'a@example.com', password: PASS, role: 'viewer' } });
    expect(dup.status).toBe(409);
    const list = await agent.api('GET', '/users');
    expect(list.body.data.map((u: { username: string }) => u.username)).toEqual(expect.arrayContaining(['admin', 'alice']));
    expect((await agent.api('GET', '/users', { query: { role: 'operator' } })).body.data).toHaveLength(1);
    expect((await agent.api('GET', `/users/${created.id}`)).body.data.username).toBe('alice');
    expect((await agent.api('GET', '/users/9999')).status).toBe(404);
    expect((await agent.api('GET', '/users/abc')).status).toBe(400);
  });

  it('keeps the user list admin-only', async () => {
    await createUser('olga', 'operator');
    const token = await agent.login('olga', PASS);
    expect((await agent.api('GET', '/users', { token })).status).toBe(403);
    expect((await agent.api('POST', '/users', { token, body: {} })).status).toBe(403);
    expect((await agent.api('GET', '/users/me', { token })).body.data.username).toBe('olga');
    expect((await request(agent.url, 'GET', '/users/me')).status).toBe(401);
  });

  it('changes the own password and signs out the other sessions', async () => {
    await createUser('bob', 'viewer');
    const first = await agent.login('bob', PASS);
    const second = await agent.login('bob', PASS);
    const wrong = await agent.api('PUT', '/users/me/password', {
      token: first,
      body: { current_password: 'nope-nope-nope', new_password: 'An0ther-Strong-One' },
    });
    expect(wrong.status).toBe(400);
    expect(wrong.body.code).toBe('WRONG_PASSWORD');
    const weak = await agent.api('PUT', '/users/me/password', { token: first, body: { current_password: PASS, new_password: 'abc' } });
    expect(weak.body.code).toBe('WEAK_PASSWORD');
    const containsName = await agent.api('PUT', '/users/me/password', { token: first, body: { current_password: PASS, new_password: 'bob-Bob-bob-1234!' } });
    expect(containsName.body.code).toBe('WEAK_PASSWORD');
    const ok = await agent.api('PUT', '/users/me/password', { token: first, body: { current_password: PASS, new_password: 'An0ther-Strong-One' } });
    expect(ok.status).toBe(200);
    const fresh = ok.body.data.token as string;
    expect((await agent.api('GET', '/users/me', { token: fresh })).status).toBe(200);
    expect((await agent.api('GET', '/users/me', { token: first })).status).toBe(401);
    expect((await agent.api('GET', '/users/me', { token: second })).status).toBe(401);
    await agent.login('bob', 'An0ther-Strong-One');
    // The new password never shows up in the audit journal.
    const events = await agent.api('GET', '/api/audit/events', { query: { action: 'users.changePassword' } });
    expect(events.body.data.length).toBeGreaterThan(0);
    expect(JSON.stringify(events.body)).not.toContain('An0ther-Strong-One');
  });

  it('updates users: role, permissions, deactivation, password reset', async () => {
    const carl = await createUser('carl', 'viewer');
    const token = await agent.login('carl', PASS);
    expect((await agent.api('GET', '/users/me', { token })).body.data.scope).toBe('deployments');
    const upd = await agent.api('PUT', `/users/${carl.id}`, { body: { role: 'operator', permissions: ['users:read'], scope: 'global' } });
    expect(upd.status).toBe(200);
    expect(upd.body.data).toMatchObject({ role: 'operator', permissions: ['users:read'], scope: 'global' });
    // The new rights apply to the existing session at once.
    expect((await agent.api('GET', '/users', { token })).status).toBe(200);
    const off = await agent.api('PUT', `/users/${carl.id}`, { body: { is_active: false } });
    expect(off.body.data.is_active).toBe(false);
    expect((await agent.api('GET', '/users/me', { token })).status).toBe(401);
    expect((await request(agent.url, 'POST', '/auth/login', { body: { username: 'carl', password: PASS } })).status).toBe(401);
    await agent.api('PUT', `/users/${carl.id}`, { body: { is_active: true, password: 'Reset-By-Admin-42' } });
    expect((await request(agent.url, 'POST', '/auth/login', { body: { username: 'carl', password: PASS } })).status).toBe(401);
    await agent.login('carl', 'Reset-By-Admin-42');
    expect((await agent.api('PUT', `/users/${carl.id}`, { body: { password: 'weak' } })).body.code).toBe('WEAK_PASSWORD');
    expect((await agent.api('PUT', '/users/9999', { body: { role: 'viewer' } })).status).toBe(404);
  });

  it('refuses to delete or demote the last admin and yourself', async () => {
    const admin = (await agent.api('GET', '/users/me')).body.data as { id: number };
    const del = await agent.api('DELETE', `/users/${admin.id}`);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('LAST_ADMIN');
    expect((await agent.api('PUT', `/users/${admin.id}`, { body: { role: 'operator' } })).body.code).toBe('LAST_ADMIN');
    expect((await agent.api('PUT', `/users/${admin.id}`, { body: { is_active: false } })).body.code).toBe('LAST_ADMIN');

    const second = await createUser('root2', 'admin');
    expect((await agent.api('DELETE', `/users/${admin.id}`)).body.code).toBe('CANNOT_DELETE_SELF');
    expect((await agent.api('PUT', `/users/${admin.id}`, { body: { role: 'viewer' } })).body.code).toBe('CANNOT_CHANGE_SELF');
    // Another admin may demote the first one while two are active; then root2 is the last one.
    const token2 = await agent.login('root2', PASS);
    const demote = await agent.api('PUT', `/users/${admin.id}`, { token: token2, body: { role: 'operator' } });
    expect(demote.status).toBe(200);
    // A demotion signs the user out: its tokens are refused, also once it is promoted again.
    expect((await agent.api('GET', '/users/me')).status).toBe(401);
    expect((await agent.api('PUT', `/users/${second.id}`, { token: token2, body: { role: 'operator' } })).body.code).toBe('LAST_ADMIN');
    // Restore the bootstrap admin for the other tests.
    expect((await agent.api('PUT', `/users/${admin.id}`, { token: token2, body: { role: 'admin' } })).status).toBe(200);
    expect((await agent.api('GET', '/users/me')).status).toBe(401);
    agent.token = await agent.login('admin', ADMIN_PASSWORD);
    const removed = await agent.api('DELETE', `/users/${second.id}`);
    expect(removed.status).toBe(200);
    expect((await agent.api('GET', `/users/${second.id}`)).status).toBe(404);
    expect((await agent.api('GET', '/users/me', { token: token2 })).status).toBe(401);
  });

  it('keeps non-admin user managers below their own rights', async () => {
    await createUser('mgr', 'operator', { permissions: ['users:read', 'users:write'], scope: 'global' });
    const token = await agent.login('mgr', PASS);
    // Users are global: a manager limited to its deployments manages none, whatever its permissions say.
    await createUser('mgr-scoped', 'operator', { permissions: ['users:read', 'users:write'] });
    const scopedToken = await agent.login('mgr-scoped', PASS);
    const scoped = await agent.api('POST', '/users', {
      token: scopedToken,
      body: { username: 'sneaky2', email: 's2@example.com', password: PASS, role: 'viewer' },
    });
    expect(scoped.body.code).toBe('GLOBAL_SCOPE_REQUIRED');
    expect((await agent.api('GET', '/users', { token: scopedToken })).status).toBe(403);
    const asAdmin = await agent.api('POST', '/users', { token, body: { username: 'sneaky', email: 's@example.com', password: PASS, role: 'admin' } });
    expect(asAdmin.status).toBe(403);
    expect(asAdmin.body.code).toBe('GRANT_EXCEEDS_OWN');
    const withAudit = await agent.api('POST', '/users', {
      token,
      body: { username: 'sneaky', email: 's@example.com', password: PASS, role: 'viewer', permissions: ['audit:write'] },
    });
    expect(withAudit.status).toBe(403);
    const ok = await agent.api('POST', '/users', { token, body: { username: 'helper1', email: 'h@example.com', password: PASS, role: 'viewer' } });
    expect(ok.status).toBe(201);
    expect(ok.body.data.scope).toBe('deployments');
    // An admin is global by definition.
    expect(
      (await agent.api('POST', '/users', { body: { username: 'scopedadmin', email: 'sa@example.com', password: PASS, role: 'admin', scope: 'deployments' } }))
        .status,
    ).toBe(400);
    const admin = (await agent.api('GET', '/users/me')).body.data as { id: number };
    expect((await agent.api('PUT', `/users/${admin.id}`, { token, body: { email: 'x@example.com' } })).body.code).toBe('ADMIN_ONLY');
    expect((await agent.api('DELETE', `/users/${admin.id}`, { token })).status).toBe(403);
  });

  it('assigns, updates and removes deployment access', async () => {
    const dora = await createUser('dora', 'operator');
    const assign = await agent.api('POST', `/users/${dora.id}/deployments`, { body: { deployment_name: 'shop', access_level: 'write' } });
    expect(assign.status).toBe(201);
    expect(assign.body.data).toMatchObject({ user_id: dora.id, deployment: 'shop', access_level: 'write' });
    expect((await agent.api('POST', `/users/${dora.id}/deployments`, { body: { deployment_name: 'shop', access_level: 'read' } })).status).toBe(409);
    expect((await agent.api('POST', `/users/${dora.id}/deployments`, { body: { deployment_name: '../etc', access_level: 'read' } })).status).toBe(400);
    expect((await agent.api('POST', `/users/${dora.id}/deployments`, { body: { deployment_name: 'blog', access_level: 'owner' } })).status).toBe(400);
    expect((await agent.api('POST', '/users/9999/deployments', { body: { deployment_name: 'blog', access_level: 'read' } })).status).toBe(404);
    await agent.api('POST', `/users/${dora.id}/deployments`, { body: { deployment_name: 'blog', access_level: 'read' } });
    const list = await agent.api('GET', `/users/${dora.id}/deployments`);
    expect(list.body.data.map((g: { deployment: string }) => g.deployment).sort()).toEqual(['blog', 'shop']);

    const token = await agent.login('dora', PASS);
    const me = await agent.api('GET', '/users/me', { token });
    expect(me.body.data.deployments).toEqual(
      expect.arrayContaining([
        { deployment: 'shop', access_level: 'write' },
        { deployment: 'blog', access_level: 'read' },
      ]),
    );

    const users = await agent.api('GET', '/deployments/shop/users');
    expect(users.status).toBe(200);
    expect(users.body.data).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ username: 'admin', access_level: 'admin', source: 'role' }),
        expect.objectContaining({ username: 'dora', access_level: 'write', source: 'grant' }),
      ]),
    );

    const upd = await agent.api('PUT', `/users/${dora.id}/deployments/shop`, { body: { access_level: 'admin' } });
    expect(upd.body.data.access_level).toBe('admin');
    expect((await agent.api('PUT', `/users/${dora.id}/deployments/nosuch`, { body: { access_level: 'read' } })).status).toBe(404);
    expect((await agent.api('DELETE', `/users/${dora.id}/deployments/blog`)).status).toBe(200);
    expect((await agent.api('DELETE', `/users/${dora.id}/deployments/blog`)).status).toBe(404);
    const after = await agent.api('GET', '/users/me', { token });
    expect(after.body.data.deployments).toEqual([{ deployment: 'shop', access_level: 'admin' }]);
  });

  it('lets non-admins manage access only on deployments they administer', async () => {
    const lead = await createUser('lead', 'operator', { permissions: ['users:read', 'users:write'] });
    const member = await createUser('member', 'viewer');
    await agent.api('POST', `/users/${lead.id}/deployments`, { body: { deployment_name: 'app-a', access_level: 'admin' } });
    await agent.api('POST', `/users/${lead.id}/deployments`, { body: { deployment_name: 'app-b', access_level: 'write' } });
    await agent.api('POST', `/users/${member.id}/deployments`, { body: { deployment_name: 'secret-c', access_level: 'read' } });
    const token = await agent.login('lead', PASS);

    const assigned = await agent.api('POST', `/users/${member.id}/deployments`, { token, body: { deployment_name: 'app-a', access_level: 'write' } });
    expect(assigned.status, assigned.text).toBe(201);
    // write (not admin) on app-b: 403; no access at all to secret-c: the same 404 as an unknown deployment.
    expect((await agent.api('POST', `/users/${member.id}/deployments`, { token, body: { deployment_name: 'app-b', access_level: 'read' } })).status).toBe(403);
    expect((await agent.api('POST', `/users/${member.id}/deployments`, { token, body: { deployment_name: 'other-x', access_level: 'read' } })).status).toBe(
      404,
    );
    expect((await agent.api('DELETE', `/users/${member.id}/deployments/secret-c`, { token })).status).toBe(404);
    expect((await agent.api('PUT', `/users/${member.id}/deployments/app-b`, { token, body: { access_level: 'read' } })).status).toBe(403);

    const seen = await agent.api('GET', `/users/${member.id}/deployments`, { token });
    expect(seen.body.data.map((g: { deployment: string }) => g.deployment)).toEqual(['app-a']);
    expect((await agent.api('GET', '/deployments/app-a/users', { token })).status).toBe(200);
    expect((await agent.api('GET', '/deployments/app-b/users', { token })).status).toBe(403);
    expect((await agent.api('GET', '/deployments/secret-c/users', { token })).status).toBe(404);
  });

  it('does not let the admin password be brute-forced through the password change', async () => {
    // The wrong-current-password answer is a 400, and it never reveals the stored one.
    const res = await agent.api('PUT', '/users/me/password', { body: { current_password: 'guess', new_password: 'Whatever-Strong-1' } });
    expect(res.status).toBe(400);
    expect(res.text).not.toContain(ADMIN_PASSWORD);
  });
});
