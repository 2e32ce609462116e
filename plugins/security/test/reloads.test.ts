/**
 * nginx reloads per change, counted by a reload command that records each call: every security change that changes
 * what nginx enforces is one test and one reload (the edge renders the security plugin's snippets with the sites in
 * the same transaction), a change nginx does not see is none, and a deleted deployment's vhosts and rules go in one.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { hit, startNginx, type TestNginx } from '../../edge/test/helpers/nginx.js';
import { waitFor } from '../../edge/test/helpers/ports.js';
import { createDeployment, SECURITY_PLUGINS, uniqueName } from '../../edge/test/helpers/deployment.js';

describe('security: one nginx reload per change', () => {
  let nginx: TestNginx;
  let agent: TestAgent;
  let counter: string;
  const app = uniqueName('reloads');
  const host = `${app}.example.test`;
  const reloads = () => (existsSync(counter) ? readFileSync(counter, 'utf8').split('\n').filter(Boolean).length : 0);

  beforeAll(async () => {
    nginx = await startNginx();
    counter = join(nginx.prefix, 'reloads');
    const script = join(nginx.prefix, 'reload.sh');
    writeFileSync(script, `#!/bin/sh\necho reload >> ${counter}\nexec "$@"\n`);
    chmodSync(script, 0o755);
    const proxy = { ...nginx.proxyConfig, reload_command: [script, ...(nginx.proxyConfig.reload_command as string[])] };
    agent = await startAgent({ plugins: SECURITY_PLUGINS, config: { proxy } });
    await createDeployment(agent, app);
    const res = await agent.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', domain: host, container_port: 80 } });
    expect(res.status, res.text).toBe(201);
    await waitFor(async () => (await hit(nginx.httpPort, host, '/')).status === 200, 'site up');
  });

  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await nginx?.stop();
  });

  it('counts the reloads of every kind of change', async () => {
    const counted: [string, number][] = [];
    // A change is in force when its request is answered (the edge waits for the new workers): count right after.
    const step = async (label: string, fn: () => Promise<unknown>) => {
      const before = reloads();
      await fn();
      counted.push([label, reloads() - before]);
    };
    const ok = async (p: Promise<{ status: number; text: string; body: { data: { id: number } } }>) => {
      const r = await p;
      expect(r.status, r.text).toBeLessThan(300);
      return r.body.data;
    };
    let wl = { id: 0 };
    let route = { id: 0 };
    await step('block', () => ok(agent.api('POST', '/security/blocked-ips', { body: { ip: '127.0.0.21', reason: 'x' } })));
    await step('block for a deployment', () => ok(agent.api('POST', '/security/blocked-ips', { body: { ip: '127.0.0.22', reason: 'x', deployment: app } })));
    await step('unblock', () => ok(agent.api('DELETE', '/security/blocked-ips/127.0.0.21')));
    await step('whitelist add', async () => (wl = await ok(agent.api('POST', '/security/whitelist', { body: { type: 'ip', value: '127.0.0.30' } }))));
    await step('whitelist remove', () => ok(agent.api('DELETE', `/security/whitelist/${wl.id}`)));
    await step('protected route add', async () => {
      route = await ok(
        agent.api('POST', '/security/protected-routes', { body: { path: '/cgi-bin', method: 'ALL', auth_type: 'basic', credentials: 'a:b', deployment: app } }),
      );
    });
    await step('protected route disable', () => ok(agent.api('PUT', `/security/protected-routes/${route.id}`, { body: { enabled: false } })));
    await step('protected route remove (disabled: nginx has nothing of it)', () => ok(agent.api('DELETE', `/security/protected-routes/${route.id}`)));
    await step('deployment rules', () => ok(agent.api('PUT', `/deployments/${app}/security`, { body: { blocked_ips: ['127.0.0.23'] } })));
    await step('settings (not in nginx)', () => ok(agent.api('PUT', '/settings/security', { body: { auto_block: true, scan_threshold: 5 } })));
    await step('auto-block', async () => {
      for (let i = 0; i < 10; i++) await hit(nginx.httpPort, host, `/missing-${i}`, { localAddress: '127.0.0.24' });
      await waitFor(async () => (await hit(nginx.httpPort, host, '/', { localAddress: '127.0.0.24' })).status === 403, 'auto-blocked');
      // Any second reload (a second block of the same burst) would come right after the first.
      await new Promise((r) => setTimeout(r, 1500));
    });
    await step('refresh (forced)', () => ok(agent.api('POST', '/security/refresh')));
    // Stopped first: the vhost's upstream going away is a change of its own (the edge re-renders on lifecycle events).
    expect((await agent.api('POST', `/deployments/${app}/stop`)).status).toBe(200);
    await waitFor(async () => (await hit(nginx.httpPort, host, '/')).status === 503, 'upstream gone');
    await new Promise((r) => setTimeout(r, 1000));
    await step('deployment deleted (its vhost, blocks and rules)', async () => {
      expect((await agent.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } })).status).toBe(200);
      await waitFor(async () => (await hit(nginx.httpPort, host, '/')).status === 404, 'vhost gone');
      await new Promise((r) => setTimeout(r, 1000));
    });
    console.log(`nginx reloads per change: ${counted.map(([l, n]) => `${l}: ${n}`).join('; ')}`);
    expect(Object.fromEntries(counted)).toEqual({
      block: 1,
      'block for a deployment': 1,
      unblock: 1,
      'whitelist add': 1,
      'whitelist remove': 1,
      'protected route add': 1,
      'protected route disable': 1,
      'protected route remove (disabled: nginx has nothing of it)': 0,
      'deployment rules': 1,
      'settings (not in nginx)': 0,
      'auto-block': 1,
      'refresh (forced)': 1,
      'deployment deleted (its vhost, blocks and rules)': 1,
    });
    const rules = (await agent.api('GET', '/security/blocked-ips')).body.data.map((b: { ip: string }) => b.ip);
    expect(rules).not.toContain('127.0.0.22');
  });
});
