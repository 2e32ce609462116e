/**
 * The plugin's own logic, in-process (`@agent/sdk/testing`): the agent's kernel runs in this process with the plugin
 * loaded from its source, so requests meet the real routing, validation, permission checks, plans and audit, without
 * root or any host service. What needs the host's Docker engine is in deployable.test.ts, against the real agent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlugin, type TestPlugin } from '@agent/sdk/testing';
import hello from '../src/index.js';

describe('hello-plugin (third-party example)', () => {
  let agent: TestPlugin;
  beforeAll(async () => {
    agent = await startTestPlugin(hello, { config: { hello: { greeting: 'Hi' } } });
  });
  afterAll(async () => {
    await agent?.close();
  });

  it('creates through a validated route, with its config applied', async () => {
    const res = await agent.request('POST', '/hello/greetings', { body: { name: 'Ada' } });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ id: 1, name: 'Ada', message: 'Hi, Ada!' });
    expect((await agent.request('POST', '/hello/greetings', { body: { name: 'Ada' } })).body.code).toBe('GREETING_EXISTS');
    expect((await agent.request('POST', '/hello/greetings', { body: { name: '../x' } })).status).toBe(400);
    expect((await agent.request('GET', '/hello/greetings', { query: { name: 'Ada' } })).body.data).toHaveLength(1);
  });

  it('plans a create and a delete, and refuses a stale plan', async () => {
    const plan = (await agent.request('POST', '/hello/greetings', { query: { plan: 'true' }, body: { name: 'Grace' } })).body.data;
    expect(plan.changes[0]).toMatchObject({ actions: ['create'], after: { name: 'Grace', message: 'Hi, Grace!' } });
    expect((await agent.request('GET', '/hello/greetings', { query: { name: 'Grace' } })).body.data).toHaveLength(0);
    expect((await agent.request('POST', `/plans/${plan.id}/apply`)).status).toBe(201);
    const stale = (await agent.request('POST', '/hello/greetings', { query: { plan: 'true' }, body: { name: 'Linus' } })).body.data;
    await agent.request('POST', '/hello/greetings', { body: { name: 'Barbara' } });
    expect((await agent.request('POST', `/plans/${stale.id}/apply`)).body.code).toBe('PLAN_STALE');
    const del = (await agent.request('DELETE', '/hello/greetings/1', { query: { plan: 'true' } })).body.data;
    expect(del.changes[0].actions).toEqual(['delete']);
    expect((await agent.request('POST', `/plans/${del.id}/apply`)).status).toBe(200);
    expect((await agent.request('DELETE', '/hello/greetings/1')).status).toBe(404);
  });

  it('runs its job, sees its own events and reports its store', async () => {
    const run = await agent.request('POST', '/hello/tick');
    expect(run.body.data).toMatchObject({ status: 'succeeded', output: '2 greetings\n' });
    const stats = (await agent.request('GET', '/hello/stats')).body.data;
    expect(stats).toMatchObject({ greetings: 2, ticks: 1, events_seen: 3, next_tick: expect.any(String) });
  });

  it('lets the role presets of its resource through, and no one else', async () => {
    // `greetings` is global: viewers read it and operators write it when their scope is global.
    const viewer = { user: 'vic', role: 'viewer', scope: 'global' } as const;
    expect((await agent.request('GET', '/hello/greetings', { principal: viewer })).body.data).toHaveLength(2);
    const refused = await agent.request('POST', '/hello/greetings', { principal: viewer, body: { name: 'Vic' } });
    expect(refused.status).toBe(403);
    const operator = await agent.request('POST', '/hello/greetings', {
      principal: { user: 'olga', role: 'operator', scope: 'global' },
      body: { name: 'Olga' },
    });
    expect(operator.status).toBe(201);
    // A user or key limited to its deployments reaches nothing global.
    const scoped = await agent.request('GET', '/hello/greetings', { principal: { user: 'sam', deployments: { shop: 'admin' } } });
    expect(scoped.body.code).toBe('GLOBAL_SCOPE_REQUIRED');
    expect((await agent.request('GET', '/hello/greetings', { principal: { key: 'ci', deployments: ['shop'] } })).body.code).toBe('GLOBAL_SCOPE_REQUIRED');
    expect((await agent.request('GET', '/hello/greetings', { principal: 'anonymous' })).status).toBe(401);
  });

  it('is audited by the kernel: who changed what, refusals included', async () => {
    const { id } = await agent.principal({ user: 'olga', role: 'operator', scope: 'global' });
    const events = (await agent.request('GET', '/audit/events', { query: { action: 'hello.create', actor_id: id } })).body.data;
    expect(events).toEqual([
      expect.objectContaining({ actor_id: id, actor_name: 'olga', action: 'hello.create', resource_type: 'hello', success: true, status: 201 }),
    ]);
    const refused = (await agent.request('GET', '/audit/events', { query: { action: 'hello.create', success: false } })).body.data;
    expect(refused.map((e: { status: number }) => e.status).sort()).toEqual([400, 403, 409]);
  });
});
