/**
 * Dashboards, in-process (`@agent/sdk/testing`): the plugin from its source in the agent's kernel, with users made
 * in the access plugin as the API makes them. Nothing here needs root or a host service.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlugin, type TestPlugin, type TestUser } from '@agent/sdk/testing';
import dashboards from '../src/index.js';

const alice: TestUser = { user: 'alice', role: 'operator', deployments: { shop: 'write' } };
const bob: TestUser = { user: 'bob', role: 'operator', deployments: { blog: 'write' } };
const vera: TestUser = { user: 'vera', role: 'viewer', deployments: { shop: 'read' } };
const gina: TestUser = { user: 'gina', role: 'viewer', scope: 'global' };
const otto: TestUser = { user: 'otto', role: 'operator', scope: 'global' };

describe('dashboards', () => {
  let agent: TestPlugin;

  beforeAll(async () => {
    agent = await startTestPlugin(dashboards);
  });
  afterAll(async () => {
    await agent?.close();
  });

  const panel = (extra: Record<string, unknown> = {}) => ({
    title: 'CPU',
    source: 'container',
    series: 'container.cpu.usage',
    type: 'line',
    width: 6,
    ...extra,
  });

  it('creates, reads, lists and deletes a dashboard', async () => {
    const created = await agent.request('POST', '/dashboards', {
      principal: alice,
      body: {
        name: 'Shop',
        panels: [
          panel({ deployment: 'shop' }),
          panel({ id: 'rps', title: 'Requests', source: 'serving', series: 'http.server.request.rate', type: 'stat', width: 12 }),
        ],
      },
    });
    expect(created.status, created.text).toBe(201);
    const d = created.body.data;
    expect(d).toMatchObject({ id: expect.any(String), name: 'Shop', shared: false, owner: { name: 'alice' } });
    expect(d.panels).toEqual([
      { id: expect.any(String), title: 'CPU', source: 'container', series: 'container.cpu.usage', deployment: 'shop', type: 'line', width: 6 },
      { id: 'rps', title: 'Requests', source: 'serving', series: 'http.server.request.rate', type: 'stat', width: 12 },
    ]);
    expect((await agent.request('GET', `/dashboards/${d.id}`, { principal: alice })).body.data).toEqual(d);
    expect((await agent.request('GET', '/dashboards', { principal: alice })).body.data.map((x: any) => x.id)).toEqual([d.id]);
    // Private: other users do not see it; an admin does.
    expect((await agent.request('GET', `/dashboards/${d.id}`, { principal: bob })).status).toBe(404);
    expect((await agent.request('GET', '/dashboards', { principal: bob })).body.data).toEqual([]);
    expect((await agent.request('GET', `/dashboards/${d.id}`)).status).toBe(200);
    expect((await agent.request('DELETE', `/dashboards/${d.id}`, { principal: bob })).status).toBe(404);
    expect((await agent.request('DELETE', `/dashboards/${d.id}`, { principal: alice })).status).toBe(200);
    expect((await agent.request('GET', `/dashboards/${d.id}`, { principal: alice })).status).toBe(404);
  });

  it('validates series, types, widths and deployments', async () => {
    const post = (body: unknown, principal = alice) => agent.request('POST', '/dashboards', { principal, body });
    const unknown = await post({ name: 'x', panels: [panel({ series: 'container.cpu.bogus' })] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toContain('body.panels[0].series');
    expect((await post({ name: 'x', panels: [panel({ source: 'serving' })] })).status).toBe(400);
    expect((await post({ name: 'x', panels: [panel({ width: 13 })] })).status).toBe(400);
    expect((await post({ name: 'x', panels: [panel({ width: 0 })] })).status).toBe(400);
    expect((await post({ name: 'x', panels: [panel({ type: 'pie' })] })).status).toBe(400);
    expect((await post({ name: 'x', panels: [panel({ source: 'disk' })] })).status).toBe(400);
    expect((await post({ name: 'x', panels: [panel({ colour: 'red' })] })).status).toBe(400);
    expect((await post({ name: 'x', panels: [panel({ id: 'a' }), panel({ id: 'a' })] })).status).toBe(400);
    const foreign = await post({ name: 'x', panels: [panel({ deployment: 'blog' })] });
    expect(foreign.status).toBe(400);
    expect(foreign.body.error).toContain('body.panels[0].deployment');
    expect((await post({ name: 'x', panels: [] }, vera)).status).toBe(403);
    expect((await agent.request('GET', '/dashboards/not-a-uuid', { principal: alice })).status).toBe(400);
  });

  it('shares a dashboard with global principals only', async () => {
    const created = await agent.request('POST', '/dashboards', {
      body: {
        name: 'Everything',
        shared: true,
        panels: [
          panel({ id: 'shop-cpu', deployment: 'shop' }),
          panel({ id: 'blog-cpu', deployment: 'blog' }),
          panel({ id: 'all-mem', series: 'container.memory.usage' }),
        ],
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id;
    // A global reader sees it whole (it reaches every deployment).
    const asGina = await agent.request('GET', `/dashboards/${id}`, { principal: gina });
    expect(asGina.status).toBe(200);
    expect(asGina.body.data.panels.map((p: any) => p.id)).toEqual(['shop-cpu', 'blog-cpu', 'all-mem']);
    // Users limited to their deployments see only their own dashboards: a shared one describes everyone's.
    expect((await agent.request('GET', `/dashboards/${id}`, { principal: vera })).status).toBe(404);
    expect((await agent.request('GET', '/dashboards', { principal: bob })).body.data.some((d: any) => d.id === id)).toBe(false);
    expect((await agent.request('DELETE', `/dashboards/${id}`, { principal: bob })).status).toBe(404);
    // Shared is not owned: others cannot change or delete it.
    expect((await agent.request('DELETE', `/dashboards/${id}`, { principal: otto })).status).toBe(403);
    const put = await agent.request('PUT', `/dashboards/${id}`, { principal: otto, body: { name: 'mine now', panels: [] } });
    expect(put.status).toBe(403);
    // The owner (an admin) replaces it.
    const renamed = await agent.request('PUT', `/dashboards/${id}`, {
      body: { name: 'Everything v2', shared: true, panels: [panel({ id: 'all-mem', series: 'container.memory.usage', width: 12 })] },
    });
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.body.data).toMatchObject({ name: 'Everything v2', panels: [{ id: 'all-mem', width: 12 }] });
  });

  it('keeps the panels an editing owner cannot see', async () => {
    const mine = (
      await agent.request('POST', '/dashboards', { principal: alice, body: { name: 'Alice', panels: [panel({ id: 'shop', deployment: 'shop' })] } })
    ).body.data;
    const added = await agent.request('PUT', `/dashboards/${mine.id}`, {
      body: { name: 'Alice', panels: [panel({ id: 'shop', deployment: 'shop' }), panel({ id: 'blog', deployment: 'blog' })] },
    });
    expect(added.body.data.panels.map((p: any) => p.id)).toEqual(['shop', 'blog']);
    const edited = await agent.request('PUT', `/dashboards/${mine.id}`, {
      principal: alice,
      body: { name: 'Alice 2', panels: [panel({ id: 'shop', deployment: 'shop', width: 4 })] },
    });
    expect(edited.status, edited.text).toBe(200);
    expect(edited.body.data.panels.map((p: any) => p.id)).toEqual(['shop']);
    const asAdmin = (await agent.request('GET', `/dashboards/${mine.id}`)).body.data;
    expect(asAdmin).toMatchObject({ name: 'Alice 2', owner: { name: 'alice' } });
    expect(asAdmin.panels.map((p: any) => `${p.id}:${p.width}`)).toEqual(['shop:4', 'blog:6']);
  });
});
