import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import WebSocket from 'ws';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { hit, startNginx, type TestNginx } from '../../edge/test/helpers/nginx.js';
import { waitFor } from '../../edge/test/helpers/ports.js';
import { createDeployment, SECURITY_PLUGINS, uniqueName } from '../../edge/test/helpers/deployment.js';

const basic = (user: string, pass: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` });

describe('edge: security enforced in nginx, traffic journal and security events', () => {
  let nginx: TestNginx;
  let agent: TestAgent;
  const app = uniqueName('edge-sec');
  const host = `${app}.example.test`;

  beforeAll(async () => {
    nginx = await startNginx();
    agent = await startAgent({ plugins: SECURITY_PLUGINS, config: { proxy: nginx.proxyConfig } });
    await createDeployment(agent, app);
    const res = await agent.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', domain: host, container_port: 80 } });
    expect(res.status, res.text).toBe(201);
    await waitFor(async () => (await get('/')).status === 200, 'site up');
  });

  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await nginx?.stop();
  });

  const get = (path: string, opts: { localAddress?: string; headers?: Record<string, string>; method?: string } = {}) => hit(nginx.httpPort, host, path, opts);
  const from = (ip: string) => ({ localAddress: ip });

  it('blocks an address with 403 and the whitelist overrides the block', async () => {
    const res = await agent.api('POST', '/security/blocked-ips', { body: { ip: '127.0.0.5', reason: 'test block' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ ip: '127.0.0.5', reason: 'test block', expires_at: null, auto: false });
    await waitFor(async () => (await get('/', from('127.0.0.5'))).status === 403, 'blocked');
    expect((await get('/', from('127.0.0.1'))).status).toBe(200);

    const wl = await agent.api('POST', '/security/whitelist', { body: { type: 'cidr', value: '127.0.0.0/29', description: 'loopback' } });
    expect(wl.status, wl.text).toBe(201);
    await waitFor(async () => (await get('/', from('127.0.0.5'))).status === 200, 'whitelisted range');
    expect((await agent.api('DELETE', `/security/whitelist/${wl.body.data.id}`)).status).toBe(200);
    await waitFor(async () => (await get('/', from('127.0.0.5'))).status === 403, 'blocked again');

    const path = await agent.api('POST', '/security/whitelist', { body: { type: 'path', value: '/sub', description: 'public' } });
    expect(path.status, path.text).toBe(201);
    await waitFor(async () => (await get('/sub/', from('127.0.0.5'))).status === 200, 'whitelisted path');
    expect((await get('/', from('127.0.0.5'))).status).toBe(403);
    await agent.api('DELETE', `/security/whitelist/${path.body.data.id}`);

    expect((await agent.api('GET', '/security/blocked-ips')).body.data.map((b: { ip: string }) => b.ip)).toContain('127.0.0.5');
    expect((await agent.api('DELETE', '/security/blocked-ips/127.0.0.5')).status).toBe(200);
    await waitFor(async () => (await get('/', from('127.0.0.5'))).status === 200, 'unblocked');
    expect((await agent.api('DELETE', '/security/blocked-ips/127.0.0.5')).status).toBe(404);
  });

  it('lifts a block when its duration expires', async () => {
    const res = await agent.api('POST', '/security/blocked-ips', { body: { ip: '127.0.0.6', reason: 'short', duration: 2 } });
    expect(res.status).toBe(201);
    expect(res.body.data.expires_at).not.toBeNull();
    await waitFor(async () => (await get('/', from('127.0.0.6'))).status === 403, 'short block');
    const listed = async () => (await agent.api('GET', '/security/blocked-ips')).body.data.some((b: { ip: string }) => b.ip === '127.0.0.6');
    // The block leaves the list when it expires, and nginx lets the address through again. (A 200 alone is no proof:
    // right after a reload, an old nginx worker that has not yet seen the signal may still answer one request.)
    await waitFor(async () => !(await listed()), 'block expired', 10_000, 200);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(res.body.data.expires_at));
    await waitFor(async () => (await get('/', from('127.0.0.6'))).status === 200, 'block lifted', 10_000, 200);
  });

  it('protects a route with basic authentication (hashed credentials)', async () => {
    const res = await agent.api('POST', '/security/protected-routes', {
      body: { path: '/cgi-bin', method: 'ALL', auth_type: 'basic', credentials: 'admin:s3cret-pass', deployment: app },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ path: '/cgi-bin', method: 'ALL', username: 'admin', deployment: app, enabled: true });
    expect(res.text).not.toContain('s3cret');
    await waitFor(async () => (await get('/cgi-bin/env')).status === 401, 'protected');
    expect((await get('/cgi-bin/env', { headers: basic('admin', 'wrong') })).status).toBe(401);
    const ok = await get('/cgi-bin/env', { headers: basic('admin', 's3cret-pass') });
    expect(ok.status).toBe(200);
    expect(ok.body).toContain('REQUEST_URI=/cgi-bin/env');
    expect((await get('/')).status).toBe(200);
    const files = readdirSync(join(nginx.configDir, 'security', 'htpasswd'));
    const htpasswd = readFileSync(join(nginx.configDir, 'security', 'htpasswd', files[0]!), 'utf8');
    expect(htpasswd).toMatch(/^admin:\$2[aby]\$/);
    expect(htpasswd).not.toContain('s3cret');
    const list = await agent.api('GET', '/security/protected-routes');
    expect(list.text).not.toContain('password');

    // Method-specific: only POST needs credentials.
    const post = await agent.api('POST', '/security/protected-routes', {
      body: { path: '/sub', method: 'POST', auth_type: 'basic', credentials: 'poster:pw-123', deployment: app },
    });
    expect(post.status, post.text).toBe(201);
    await waitFor(async () => (await get('/sub/', { method: 'POST' })).status === 401, 'POST protected');
    expect((await get('/sub/')).status).toBe(200);
    const dup = await agent.api('POST', '/security/protected-routes', {
      body: { path: '/sub', method: 'ALL', auth_type: 'basic', credentials: 'x:y', deployment: app },
    });
    expect(dup.status).toBe(409);
    const upd = await agent.api('PUT', `/security/protected-routes/${post.body.data.id}`, { body: { enabled: false } });
    expect(upd.status, upd.text).toBe(200);
    await waitFor(async () => (await get('/sub/', { method: 'POST' })).status !== 401, 'POST open again');
    expect((await agent.api('DELETE', `/security/protected-routes/${post.body.data.id}`)).status).toBe(200);
  });

  it('answers 400 for bad security input and leaves nginx files unchanged', async () => {
    const before = readFileSync(join(nginx.configDir, 'security', 'http.conf'), 'utf8');
    const bad: [string, string, Record<string, unknown>][] = [
      ['POST', '/security/blocked-ips', { ip: '1.2.3.999', reason: 'x' }],
      ['POST', '/security/blocked-ips', { ip: '1.2.3.4; deny all', reason: 'x' }],
      ['POST', '/security/blocked-ips', { ip: '10.0.0.0/33', reason: 'x' }],
      ['POST', '/security/blocked-ips', { ip: '1.2.3.4', reason: 'line\nbreak' }],
      ['POST', '/security/whitelist', { type: 'ip', value: '300.1.1.1' }],
      ['POST', '/security/whitelist', { type: 'cidr', value: '10.0.0.1' }],
      ['POST', '/security/whitelist', { type: 'path', value: '/a/../b' }],
      ['POST', '/security/whitelist', { type: 'path', value: '/a"}' }],
      ['POST', '/security/whitelist', { type: 'host', value: 'x' }],
      ['POST', '/security/protected-routes', { path: '/x;', method: 'ALL', auth_type: 'basic', credentials: 'a:b', deployment: app }],
      ['POST', '/security/protected-routes', { path: '/x', method: 'ALL', auth_type: 'basic', credentials: 'nopassword', deployment: app }],
      ['POST', '/security/protected-routes', { path: '/x', method: 'ALL', auth_type: 'basic', credentials: 'us}er:pw', deployment: app }],
      ['POST', '/security/protected-routes', { path: '/x', method: 'TRACE', auth_type: 'basic', credentials: 'a:b', deployment: app }],
      ['POST', '/security/protected-routes', { path: '/x', method: 'ALL', auth_type: 'digest', credentials: 'a:b', deployment: app }],
      ['PUT', `/deployments/${app}/security`, { blocked_ips: ['not-an-ip'] }],
      ['PUT', `/deployments/${app}/security`, { protected_paths: [{ pattern: '/a b', enabled: true }] }],
      ['PUT', `/deployments/${app}/security`, { rate_limits: [{ path: '/', rate: 0, burst: 1, enabled: true }] }],
    ];
    for (const [method, path, body] of bad) {
      const res = await agent.api(method, path, { body });
      expect(res.status, `${path} ${JSON.stringify(body)}: ${res.text}`).toBe(400);
    }
    expect(readFileSync(join(nginx.configDir, 'security', 'http.conf'), 'utf8')).toBe(before);
  });

  it('enforces per-deployment security settings', async () => {
    const res = await agent.api('PUT', `/deployments/${app}/security`, {
      body: {
        enabled: true,
        blocked_ips: ['127.0.0.7'],
        protected_paths: [{ pattern: '/sub', enabled: true }],
        rate_limits: [{ path: '/cgi-bin', rate: 1, burst: 0, enabled: true }],
      },
    });
    expect(res.status, res.text).toBe(200);
    await waitFor(async () => (await get('/', from('127.0.0.7'))).status === 403, 'deployment block');
    expect((await get('/', from('127.0.0.1'))).status).toBe(200);
    expect((await get('/sub/')).status).toBe(403);
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await get('/cgi-bin/env', { headers: basic('admin', 's3cret-pass') })).status);
    expect(statuses).toContain(429);
    expect((await agent.api('GET', `/deployments/${app}/security`)).body.data.blocked_ips).toEqual(['127.0.0.7']);
    const off = await agent.api('PUT', `/deployments/${app}/security`, { body: { enabled: false } });
    expect(off.status).toBe(200);
    await waitFor(async () => (await get('/', from('127.0.0.7'))).status === 200, 'deployment rules off');
    // Every rule is gone, not only the block: an old nginx worker may still answer with the previous rules.
    await waitFor(async () => (await get('/sub/')).status === 200, 'protected path off');
  });

  it('records every proxied request in the traffic journal within 2 s, with filters', async () => {
    const marker = `/sub/?trace=${Date.now()}`;
    const started = Date.now();
    await get(marker, { ...from('127.0.0.3'), headers: { 'user-agent': 'edge-test/1' } });
    const found = await waitFor(
      async () => {
        const r = await agent.api('GET', '/traffic/logs', { query: { source_ip: '127.0.0.3', path: 'trace=' } });
        return r.body.data.length > 0 && r;
      },
      'traffic record',
      5000,
      50,
    );
    expect(Date.now() - started).toBeLessThan(2000);
    expect(found.body.data[0]).toMatchObject({
      deployment: app,
      host,
      method: 'GET',
      path: marker,
      status: 200,
      source_ip: '127.0.0.3',
      user_agent: 'edge-test/1',
    });
    expect(found.body.meta).toMatchObject({ total: 1, limit: 100, offset: 0 });
    const filtered = await agent.api('GET', '/traffic/logs', { query: { deployment: app, status_group: '2xx', method: 'GET', limit: 2 } });
    expect(filtered.body.data).toHaveLength(2);
    expect(filtered.body.meta.limit).toBe(2);
    expect((await agent.api('GET', '/traffic/logs', { query: { status_code: 403, source_ip: '127.0.0.5' } })).body.data.length).toBeGreaterThan(0);
    expect((await agent.api('GET', '/traffic/logs', { query: { path: '/sub/*trace=*' } })).body.data.length).toBeGreaterThan(0);
    expect((await agent.api('GET', '/traffic/logs', { query: { limit: 1001 } })).status).toBe(400);
    expect((await agent.api('GET', '/traffic/logs', { query: { start_time: 'yesterday' } })).status).toBe(400);
    expect((await agent.api('GET', '/traffic/logs', { query: { start_time: new Date(Date.now() + 60_000).toISOString() } })).body.data).toEqual([]);

    await hit(nginx.httpPort, 'nobody-owns.example.test', '/');
    const unknown = await waitFor(async () => {
      const r = await agent.api('GET', '/traffic/unknown-domains');
      return r.body.data.some((d: { host: string }) => d.host === 'nobody-owns.example.test') && r;
    }, 'unknown domain');
    expect(unknown.status).toBe(200);

    const stats = await agent.api('GET', '/traffic/stats');
    expect(stats.status, stats.text).toBe(200);
    const mine = stats.body.data.deployments.find((d: { deployment: string }) => d.deployment === app);
    expect(mine.requests).toBeGreaterThan(5);
    expect(mine.status['2xx']).toBeGreaterThan(0);
    expect(mine.status['4xx']).toBeGreaterThan(0);
    expect(typeof mine.p95_ms).toBe('number');
    const dep = await agent.api('GET', `/deployments/${app}/traffic`, { query: { since: '1h' } });
    expect(dep.status, dep.text).toBe(200);
    expect(dep.body.data.requests).toBe(mine.requests);
  });

  it('scans a missing-path burst into an event and an automatic block', async () => {
    const set = await agent.api('PUT', '/settings/security', { body: { auto_block: true, scan_threshold: 20, auto_block_duration: 600 } });
    expect(set.status, set.text).toBe(200);
    expect(set.body.data).toMatchObject({ auto_block: true, scan_threshold: 20 });
    for (let i = 0; i < 50; i++) await get(`/missing-${i}.php`, from('127.0.0.9'));
    const ev = await waitFor(async () => {
      const r = await agent.api('GET', '/security/events', { query: { type: 'scan', source_ip: '127.0.0.9' } });
      return r.body.data.length > 0 && r;
    }, 'scan event');
    expect(ev.body.data[0]).toMatchObject({ type: 'scan', severity: 'medium', source_ip: '127.0.0.9', deployment: app });
    const blocked = await waitFor(async () => {
      const r = await agent.api('GET', '/security/blocked-ips');
      return r.body.data.find((b: { ip: string }) => b.ip === '127.0.0.9');
    }, 'auto block');
    expect(blocked).toMatchObject({ auto: true, reason: expect.stringContaining('scan') });
    await waitFor(async () => (await get('/', from('127.0.0.9'))).status === 403, 'auto-blocked in nginx');
    // The event is marked once the block is in force (just after it shows in the list).
    await waitFor(async () => (await agent.api('GET', `/security/events/${ev.body.data[0].id}`)).body.data.auto_blocked === true, 'event marked auto-blocked');
    const byIp = await agent.api('GET', '/security/ips/127.0.0.9/events');
    expect(byIp.body.meta).toMatchObject({ blocked: true });
    await waitFor(async () => {
      const r = await agent.api('GET', '/security/events', { query: { type: 'blocked_ip_hit', source_ip: '127.0.0.9' } });
      return r.body.data.length > 0;
    }, 'blocked-ip hit event');
    await agent.api('DELETE', '/security/blocked-ips/127.0.0.9');
  });

  it('detects attack paths and repeated authentication failures', async () => {
    await agent.api('PUT', '/settings/security', { body: { auto_block: false } });
    await get('/.env', from('127.0.0.10'));
    for (let i = 0; i < 6; i++) await get('/cgi-bin/env', { ...from('127.0.0.11'), headers: basic('admin', `guess-${i}`) });
    await waitFor(
      async () => (await agent.api('GET', '/security/events', { query: { type: 'attack_path', source_ip: '127.0.0.10' } })).body.data.length === 1,
      'attack path event',
    );
    const auth = await waitFor(async () => {
      const r = await agent.api('GET', '/security/events', { query: { type: 'auth_failure', source_ip: '127.0.0.11' } });
      return r.body.data.length > 0 && r;
    }, 'auth failure event');
    expect(auth.body.data[0]).toMatchObject({ severity: 'high', details: expect.objectContaining({ user: 'admin' }) });
    expect((await agent.api('GET', '/security/blocked-ips')).body.data.map((b: { ip: string }) => b.ip)).not.toContain('127.0.0.11');
    const stats = await agent.api('GET', '/security/stats');
    expect(stats.status, stats.text).toBe(200);
    expect(stats.body.data.events.by_type).toMatchObject({ scan: 1, attack_path: 1, auth_failure: 1 });
    expect(stats.body.data.events.total).toBeGreaterThanOrEqual(4);
    const page = await agent.api('GET', '/security/events', { query: { limit: 2 } });
    expect(page.body.data).toHaveLength(2);
    expect(page.body.meta).toMatchObject({ limit: 2, offset: 0 });
  });

  it('switches between real-time capture and the periodic scan', async () => {
    expect((await agent.api('GET', '/security/realtime-capture')).body.data).toMatchObject({ enabled: true, mode: 'realtime' });
    const off = await agent.api('PUT', '/security/realtime-capture', { body: { enabled: false } });
    expect(off.body.data).toMatchObject({ enabled: false, mode: 'periodic' });
    const marker = `/?periodic=${Date.now()}`;
    await get(marker, from('127.0.0.12'));
    await new Promise((r) => setTimeout(r, 1500));
    expect((await agent.api('GET', '/traffic/logs', { query: { path: 'periodic=' } })).body.data).toEqual([]);
    // The refresh (like the periodic job) reads what accumulated.
    const refresh = await agent.api('POST', '/security/refresh');
    expect(refresh.status, refresh.text).toBe(200);
    expect(refresh.body.data).toMatchObject({ reloaded: true, errors: [] });
    expect((await agent.api('GET', '/traffic/logs', { query: { path: 'periodic=' } })).body.data).toHaveLength(1);
    await agent.api('PUT', '/security/realtime-capture', { body: { enabled: true } });
    const again = `/?realtime=${Date.now()}`;
    await get(again, from('127.0.0.12'));
    await waitFor(async () => (await agent.api('GET', '/traffic/logs', { query: { path: 'realtime=' } })).body.data.length === 1, 'real-time again', 2000, 50);
  });

  it('reads and follows the system logs', async () => {
    const infra = uniqueName('edge-infra');
    execFileSync('docker', [
      'run',
      '-d',
      '--name',
      infra,
      '--label',
      'agent.test=1',
      '--label',
      'agent.infrastructure=cache',
      'agent-test/busybox:latest',
      'sh',
      '-c',
      'echo infra-ready; exec sleep 3600',
    ]);
    try {
      const sources = await agent.api('GET', '/system/logs/sources');
      expect(sources.status, sources.text).toBe(200);
      const ids = sources.body.data.map((s: { id: string }) => s.id);
      expect(ids).toEqual(expect.arrayContaining(['proxy-access', 'proxy-error', `container:${infra}`]));
      expect(sources.body.data.find((s: { id: string }) => s.id === 'proxy-access')).toMatchObject({ type: 'file', available: true });
      const container = await waitFor(async () => {
        const r = await agent.api('GET', '/system/logs', { query: { source: `container:${infra}` } });
        return r.body.data.some((l: { line: string }) => l.line === 'infra-ready') && r;
      }, 'container log');
      expect(container.body.data[0].time).toMatch(/^\d{4}-/);

      await get('/?syslog-marker=1');
      const access = await waitFor(async () => {
        const r = await agent.api('GET', '/system/logs', { query: { source: 'proxy-access', tail: 5, filter: 'syslog-marker', deployment: app } });
        return r.body.data.length === 1 && r;
      }, 'access line');
      expect(JSON.parse(access.body.data[0].line)).toMatchObject({ deployment: app, host, path: '/?syslog-marker=1' });
      const limited = await agent.api('GET', '/system/logs', { query: { source: 'proxy-access', tail: 3 } });
      expect(limited.body.data).toHaveLength(3);
      expect((await agent.api('GET', '/system/logs', { query: { source: 'proxy-error', tail: 0 } })).status).toBe(200);
      expect((await agent.api('GET', '/system/logs', { query: { source: '../etc/passwd' } })).status).toBe(400);
      expect((await agent.api('GET', '/system/logs', { query: { source: 'nope' } })).status).toBe(404);

      // Websocket: token first, then the tail, then lines as nginx writes them.
      const ws = new WebSocket(`${agent.url.replace('http', 'ws')}/api/system/logs/stream?source=proxy-access&tail=1&filter=ws-marker`);
      const messages: { type?: string; line?: string }[] = [];
      ws.on('message', (m) => messages.push(JSON.parse(m.toString())));
      await new Promise((r) => ws.once('open', r));
      ws.send(agent.token);
      await waitFor(async () => messages.some((m) => m.type === 'ready'), 'ready');
      await get('/?ws-marker=live');
      await waitFor(async () => messages.some((m) => m.line?.includes('ws-marker=live')), 'streamed line', 5000, 50);
      ws.close();
    } finally {
      execFileSync('docker', ['rm', '-f', infra], { stdio: 'ignore' });
    }
  });

  it('cleans up old events and traffic', async () => {
    expect((await agent.api('POST', '/security/cleanup', { body: { older_than: 3600 } })).body.data).toEqual({ events_deleted: 0 });
    const all = await agent.api('POST', '/security/cleanup', { body: { older_than: 0 } });
    expect(all.body.data.events_deleted).toBeGreaterThan(0);
    expect((await agent.api('GET', '/security/events')).body.data).toEqual([]);
    const t = await agent.api('POST', '/traffic/cleanup', { body: { older_than: 0 } });
    expect(t.body.data.deleted).toBeGreaterThan(0);
    expect((await agent.api('GET', '/traffic/logs')).body.meta.total).toBe(0);
  });
});
