/**
 * Tenancy of the notification routes (issue #14): targets are global. Two tenants (each a scoped user and a scoped
 * key) are refused reading and replacing targets, test sends (to a URL or a stored target) and `send` — also about
 * their own deployment — and the receiver gets nothing from them; a global operator still configures, tests and
 * sends. A deleted deployment's name in a target filter is kept under its retired name, so a new deployment of that
 * name does not inherit the target.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobalUser, createTenant, expectGlobalOnly, principals, type Tenant } from '../../docker/test/tenants.js';
import { startHttpSink, type HttpSink } from './sinks.js';

const FIXTURE = join(import.meta.dirname, 'fixture');

describe('notifications and tenants', () => {
  let agent: TestAgent;
  let http: HttpSink;
  let alice: Tenant;
  let bob: Tenant;
  let operator: string;
  const hook = (path: string) => `generic+http://127.0.0.1:${new URL(http.url).port}${path}`;

  beforeAll(async () => {
    http = await startHttpSink();
    agent = await startAgent({ plugins: ['access', 'notifications', FIXTURE], config: { notifications: { retries: 0 } } });
    [alice, bob] = await Promise.all([createTenant(agent, 'alice', ['shop']), createTenant(agent, 'bob', ['blog'])]);
    operator = await createGlobalUser(agent, 'gop');
    const put = await agent.api('PUT', '/notifications/targets', {
      token: operator,
      body: [
        { id: 'team', name: 'team', url: hook('/team') },
        { id: 'shop-only', name: 'shop-only', url: hook('/shop-only'), deployments: ['shop'] },
      ],
    });
    expect(put.status, put.text).toBe(200);
  });
  afterAll(async () => {
    await agent?.stop();
    await http?.close();
  });

  it('refuses every notification route to scoped principals, and nothing is delivered', async () => {
    for (const [who, token] of [...principals(alice), ...principals(bob)]) {
      const own = who.startsWith('alice') ? 'shop' : 'blog';
      const other = own === 'shop' ? 'blog' : 'shop';
      for (const [method, path, body] of [
        ['GET', '/notifications/targets', undefined],
        ['PUT', '/notifications/targets', [{ name: 'mine', url: hook(`/stolen-${own}`) }]],
        ['PUT', '/notifications/targets', []],
        ['POST', '/notifications/test', { url: hook(`/probe-${own}`) }],
        ['POST', '/notifications/test', { target_id: 'team' }],
        ['POST', '/notifications/send', { event: 'alert.fired', severity: 'critical', title: `from ${who}`, message: 'm', deployment: own }],
        ['POST', '/notifications/send', { event: 'alert.fired', severity: 'critical', title: `from ${who}`, message: 'm', deployment: other }],
        ['POST', '/notifications/send', { event: 'alert.fired', severity: 'critical', title: `from ${who}`, message: 'm', targets: ['team'] }],
        ['GET', '/notifications/deliveries', undefined],
      ] as const)
        expectGlobalOnly(await agent.api(method, path, { token, body }), `${who} ${method} ${path} ${JSON.stringify(body ?? '')}`);
    }
    // Give a queued delivery the time to arrive, had one been queued.
    await new Promise((r) => setTimeout(r, 300));
    expect(http.received).toEqual([]);
    const targets = await agent.api('GET', '/notifications/targets', { token: operator });
    expect(targets.body.data.map((t: { id: string }) => t.id)).toEqual(['team', 'shop-only']);
  });

  it('lets a global operator test and send', async () => {
    const test = await agent.api('POST', '/notifications/test', { token: operator, body: { target_id: 'team', message: 'hello team' } });
    expect(test.status, test.text).toBe(200);
    await http.waitFor((r) => r.path === '/team' && r.body.message === 'hello team');
    const sent = await agent.api('POST', '/notifications/send', {
      token: operator,
      body: { event: 'alert.fired', severity: 'warning', title: 'shop slow', message: 'm', deployment: 'shop' },
    });
    expect(sent.status, sent.text).toBe(202);
    expect(sent.body.data.queued.sort()).toEqual(['shop-only', 'team']);
    await http.waitFor((r) => r.path === '/shop-only' && r.body.title === 'shop slow');
    const log = await agent.api('GET', '/notifications/deliveries', { token: operator, query: { offset: '100000000000000000000' } });
    expect(log.status).toBe(400);
    expect((await agent.api('GET', '/notifications/deliveries', { token: operator, query: { limit: 0 } })).status).toBe(400);
  });

  it("keeps a deleted deployment's filter under its retired name: a new deployment of that name does not inherit the target", async () => {
    const retired = 'shop~20240102030405';
    const emitted = await agent.api('POST', '/test-fixture/emit', {
      body: { event: 'deployment.deleted', payload: { name: 'shop', removed_files: true, retired_as: retired } },
    });
    expect(emitted.status).toBe(200);
    const deadline = Date.now() + 5000;
    let filter: string[] = [];
    while (Date.now() < deadline) {
      filter = (await agent.api('GET', '/notifications/targets', { token: operator })).body.data.find((t: { id: string }) => t.id === 'shop-only').deployments;
      if (filter[0] === retired) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(filter).toEqual([retired]);
    const sent = await agent.api('POST', '/notifications/send', {
      token: operator,
      body: { event: 'alert.fired', severity: 'warning', title: 'new shop', message: 'm', deployment: 'shop' },
    });
    expect(sent.body.data.queued).toEqual(['team']);
    // What was read can be saved back unchanged.
    const current = (await agent.api('GET', '/notifications/targets', { token: operator })).body.data.map(({ scheme: _s, ...t }: Record<string, unknown>) => t);
    const saved = await agent.api('PUT', '/notifications/targets', { token: operator, body: current });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body.data.find((t: { id: string }) => t.id === 'shop-only').deployments).toEqual([retired]);
  });
});
