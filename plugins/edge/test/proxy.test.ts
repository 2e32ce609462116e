import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { hit, startNginx, type TestNginx } from './helpers/nginx.js';
import { waitFor } from './helpers/ports.js';
import { createDeployment, EDGE_PLUGINS, uniqueName } from './helpers/deployment.js';

/** Every file the agent generated, to prove that a refused change left them untouched. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) out[join(e.parentPath, e.name)] = readFileSync(join(e.parentPath, e.name), 'utf8');
  }
  return out;
}

describe('edge: domains and the nginx reverse proxy', () => {
  let nginx: TestNginx;
  let agent: TestAgent;
  const app = uniqueName('edge-web');
  const other = uniqueName('edge-other');
  const host = `${app}.example.test`;
  let rootId = 0;

  beforeAll(async () => {
    nginx = await startNginx();
    agent = await startAgent({ plugins: EDGE_PLUGINS, config: { proxy: nginx.proxyConfig } });
    await createDeployment(agent, app);
    await createDeployment(agent, other);
  });

  afterAll(async () => {
    for (const name of [app, other]) await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await nginx?.stop();
  });

  const get = (h: string, path = '/', opts = {}) => hit(nginx.httpPort, h, path, opts);

  it('routes a domain to the service container', async () => {
    // The initial configuration is applied in the background at start: the default server answers 404.
    await waitFor(async () => (await get(host)).status === 404, 'default server');
    const res = await agent.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', domain: host, container_port: 80 } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({
      domain: host,
      path_prefix: '/',
      strip_prefix: false,
      ssl: { enabled: false },
      upstream: expect.stringMatching(/:80$/),
    });
    rootId = res.body.data.id;
    const page = await waitFor(async () => {
      const r = await get(host);
      return r.status === 200 && r;
    }, 'proxied 200');
    expect(page.body).toContain('hello from agent-test/busybox');
    const env = await get(host, '/cgi-bin/env', { headers: { upgrade: 'websocket', connection: 'Upgrade' } });
    expect(env.body).toContain('HTTP_X_FORWARDED_PROTO=http');
    expect(env.body).toContain(`HTTP_X_FORWARDED_HOST=${host}`);
    expect(env.body).toContain('HTTP_X_FORWARDED_FOR=127.0.0.1');
    expect(env.body).toContain('HTTP_UPGRADE=websocket');
  });

  it('strips a path prefix and serves aliases', async () => {
    const res = await agent.api('POST', `/deployments/${app}/domains`, {
      body: { service: 'web', domain: host, container_port: 80, path_prefix: '/api/', strip_prefix: true },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.path_prefix).toBe('/api');
    const env = await waitFor(async () => {
      const r = await get(host, '/api/cgi-bin/env?x=1');
      return r.status === 200 && r;
    }, 'prefixed route');
    expect(env.body).toContain('REQUEST_URI=/cgi-bin/env?x=1');
    expect(env.body).toContain('HTTP_X_FORWARDED_PREFIX=/api');
    expect((await get(host, '/api')).status).toBe(200);

    const alias = `www.${host}`;
    const upd = await agent.api('PUT', `/deployments/${app}/domains/${rootId}`, { body: { aliases: [alias] } });
    expect(upd.status, upd.text).toBe(200);
    expect(upd.body.data.aliases).toEqual([alias]);
    await waitFor(async () => (await get(alias, '/sub/')).body.includes('sub page'), 'alias');
    const vhosts = await agent.api('GET', '/proxy/vhosts');
    expect(vhosts.body.data).toEqual([expect.objectContaining({ domain: host, deployment: app, server_names: [host, alias], https: false })]);
    expect(vhosts.body.data[0].routes).toHaveLength(2);
  });

  it('previews a domain change as an nginx config diff and changes nothing', async () => {
    const planned = `plan-${host}`;
    const before = snapshot(nginx.configDir);
    const res = await agent.api('POST', `/deployments/${app}/domains`, {
      query: { plan: true },
      body: { service: 'web', domain: planned, container_port: 80 },
    });
    expect(res.status, res.text).toBe(201);
    const change = res.body.data.changes[0];
    expect(change).toMatchObject({ type: 'domain', id: planned, actions: ['create'] });
    expect(change.diff).toContain(`+++ b/sites/${planned}.conf`);
    expect(change.diff).toContain(`+    server_name ${planned};`);
    expect(snapshot(nginx.configDir)).toEqual(before);
    const applied = await agent.api('POST', `/plans/${res.body.data.id}/apply`);
    expect(applied.status, applied.text).toBeLessThan(300);
    await waitFor(async () => (await get(planned)).status === 200, 'planned domain');
    const list = await agent.api('GET', `/deployments/${app}/domains`);
    const id = list.body.data.find((d: { domain: string }) => d.domain === planned).id;
    expect((await agent.api('DELETE', `/deployments/${app}/domains/${id}`)).status).toBe(200);
    await waitFor(async () => (await get(planned)).status === 404, 'planned domain removed');
  });

  it('follows the container through a stop and a start (upstream re-resolved on lifecycle events)', async () => {
    expect((await agent.api('POST', `/deployments/${app}/stop`)).status).toBeLessThan(300);
    await waitFor(async () => (await get(host)).status === 503, 'stopped service answers 503', 20_000);
    expect((await agent.api('POST', `/deployments/${app}/start`)).status).toBeLessThan(300);
    await waitFor(async () => (await get(host)).status === 200, 'started service answers 200', 20_000);
  });

  it('refuses a domain claimed by another deployment and duplicates', async () => {
    const claimed = await agent.api('POST', `/deployments/${other}/domains`, { body: { service: 'web', domain: host, container_port: 80 } });
    expect(claimed.status).toBe(409);
    expect(claimed.body.code).toBe('DOMAIN_CLAIMED');
    const alias = await agent.api('POST', `/deployments/${other}/domains`, {
      body: { service: 'web', domain: `x.${host}`, container_port: 80, aliases: [`www.${host}`] },
    });
    expect(alias.status).toBe(409);
    const dup = await agent.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', domain: host, container_port: 8080 } });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('DOMAIN_EXISTS');
  });

  it('answers 400 for bad input and leaves the configuration unchanged', async () => {
    const before = snapshot(nginx.configDir);
    const bad: Record<string, unknown>[] = [
      { domain: 'evil.test;', container_port: 80 },
      { domain: 'evil.test}', container_port: 80 },
      { domain: 'Evil.Test', container_port: 80 },
      { domain: 'evil.test\nserver_name x', container_port: 80 },
      { domain: 'no-dot', container_port: 80 },
      { domain: 'ok.test', container_port: 80, path_prefix: '/a/../b' },
      { domain: 'ok.test', container_port: 80, path_prefix: '/a;b' },
      { domain: 'ok.test', container_port: 80, path_prefix: '/a"b' },
      { domain: 'ok.test', container_port: 80, path_prefix: 'relative' },
      { domain: 'ok.test', container_port: 80, aliases: ['x.test}'] },
      { domain: 'ok.test', container_port: 80, aliases: ["x.test'"] },
      { domain: 'ok.test', container_port: 70000 },
      { domain: 'ok.test', container_port: 80, service: 'web;' },
      { domain: 'ok.test', container_port: 80, service: 'nosuchservice' },
      { domain: 'ok.test', container_port: 80, unknown: true },
    ];
    for (const body of bad) {
      const res = await agent.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', ...body } });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect((await agent.api('POST', '/deployments/no-such-dep/domains', { body: { service: 'web', domain: 'x.test', container_port: 80 } })).status).toBe(404);
    expect(snapshot(nginx.configDir)).toEqual(before);
  });

  it("restores the previous files and answers with nginx's message when the test fails", async () => {
    const before = snapshot(nginx.configDir);
    const broken = join(nginx.prefix, 'extra', 'broken.conf');
    writeFileSync(broken, 'this_is_not_a_directive on;\n');
    try {
      const res = await agent.api('POST', `/deployments/${other}/domains`, { body: { service: 'web', domain: `other.${app}.test`, container_port: 80 } });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('PROXY_CONFIG_INVALID');
      expect(res.body.error).toContain('unknown directive "this_is_not_a_directive"');
    } finally {
      rmSync(broken);
    }
    expect(snapshot(nginx.configDir)).toEqual(before);
    expect((await agent.api('GET', `/deployments/${other}/domains`)).body.data).toEqual([]);
  });

  it('reports the proxy status, sets up with the shorthand and removes a deployment', async () => {
    const setupHost = `setup.${other}.test`;
    const setup = await agent.api('POST', `/proxy/setup/${other}`, { body: { domain: setupHost, port: 80, ssl: false } });
    expect(setup.status, setup.text).toBe(201);
    await waitFor(async () => (await get(setupHost)).status === 200, 'setup domain');
    const status = await agent.api('GET', `/proxy/status/${other}`);
    expect(status.status, status.text).toBe(200);
    expect(status.body.data).toMatchObject({ deployment: other, configured: true, nginx: { config_valid: true } });
    expect(status.body.data.domains[0]).toMatchObject({ domain: setupHost, vhost_present: true, https: false });
    const del = await agent.api('DELETE', `/proxy/${other}`);
    expect(del.body.data).toEqual({ removed: 1 });
    await waitFor(async () => (await get(setupHost)).status === 404, 'removed setup domain');
    // Nothing left to remove: 404, and nginx is not asked to reload.
    const again = await agent.api('DELETE', `/proxy/${other}`);
    expect(again.status, again.text).toBe(404);
    expect(again.body).toEqual({ error: `deployment '${other}' has no proxy configuration`, code: 'NOT_FOUND' });
  });

  it('removes the vhosts of a deleted deployment', async () => {
    const res = await agent.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } });
    expect(res.status, res.text).toBeLessThan(300);
    await waitFor(async () => (await agent.api('GET', '/proxy/vhosts')).body.data.length === 0, 'vhosts removed');
    await waitFor(async () => (await get(host)).status === 404, 'domain no longer served');
    expect(readdirSync(join(nginx.configDir, 'sites'))).toEqual([]);
  });
});
