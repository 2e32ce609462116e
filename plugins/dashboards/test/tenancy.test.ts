/**
 * Tenancy of dashboards (issue #14): a dashboard is its user's. Two tenants (each a scoped user and a scoped key of
 * that user) see and change only their own: the other's and shared ones answer 404 by id and are absent from lists;
 * panels of deployments out of reach are refused. A global operator sees shared dashboards but changes only its own;
 * an admin sees everything. A deleted deployment's panels are removed (a new deployment of the name, maybe someone
 * else's, would otherwise appear in them).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobalUser, createTenant, principals, type Tenant } from '../../docker/test/tenants.js';

const FIXTURE = join(import.meta.dirname, '../../notifications/test/fixture');
const panel = (id: string, deployment?: string) => ({
  id,
  title: id,
  source: 'container',
  series: 'container.cpu.usage',
  type: 'line',
  width: 6,
  ...(deployment ? { deployment } : {}),
});

describe('dashboards and tenants', () => {
  let agent: TestAgent;
  let alice: Tenant;
  let bob: Tenant;
  let operator: string;
  let aliceBoard: string;
  let bobBoard: string;
  let shared: string;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['access', 'dashboards', FIXTURE] });
    [alice, bob] = await Promise.all([createTenant(agent, 'alice', ['shop']), createTenant(agent, 'bob', ['blog'])]);
    operator = await createGlobalUser(agent, 'gop');
    const create = async (token: string | undefined, body: Record<string, unknown>) => {
      const res = await agent.api('POST', '/dashboards', { token, body });
      expect(res.status, res.text).toBe(201);
      return res.body.data.id as string;
    };
    aliceBoard = await create(alice.user, { name: 'Shop', shared: true, panels: [panel('shop-cpu', 'shop'), panel('all')] });
    bobBoard = await create(bob.key, { name: 'Blog', panels: [panel('blog-cpu', 'blog')] });
    shared = await create(undefined, { name: 'Team', shared: true, panels: [panel('shop', 'shop'), panel('blog', 'blog')] });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  it('shows each tenant its own dashboards only, through its user and its key', async () => {
    for (const [who, token] of principals(alice)) {
      const list = await agent.api('GET', '/dashboards', { token });
      expect(list.status, who).toBe(200);
      expect(
        list.body.data.map((d: { id: string }) => d.id),
        who,
      ).toEqual([aliceBoard]);
      expect(list.text, who).not.toContain('blog');
      for (const id of [bobBoard, shared]) {
        expect((await agent.api('GET', `/dashboards/${id}`, { token })).status, `${who} GET ${id}`).toBe(404);
        expect((await agent.api('PUT', `/dashboards/${id}`, { token, body: { name: 'taken', panels: [] } })).status, `${who} PUT ${id}`).toBe(404);
        expect((await agent.api('DELETE', `/dashboards/${id}`, { token })).status, `${who} DELETE ${id}`).toBe(404);
      }
      const foreignPanel = await agent.api('POST', '/dashboards', { token, body: { name: 'x', panels: [panel('p', 'blog')] } });
      expect(foreignPanel.status, who).toBe(400);
      expect(foreignPanel.text, who).toContain('panels[0].deployment');
    }
    for (const [who, token] of principals(bob)) {
      const list = await agent.api('GET', '/dashboards', { token });
      expect(
        list.body.data.map((d: { id: string }) => d.id),
        who,
      ).toEqual([bobBoard]);
      expect(list.text, who).not.toContain('shop');
    }
    // The key changes its user's dashboard.
    const renamed = await agent.api('PUT', `/dashboards/${aliceBoard}`, {
      token: alice.key,
      body: { name: 'Shop 2', shared: true, panels: [panel('shop-cpu', 'shop'), panel('all')] },
    });
    expect(renamed.status, renamed.text).toBe(200);
  });

  it('shows shared dashboards to global principals, who change only their own', async () => {
    const list = (await agent.api('GET', '/dashboards', { token: operator })).body.data.map((d: { id: string }) => d.id).sort();
    expect(list).toEqual([aliceBoard, shared].sort());
    expect((await agent.api('GET', `/dashboards/${bobBoard}`, { token: operator })).status).toBe(404);
    expect((await agent.api('DELETE', `/dashboards/${shared}`, { token: operator })).status).toBe(403);
    const all = (await agent.api('GET', '/dashboards')).body.data.map((d: { id: string }) => d.id).sort();
    expect(all).toEqual([aliceBoard, bobBoard, shared].sort());
  });

  it('removes the panels of a deleted deployment', async () => {
    const emitted = await agent.api('POST', '/test-fixture/emit', {
      body: { event: 'deployment.deleted', payload: { name: 'shop', removed_files: true, retired_as: 'shop~20240102030405' } },
    });
    expect(emitted.status).toBe(200);
    const panels = async (id: string) => ((await agent.api('GET', `/dashboards/${id}`)).body.data.panels as { id: string }[]).map((p) => p.id);
    const deadline = Date.now() + 5000;
    while ((await panels(shared)).includes('shop') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await panels(shared)).toEqual(['blog']);
    expect(await panels(aliceBoard)).toEqual(['all']);
    expect(await panels(bobBoard)).toEqual(['blog-cpu']);
  });
});
