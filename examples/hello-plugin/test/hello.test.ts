import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const HELLO = resolve(REPO_ROOT, 'examples/hello-plugin');

describe('hello-plugin (third-party example)', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({ plugins: [HELLO], config: { hello: { greeting: 'Hi' } } });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('creates through a validated route, with its config applied', async () => {
    const res = await agent.api('POST', '/hello/greetings', { body: { name: 'Ada' } });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ id: 1, name: 'Ada', message: 'Hi, Ada!' });
    expect((await agent.api('POST', '/hello/greetings', { body: { name: 'Ada' } })).body.code).toBe('GREETING_EXISTS');
    expect((await agent.api('POST', '/hello/greetings', { body: { name: '../x' } })).status).toBe(400);
    expect((await agent.api('GET', '/hello/greetings', { query: { name: 'Ada' } })).body.data).toHaveLength(1);
  });

  it('plans a create and a delete, and refuses a stale plan', async () => {
    const plan = (await agent.api('POST', '/hello/greetings', { query: { plan: 'true' }, body: { name: 'Grace' } })).body.data;
    expect(plan.changes[0]).toMatchObject({ actions: ['create'], after: { name: 'Grace', message: 'Hi, Grace!' } });
    expect((await agent.api('GET', '/hello/greetings', { query: { name: 'Grace' } })).body.data).toHaveLength(0);
    expect((await agent.api('POST', `/plans/${plan.id}/apply`)).status).toBe(201);
    const stale = (await agent.api('POST', '/hello/greetings', { query: { plan: 'true' }, body: { name: 'Linus' } })).body.data;
    await agent.api('POST', '/hello/greetings', { body: { name: 'Barbara' } });
    expect((await agent.api('POST', `/plans/${stale.id}/apply`)).body.code).toBe('PLAN_STALE');
    const del = (await agent.api('DELETE', '/hello/greetings/1', { query: { plan: 'true' } })).body.data;
    expect(del.changes[0].actions).toEqual(['delete']);
    expect((await agent.api('POST', `/plans/${del.id}/apply`)).status).toBe(200);
    expect((await agent.api('DELETE', '/hello/greetings/1')).status).toBe(404);
  });

  it('runs its job, sees its own events and reports its store', async () => {
    const run = await agent.api('POST', '/hello/tick');
    expect(run.body.data).toMatchObject({ status: 'succeeded', output: '2 greetings\n' });
    const stats = (await agent.api('GET', '/hello/stats')).body.data;
    expect(stats).toMatchObject({ greetings: 2, ticks: 1, events_seen: 3, next_tick: expect.any(String) });
  });
});

describe('deployments from a plugin (POST /api/plugins/:name/deployments)', () => {
  let agent: TestAgent;
  const name = `hello-${process.pid}`;
  const port = 20000 + (process.pid % 20000);
  beforeAll(async () => {
    agent = await startAgent({ plugins: [HELLO, 'docker', 'deployments'] });
  });
  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    await agent?.stop();
  });

  it('validates the config, then creates and starts the deployment', async () => {
    const bad = await agent.api('POST', '/plugins/hello/deployments', { body: { name, config: { port: 80 } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('body.config.port');
    expect((await agent.api('POST', '/plugins/hello/deployments', { body: { name: '../x' } })).status).toBe(400);
    expect((await agent.api('POST', '/plugins/nope/deployments', { body: { name } })).status).toBe(404);
    expect((await agent.api('GET', '/plugins/hello')).body.data.deployable).toMatchObject({ summary: expect.any(String) });

    const res = await agent.api('POST', '/plugins/hello/deployments', {
      body: { name, config: { image: 'agent-test/busybox:latest', port, greeting: 'Hi from a plugin; $(id) stays text' } },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ name });
    let text = '';
    for (let i = 0; i < 50 && !text; i++) {
      text = await fetch(`http://127.0.0.1:${port}/`).then(
        (r) => (r.ok ? r.text() : ''),
        () => '',
      );
      if (!text) await new Promise((r) => setTimeout(r, 200));
    }
    expect(text).toBe('Hi from a plugin; $(id) stays text\n');
    expect((await agent.api('POST', '/plugins/hello/deployments', { body: { name } })).status).toBe(409);
  });
});
