/**
 * `@agent/sdk/testing` itself: a plugin with a required and an optional dependency, both faked, in the kernel of
 * this process. The fakes are what the plugin receives; requests and websockets meet the kernel's checks for an
 * admin, a scoped user and a scoped key; the audit journal records them; a plugin that cannot start fails the
 * start with the kernel's reason; the data folder is a temporary one, removed at close.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceRef, definePlugin, errors, optional, Type } from '@agent/sdk';
import { startTestPlugin, type TestPlugin, type TestUser } from '@agent/sdk/testing';

interface Engine {
  containers(deployment: string): string[];
}
interface Notifier {
  send(text: string): Promise<void>;
}
const engineService = createServiceRef<Engine>('probe-test.engine');
const notifierService = createServiceRef<Notifier>('probe-test.notifier');

const Name = Type.Object({ name: Type.String({ pattern: '^[a-z]+$' }) });

const probe = definePlugin({
  name: 'probe',
  version: '0.0.0',
  resources: { probes: { description: 'probes of a deployment', owner: 'deployment' } },
  deps: { engine: engineService, notifier: optional(notifierService) },
  setup(ctx, { engine, notifier }) {
    ctx.route({
      method: 'GET',
      path: '/probe/:name/containers',
      permission: 'probes:read',
      deployment: 'name',
      operationId: 'probe.containers',
      summary: 'Containers of a deployment',
      params: Name,
      handler: (req) => engine.containers(req.params.name),
    });
    ctx.route({
      method: 'POST',
      path: '/probe/:name/notify',
      permission: 'probes:write',
      deployment: 'name',
      operationId: 'probe.notify',
      summary: 'Tell the notifier',
      params: Name,
      body: Type.Object({ text: Type.String() }),
      handler: async (req) => {
        if (!notifier) throw errors.unavailable('no notifier', 'NOTIFIER_UNAVAILABLE');
        await notifier.send(`${req.params.name}: ${req.body.text}`);
        return { sent: true };
      },
    });
    ctx.websocket({
      path: '/probe/:name/watch',
      permission: 'probes:read',
      deployment: 'name',
      summary: 'Containers of a deployment, then an echo of each message',
      params: Name,
      handler: async (conn, req) => {
        conn.onMessage((text) => void conn.send({ echo: text }));
        await conn.send({ containers: engine.containers(req.params.name), as: req.principal.id });
      },
    });
  },
});

describe('@agent/sdk/testing', () => {
  let agent: TestPlugin;
  const sent: string[] = [];
  const reader: TestUser = { user: 'rita', role: 'operator', deployments: { shop: 'read' } };

  beforeAll(async () => {
    agent = await startTestPlugin(probe, {
      deps: {
        engine: { containers: (name) => [`${name}-web-1`, `${name}-db-1`] },
        notifier: { send: async (text) => void sent.push(text) },
      },
    });
  });
  afterAll(async () => {
    await agent?.close();
  });

  it('hands the plugin its fakes, required and optional', async () => {
    expect((await agent.request('GET', '/probe/shop/containers')).body.data).toEqual(['shop-web-1', 'shop-db-1']);
    const res = await agent.request('POST', '/api/probe/shop/notify', { body: { text: 'hello' } });
    expect(res.status, res.text).toBe(200);
    expect(sent).toEqual(['shop: hello']);
  });

  it('checks permissions and deployments for users and keys', async () => {
    expect((await agent.request('GET', '/probe/shop/containers', { principal: reader })).status).toBe(200);
    // Another tenant's deployment does not exist for it; its own, it may read but not write.
    expect((await agent.request('GET', '/probe/blog/containers', { principal: reader })).status).toBe(404);
    expect((await agent.request('POST', '/probe/shop/notify', { principal: reader, body: { text: 'x' } })).status).toBe(403);
    const key = { key: 'ci', deployments: ['blog'] };
    expect((await agent.request('POST', '/probe/blog/notify', { principal: key, body: { text: 'from ci' } })).status).toBe(200);
    expect((await agent.request('GET', '/probe/shop/containers', { principal: key })).status).toBe(404);
    expect((await agent.request('GET', '/probe/shop/containers', { principal: 'anonymous' })).status).toBe(401);
    expect((await agent.request('GET', '/probe/shop/containers', { token: 'not-a-token' })).status).toBe(401);
    // Validation comes after the checks, and still holds.
    expect((await agent.request('GET', '/probe/Shop/containers')).body.code).toBe('VALIDATION_FAILED');
    expect(sent).toEqual(['shop: hello', 'blog: from ci']);
  });

  it('makes each principal once, under its name', async () => {
    const rita = await agent.principal(reader);
    expect(rita.id).toMatch(/^user:\d+$/);
    expect(await agent.principal({ ...reader })).toEqual(rita);
    await expect(agent.principal({ user: 'rita', role: 'viewer' })).rejects.toThrow(/user:rita was made as/);
    expect((await agent.principal({ key: 'ci', deployments: ['blog'] })).id).toMatch(/^api_key:\d+$/);
  });

  it('has the kernel audit every change, refused ones included', async () => {
    const { id } = await agent.principal(reader);
    const events = (await agent.request('GET', '/audit/events', { query: { action: 'probe.notify' } })).body.data;
    // Newest first: the key's, the reader's refusal, the admin's.
    expect(events.map((e: Record<string, unknown>) => [e.actor_id === id ? 'rita' : e.actor_type, e.status, e.success])).toEqual([
      ['api_key', 200, true],
      ['rita', 403, false],
      ['user', 200, true],
    ]);
    expect(events.filter((e: { success: boolean }) => e.success).map((e: { deployment: string }) => e.deployment)).toEqual(['blog', 'shop']);
  });

  it('opens websockets with the credential as their first message', async () => {
    const ws = await agent.websocket('/probe/shop/watch', { principal: reader });
    expect(await ws.next()).toEqual({ type: 'ready' });
    expect(await ws.next()).toEqual({ containers: ['shop-web-1', 'shop-db-1'], as: (await agent.principal(reader)).id });
    ws.send('ping');
    expect(await ws.next()).toEqual({ echo: 'ping' });
    ws.close();
    expect((await ws.closed).code).toBe(1005);
    const foreign = await agent.websocket('/probe/blog/watch', { principal: reader });
    expect(await foreign.closed).toMatchObject({ code: 1008, reason: expect.stringContaining('NOT_FOUND') });
    const anonymous = await agent.websocket('/probe/shop/watch', { principal: 'anonymous' });
    expect((await anonymous.closed).code).toBe(1008);
  });

  it('keeps its data in a temporary folder, removed at close', async () => {
    expect(agent.dataDir.startsWith(tmpdir())).toBe(true);
    expect(existsSync(agent.dataDir)).toBe(true);
    const other = await startTestPlugin(probe, { deps: { engine: { containers: () => [] } } });
    // Without the optional notifier the plugin runs, and says so.
    expect((await other.request('POST', '/probe/shop/notify', { body: { text: 'x' } })).body.code).toBe('NOTIFIER_UNAVAILABLE');
    await other.close();
    expect(existsSync(other.dataDir)).toBe(false);
  });

  it('fails the start with the kernel reason when the plugin cannot start', async () => {
    await expect(startTestPlugin(probe)).rejects.toThrow("probe: requires service 'probe-test.engine', which no enabled plugin provides");
    await expect(startTestPlugin(probe, { deps: { docker: {} } as never })).rejects.toThrow("deps.docker: plugin 'probe' declares no dependency 'docker'");
    const failing = definePlugin({
      name: 'failing',
      version: '0.0.0',
      setup: () => {
        throw new Error('cannot set up');
      },
    });
    await expect(startTestPlugin(failing)).rejects.toThrow('failing: setup failed: cannot set up');
    // `access` is always loaded from the built-in plugins: another of the name would be ignored, and the test with it.
    const access = definePlugin({ name: 'access', version: '0.0.0', setup: () => undefined });
    await expect(startTestPlugin(access)).rejects.toThrow('access: not loaded, a plugin of that name was (the built-in)');
  });
});
