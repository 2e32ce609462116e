/**
 * Audit events are deployment-owned or global (README, Tenancy). A principal limited to its deployments — an API key
 * with a `deployments` list, a user whose access comes from grants — reads the events about those deployments and
 * nothing else, through every read (list, one event, stats, export), whatever filter it sends: not its owner's events
 * about other deployments, not its own or its owner's global events (logins, keys, passwords), not other users'.
 * A global non-admin keeps its rule: every deployment's events and its own actions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { FIXTURE } from '../../../core/test/helpers/fixture.js';

const PASS = 'Audit-Tenancy-2024!x';
const sorted = (ids: number[]) => [...ids].sort((a, b) => a - b);

interface Event {
  id: number;
  actor_id: string;
  action: string;
  deployment: string | null;
}

describe('audit events of principals limited to their deployments', () => {
  let agent: TestAgent;
  /** The owner: a scoped operator granted shop and blog. */
  let owner: { id: number; token: string };
  /** A key of the owner limited to shop. */
  let key: { id: number; key: string };
  let globalOp: { id: number; token: string };
  /** Every event, as the admin reads them. */
  let all: Event[];

  const createUser = async (username: string, body: Record<string, unknown>) => {
    const res = await agent.api('POST', '/users', { body: { username, email: `${username}@example.org`, password: PASS, role: 'operator', ...body } });
    expect(res.status, res.text).toBe(201);
    return { id: res.body.data.id as number, token: await agent.login(username, PASS) };
  };
  const widget = async (token: string, deployment: string) => {
    const res = await agent.api('PUT', `/fixture/deployments/${deployment}/widget`, { token, body: { color: 'red' } });
    expect(res.status, res.text).toBe(200);
  };
  const list = async (token: string, query: Record<string, string | number | boolean> = {}) => {
    const res = await agent.api('GET', '/audit/events', { token, query: { limit: 1000, ...query } });
    expect(res.status, res.text).toBe(200);
    return res.body.data as Event[];
  };
  const one = (where: (e: Event) => boolean, what: string): Event => {
    const found = all.find(where);
    expect(found, what).toBeDefined();
    return found!;
  };

  beforeAll(async () => {
    agent = await startAgent({ plugins: [FIXTURE] });
    owner = await createUser('owner', {});
    for (const deployment_name of ['shop', 'blog']) {
      const grant = await agent.api('POST', `/users/${owner.id}/deployments`, { body: { deployment_name, access_level: 'write' } });
      expect(grant.status, grant.text).toBe(201);
    }
    globalOp = await createUser('globalop', { scope: 'global' });
    // The owner's events: about shop, about blog, and global ones (its login above, the key's creation).
    await widget(owner.token, 'shop');
    await widget(owner.token, 'blog');
    const created = await agent.api('POST', '/apikeys', { token: owner.token, body: { name: 'shop-only', deployments: ['shop'] } });
    expect(created.status, created.text).toBe(201);
    key = { id: created.body.data.id, key: created.body.data.key };
    // The key's own events: about shop, and a global one (its login).
    await widget(key.key, 'shop');
    expect((await agent.api('POST', '/auth/login', { token: null, body: { api_key: key.key } })).status).toBe(200);
    // Others' events: the admin about shop, blog, another deployment and global state; the global operator's.
    await widget(agent.token, 'shop');
    await widget(agent.token, 'blog');
    await widget(agent.token, 'other');
    await widget(globalOp.token, 'other');
    await createUser('someone', {});
    all = await list(agent.token);
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('a key limited to shop sees the events about shop only: not its owner’s about blog, nor any global event', async () => {
    const seen = await list(key.key);
    const about = (d: string) => all.filter((e) => e.deployment === d).map((e) => e.id);
    expect(sorted(seen.map((e) => e.id))).toEqual(sorted(about('shop')));
    // Among them: the owner's, the key's own and the admin's events about shop.
    expect(new Set(seen.map((e) => e.actor_id))).toEqual(new Set([`user:${owner.id}`, `api_key:${key.id}`, 'user:1']));

    const hidden = [
      one((e) => e.actor_id === `user:${owner.id}` && e.deployment === 'blog', "the owner's event about blog"),
      one((e) => e.actor_id === `user:${owner.id}` && e.action === 'auth.login', "the owner's login"),
      one((e) => e.actor_id === `user:${owner.id}` && e.action === 'apikeys.create', "the owner's creation of the key"),
      one((e) => e.actor_id === `api_key:${key.id}` && e.action === 'auth.login', "the key's own login"),
      one((e) => e.actor_id === 'user:1' && e.deployment === null, "the admin's global event"),
    ];
    for (const e of hidden) expect((await agent.api('GET', `/audit/events/${e.id}`, { token: key.key })).status, `event ${e.action}`).toBe(404);
    const visible = one((e) => e.actor_id === 'user:1' && e.deployment === 'shop', "the admin's event about shop");
    expect((await agent.api('GET', `/audit/events/${visible.id}`, { token: key.key })).status).toBe(200);

    // Filters narrow what it sees, never widen it.
    expect(await list(key.key, { deployment: 'blog' })).toEqual([]);
    expect(await list(key.key, { actor_id: `user:${owner.id}` })).toEqual(seen.filter((e) => e.actor_id === `user:${owner.id}`));
    expect(await list(key.key, { action: 'auth.login' })).toEqual([]);
  });

  it('a key limited to shop: stats and export count and carry the same events', async () => {
    const seen = await list(key.key);
    const stats = await agent.api('GET', '/audit/stats', { token: key.key });
    expect(stats.status, stats.text).toBe(200);
    expect(stats.body.data.total).toBe(seen.length);
    const byAction = Object.fromEntries(stats.body.data.by_action.map((a: { action: string; count: number }) => [a.action, a.count]));
    const counted: Record<string, number> = {};
    for (const e of seen) counted[e.action] = (counted[e.action] ?? 0) + 1;
    expect(byAction).toEqual(counted);
    expect(Object.keys(byAction)).not.toContain('auth.login');
    const filtered = await agent.api('GET', '/audit/stats', { token: key.key, query: { actor_type: 'user' } });
    expect(filtered.body.data.total).toBe(seen.filter((e) => e.actor_id.startsWith('user:')).length);
    const exported = await agent.api('POST', '/audit/export', { token: key.key, body: { format: 'json' } });
    expect(exported.status, exported.text).toBe(200);
    const rows = JSON.parse(exported.text) as Event[];
    expect(rows.map((e) => e.id)).toEqual(seen.map((e) => e.id).reverse());
    const csv = await agent.api('POST', '/audit/export', { token: key.key, body: { format: 'csv', deployment: 'blog' } });
    expect(csv.text.trim().split('\r\n')).toHaveLength(1);
  });

  it('a user limited by its grants sees the events about its deployments only, not its own global ones', async () => {
    const seen = await list(owner.token);
    const ids = all.filter((e) => e.deployment === 'shop' || e.deployment === 'blog').map((e) => e.id);
    expect(sorted(seen.map((e) => e.id))).toEqual(sorted(ids));
    const ownGlobal = all.filter((e) => (e.actor_id === `user:${owner.id}` || e.actor_id === `api_key:${key.id}`) && e.deployment === null);
    expect(ownGlobal.length).toBeGreaterThanOrEqual(3);
    for (const e of ownGlobal) expect((await agent.api('GET', `/audit/events/${e.id}`, { token: owner.token })).status, e.action).toBe(404);
    const stats = await agent.api('GET', '/audit/stats', { token: owner.token });
    expect(stats.body.data.total).toBe(seen.length);
    const exported = JSON.parse((await agent.api('POST', '/audit/export', { token: owner.token, body: { format: 'json' } })).text) as Event[];
    expect(exported.every((e) => e.deployment === 'shop' || e.deployment === 'blog')).toBe(true);
    expect(exported).toHaveLength(seen.length);
    expect(await list(owner.token, { deployment: 'other' })).toEqual([]);
  });

  it('a grant removed takes its events away at once', async () => {
    expect((await agent.api('DELETE', `/users/${owner.id}/deployments/blog`)).status).toBe(200);
    const seen = await list(owner.token);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((e) => e.deployment === 'shop')).toBe(true);
  });

  it('a global operator keeps its rule: every deployment’s events and its own actions, not others’ global ones', async () => {
    const seen = await list(globalOp.token);
    const expected = all.filter((e) => e.deployment !== null || e.actor_id === `user:${globalOp.id}`).map((e) => e.id);
    // Events recorded since `all` was read (the grant removal) are about blog: the global operator sees them too.
    const later = seen.filter((e) => e.id > Math.max(...all.map((x) => x.id)));
    expect(later.every((e) => e.deployment !== null)).toBe(true);
    expect(sorted(seen.filter((e) => !later.includes(e)).map((e) => e.id))).toEqual(sorted(expected));
    expect(seen.some((e) => e.actor_id === `user:${globalOp.id}` && e.action === 'auth.login')).toBe(true);
    expect(seen.some((e) => e.actor_id === 'user:1' && e.deployment === null)).toBe(false);
  });
});
