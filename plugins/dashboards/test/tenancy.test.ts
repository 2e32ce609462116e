/**
 * Tenancy of dashboards (issue #14): a dashboard is its user's. Two tenants (each a scoped user and a scoped key of
 * that user) see and change only their own: the other's and shared ones answer 404 by id and are absent from lists;
 * panels of deployments out of reach are refused. A global operator sees shared dashboards but changes only its own;
 * an admin sees everything. A deleted deployment's panels are removed (a new deployment of the name, maybe someone
 * else's, would otherwise appear in them). In-process (`@agent/sdk/testing`), with the principals made in the
 * access plugin.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type {} from '@agent/plugin-deployments/api';
import { startTestPlugin, type TestPlugin, type TestPrincipal, type TestUser } from '@agent/sdk/testing';
import dashboards from '../src/index.js';

const panel = (id: string, deployment?: string) => ({
  id,
  title: id,
  source: 'container',
  series: 'container.cpu.usage',
  type: 'line',
  width: 6,
  ...(deployment ? { deployment } : {}),
});

/** A tenant: a scoped operator with write on its deployments, and a key of its own limited to them. */
const tenant = (name: string, deployments: string[]) => {
  const user: TestUser = { user: name, role: 'operator', deployments: Object.fromEntries(deployments.map((d) => [d, 'write'])) };
  return { user, key: { key: `${name}-key`, owner: user, deployments } };
};
/** Both principals of a tenant, labelled for assertion messages. */
const principals = (name: string, t: ReturnType<typeof tenant>): [string, TestPrincipal][] => [
  [`${name} (user)`, t.user],
  [`${name} (key)`, t.key],
];

const alice = tenant('alice', ['shop']);
const bob = tenant('bob', ['blog']);
const operator: TestUser = { user: 'gop', role: 'operator', scope: 'global' };

describe('dashboards and tenants', () => {
  let agent: TestPlugin;
  let aliceBoard: string;
  let bobBoard: string;
  let shared: string;

  beforeAll(async () => {
    agent = await startTestPlugin(dashboards);
    const create = async (principal: TestPrincipal, body: Record<string, unknown>) => {
      const res = await agent.request('POST', '/dashboards', { principal, body });
      expect(res.status, res.text).toBe(201);
      return res.body.data.id as string;
    };
    aliceBoard = await create(alice.user, { name: 'Shop', shared: true, panels: [panel('shop-cpu', 'shop'), panel('all')] });
    bobBoard = await create(bob.key, { name: 'Blog', panels: [panel('blog-cpu', 'blog')] });
    shared = await create('admin', { name: 'Team', shared: true, panels: [panel('shop', 'shop'), panel('blog', 'blog')] });
  });
  afterAll(async () => {
    await agent?.close();
  });

  it('shows each tenant its own dashboards only, through its user and its key', async () => {
    for (const [who, principal] of principals('alice', alice)) {
      const list = await agent.request('GET', '/dashboards', { principal });
      expect(list.status, who).toBe(200);
      expect(
        list.body.data.map((d: { id: string }) => d.id),
        who,
      ).toEqual([aliceBoard]);
      expect(list.text, who).not.toContain('blog');
      for (const id of [bobBoard, shared]) {
        expect((await agent.request('GET', `/dashboards/${id}`, { principal })).status, `${who} GET ${id}`).toBe(404);
        expect((await agent.request('PUT', `/dashboards/${id}`, { principal, body: { name: 'taken', panels: [] } })).status, `${who} PUT ${id}`).toBe(404);
        expect((await agent.request('DELETE', `/dashboards/${id}`, { principal })).status, `${who} DELETE ${id}`).toBe(404);
      }
      const foreignPanel = await agent.request('POST', '/dashboards', { principal, body: { name: 'x', panels: [panel('p', 'blog')] } });
      expect(foreignPanel.status, who).toBe(400);
      expect(foreignPanel.text, who).toContain('panels[0].deployment');
    }
    for (const [who, principal] of principals('bob', bob)) {
      const list = await agent.request('GET', '/dashboards', { principal });
      expect(
        list.body.data.map((d: { id: string }) => d.id),
        who,
      ).toEqual([bobBoard]);
      expect(list.text, who).not.toContain('shop');
    }
    // The key changes its user's dashboard.
    const renamed = await agent.request('PUT', `/dashboards/${aliceBoard}`, {
      principal: alice.key,
      body: { name: 'Shop 2', shared: true, panels: [panel('shop-cpu', 'shop'), panel('all')] },
    });
    expect(renamed.status, renamed.text).toBe(200);
  });

  it('shows shared dashboards to global principals, who change only their own', async () => {
    const list = (await agent.request('GET', '/dashboards', { principal: operator })).body.data.map((d: { id: string }) => d.id).sort();
    expect(list).toEqual([aliceBoard, shared].sort());
    expect((await agent.request('GET', `/dashboards/${bobBoard}`, { principal: operator })).status).toBe(404);
    expect((await agent.request('DELETE', `/dashboards/${shared}`, { principal: operator })).status).toBe(403);
    const all = (await agent.request('GET', '/dashboards')).body.data.map((d: { id: string }) => d.id).sort();
    expect(all).toEqual([aliceBoard, bobBoard, shared].sort());
  });

  it('removes the panels of a deleted deployment', async () => {
    // What the deployments plugin emits when it deletes one, on the agent's bus.
    agent.events.emit('deployment.deleted', { name: 'shop', removed_files: true, retired_as: 'shop~20240102030405' });
    const panels = async (id: string) => ((await agent.request('GET', `/dashboards/${id}`)).body.data.panels as { id: string }[]).map((p) => p.id);
    const deadline = Date.now() + 5000;
    while ((await panels(shared)).includes('shop') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await panels(shared)).toEqual(['blog']);
    expect(await panels(aliceBoard)).toEqual(['all']);
    expect(await panels(bobBoard)).toEqual(['blog-cpu']);
  });
});
