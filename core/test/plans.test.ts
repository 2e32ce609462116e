import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../test/helpers/agent.js';
import { FIXTURE, makeUser } from './helpers/fixture.js';

describe('plans', () => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await startAgent({ plugins: [FIXTURE], keep: true });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  const planFor = async (name: string, body: Record<string, unknown>, token?: string) => {
    const res = await agent.api('PUT', `/fixture/deployments/${name}/widget`, { query: { plan: 'true' }, body, token });
    expect(res.status).toBe(201);
    return res.body.data;
  };

  it('previews without changing anything, then applies', async () => {
    const plan = await planFor('p1', { color: 'red', token: 'tok-secret' });
    expect(plan).toMatchObject({
      status: 'available',
      action: 'fixture.putWidget',
      resource: { type: 'widget', id: 'p1' },
      changes: [{ type: 'widget', id: 'p1', actions: ['create'], after: { color: 'red' } }],
      request: { method: 'PUT', path: '/api/fixture/deployments/p1/widget', body: { color: 'red', token: '[redacted]' } },
    });
    expect(JSON.stringify(plan)).not.toContain('tok-secret');
    expect((await agent.api('GET', '/fixture/deployments/p1/widget')).status).toBe(404);
    const read = await agent.api('GET', `/plans/${plan.id}`);
    expect(read.body.data.request.body.token).toBe('[redacted]');
    const applied = await agent.api('POST', `/plans/${plan.id}/apply`);
    expect(applied.status).toBe(200);
    expect(applied.body.data.plan.status).toBe('applied');
    expect(applied.body.data.result).toMatchObject({ deployment: 'p1', color: 'red' });
    expect((await agent.api('GET', '/fixture/deployments/p1/widget')).body.data.color).toBe('red');
    const again = await agent.api('POST', `/plans/${plan.id}/apply`);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('PLAN_NOT_AVAILABLE');
  });

  it('refuses a stale plan with 409 PLAN_STALE naming what drifted', async () => {
    const plan = await planFor('p2', { color: 'blue' });
    await agent.api('PUT', '/fixture/deployments/p2/widget', { body: { color: 'red' } });
    const res = await agent.api('POST', `/plans/${plan.id}/apply`);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'PLAN_STALE', drifted: ['record:widget'] });
  });

  it('detects changes of files the plan depends on', async () => {
    const plan = await planFor('p3', { color: 'blue' });
    writeFileSync(join(agent.dataDir, 'plugins/fixture/marker.txt'), 'changed');
    const res = await agent.api('POST', `/plans/${plan.id}/apply`);
    expect(res.status).toBe(409);
    expect(res.body.drifted[0]).toMatch(/^file:.*marker\.txt$/);
  });

  it('makes other plans on the same resource obsolete once one is applied', async () => {
    const a = await planFor('p4', { color: 'blue' });
    const b = await planFor('p4', { color: 'red' });
    expect((await agent.api('POST', `/plans/${a.id}/apply`)).status).toBe(200);
    expect((await agent.api('GET', `/plans/${b.id}`)).body.data.status).toBe('obsolete');
    expect((await agent.api('POST', `/plans/${b.id}/apply`)).status).toBe(409);
  });

  it('validates the request before making a plan, and refuses plans on routes without support', async () => {
    const bad = await agent.api('PUT', '/fixture/deployments/p5/widget', { query: { plan: 'true' }, body: { color: 'green' } });
    expect(bad.status).toBe(400);
    const unsupported = await agent.api('POST', '/fixture/jobs/count', { query: { plan: 'true' } });
    expect(unsupported.status).toBe(400);
    expect(unsupported.body.code).toBe('PLAN_NOT_SUPPORTED');
    expect((await agent.api('PUT', '/fixture/deployments/p5/widget', { query: { plan: 'maybe' }, body: { color: 'red' } })).status).toBe(400);
  });

  it('lists, discards, and keeps plans private to their creator', async () => {
    const viewerish = await makeUser(agent, 'operator', { grants: { p6: 'write' } });
    const mine = await planFor('p6', { color: 'blue' }, viewerish.token);
    const adminPlan = await planFor('p7', { color: 'blue' });
    const list = await agent.api('GET', '/plans', { token: viewerish.token });
    expect(list.body.data.map((p: { id: string }) => p.id)).toEqual([mine.id]);
    expect((await agent.api('GET', `/plans/${adminPlan.id}`, { token: viewerish.token })).status).toBe(404);
    expect((await agent.api('GET', '/plans', { query: { status: 'available' } })).body.data.length).toBeGreaterThanOrEqual(2);
    expect((await agent.api('DELETE', `/plans/${adminPlan.id}`)).status).toBe(200);
    expect((await agent.api('GET', `/plans/${adminPlan.id}`)).status).toBe(404);
    // the creator's rights are re-checked at apply: without the grant any more, the plan fails
    await agent.api('DELETE', `/fixture/users/${viewerish.id}/grants/p6`);
    const applied = await agent.api('POST', `/plans/${mine.id}/apply`, { token: viewerish.token });
    expect(applied.status).toBe(404);
    expect((await agent.api('GET', `/plans/${mine.id}`, { token: viewerish.token })).body.data).toMatchObject({
      status: 'failed',
      apply_error: { code: 'NOT_FOUND' },
    });
  });

  it('keeps plans across a restart', async () => {
    const plan = await planFor('p8', { color: 'red' });
    await agent.stop();
    agent = await startAgent({ plugins: [FIXTURE], dataDir: agent.dataDir, keep: true });
    const read = await agent.api('GET', `/plans/${plan.id}`);
    expect(read.status).toBe(200);
    expect(read.body.data.status).toBe('available');
    expect((await agent.api('POST', `/plans/${plan.id}/apply`)).status).toBe(200);
  });
});

describe('plan expiry', () => {
  it('answers 410 PLAN_EXPIRED after plans.ttl', async () => {
    const agent = await startAgent({ plugins: [FIXTURE], config: { plans: { ttl: '1s' } } });
    try {
      const plan = (await agent.api('PUT', '/fixture/deployments/e1/widget', { query: { plan: 'true' }, body: { color: 'red' } })).body.data;
      await new Promise((r) => setTimeout(r, 1200));
      const res = await agent.api('POST', `/plans/${plan.id}/apply`);
      expect(res.status).toBe(410);
      expect(res.body.code).toBe('PLAN_EXPIRED');
      expect((await agent.api('GET', `/plans/${plan.id}`)).body.data.status).toBe('expired');
    } finally {
      await agent.stop();
    }
  });
});
