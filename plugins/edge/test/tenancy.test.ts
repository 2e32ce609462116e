/**
 * Tenancy of the edge (issue #14), against a real nginx and a real ACME server (pebble): two tenants, each a
 * scoped operator user (grants on one deployment) and a scoped key (a `deployments` list), with domains,
 * certificates, traffic, security events, protected routes and blocks of their own. Each tenant's principals:
 * - see only their own deployment's records in every list, stats and total, and nothing of the other tenant or
 *   of no deployment (unknown hosts, global blocks, names no deployment uses);
 * - get 404 (or 403 GLOBAL_SCOPE_REQUIRED where the target is indistinguishable from global state) for the other
 *   tenant's resources by name and id, with the other deployment's name nowhere in the answer;
 * - are refused (403 GLOBAL_SCOPE_REQUIRED) every global write (block 0.0.0.0/0, whitelist '/', capture, settings,
 *   refresh, cleanups, renewal of all).
 * A global operator still does all of it. Deleting a deployment keeps its traffic and events under the retired
 * name: a new deployment of that name starts with none, its tenant sees none, global principals still read them.
 */
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { hit, startNginx, type TestNginx } from './helpers/nginx.js';
import { startPebble, type TestPebble } from './helpers/pebble.js';
import { waitFor } from './helpers/ports.js';
import { createDeployment, SECURITY_PLUGINS, uniqueName } from './helpers/deployment.js';

const PASS = 'Tenant-Edge-Pass-1!';

interface Tenant {
  label: string;
  deployment: string;
  host: string;
  /** The scoped user, then the scoped key. */
  principals: { name: string; token: string }[];
  userId: number;
  userToken: string;
}

type Row = { deployment: string | null; [k: string]: unknown };

describe('edge: tenancy of domains, certificates, security, traffic and system logs', () => {
  let nginx: TestNginx;
  let pebble: TestPebble;
  let agent: TestAgent;
  let a: Tenant;
  let b: Tenant;
  let globalOp: string;
  const free = `${uniqueName('free')}.example.test`;
  const unknownHost = `${uniqueName('nobody')}.example.test`;
  /** Every deployment the file creates, removed in afterAll even when the setup stopped half-way. */
  const created: string[] = [];
  const deploy = async (name: string) => {
    created.push(name);
    await createDeployment(agent, name);
  };
  /** Ids of B's things, and of things of no deployment. */
  const ids: { bRoute?: number; aRoute?: number; bEvent?: number; aEvent?: number; untaggedEvent?: number } = {};

  const api = (method: string, path: string, token: string, opts: { body?: unknown; query?: Record<string, string | number | boolean | undefined> } = {}) =>
    agent.api(method, path, { token, ...opts });

  /** A scoped operator with write on `deployment`, and a key of it limited to that deployment. */
  const tenant = async (label: string, deployment: string): Promise<Tenant> => {
    const username = uniqueName(`t${label}`);
    const user = await agent.api('POST', '/users', { body: { username, email: `${username}@example.com`, password: PASS, role: 'operator' } });
    expect(user.status, user.text).toBe(201);
    expect(user.body.data.scope).toBe('deployments');
    const grant = await agent.api('POST', `/users/${user.body.data.id}/deployments`, { body: { deployment_name: deployment, access_level: 'write' } });
    expect(grant.status, grant.text).toBe(201);
    const token = await agent.login(username, PASS);
    const key = await agent.api('POST', '/api/apikeys', { token, body: { name: `${label}-key`, role: 'operator', deployments: [deployment] } });
    expect(key.status, key.text).toBe(201);
    return {
      label,
      deployment,
      host: `${uniqueName(`site-${label}`)}.example.test`,
      userId: user.body.data.id,
      userToken: token,
      principals: [
        { name: `${label}-user`, token },
        { name: `${label}-key`, token: key.body.data.key },
      ],
    };
  };

  /** Waits until the journal holds the rows and events a request produced (real-time capture). */
  // Bounds on waiting, not on speed: the journals are fed from nginx's logs, which a loaded machine reads late.
  const traffic = async (query: Record<string, string>, n = 1) =>
    waitFor(
      async () => {
        const r = await agent.api('GET', '/traffic/logs', { query });
        return r.body.meta.total >= n && r;
      },
      `traffic ${JSON.stringify(query)}`,
      30_000,
      100,
    );
  const event = async (query: Record<string, string>) =>
    waitFor(
      async () => {
        const r = await agent.api('GET', '/security/events', { query });
        return r.body.data[0] as { id: number; deployment: string | null } | undefined;
      },
      `event ${JSON.stringify(query)}`,
      30_000,
      100,
    );

  beforeAll(async () => {
    nginx = await startNginx();
    pebble = await startPebble(nginx.httpPort);
    agent = await startAgent({
      plugins: ['access', ...SECURITY_PLUGINS],
      config: {
        proxy: nginx.proxyConfig,
        certificates: { directory_url: pebble.directoryUrl, directory_ca_file: pebble.apiCaFile, email: 'ops@example.test' },
      },
    });
    const depA = uniqueName('ten-a');
    const depB = uniqueName('ten-b');
    await deploy(depA);
    await deploy(depB);
    a = await tenant('a', depA);
    b = await tenant('b', depB);
    const gname = uniqueName('gop');
    const g = await agent.api('POST', '/users', {
      body: { username: gname, email: `${gname}@example.com`, password: PASS, role: 'operator', scope: 'global' },
    });
    expect(g.status, g.text).toBe(201);
    globalOp = await agent.login(gname, PASS);

    // Each tenant sets up its own deployment: a domain, a protected route, a block tied to it, a certificate.
    for (const [t, i] of [
      [a, 0],
      [b, 1],
    ] as const) {
      const who = t.principals[i]!.token;
      const d = await api('POST', `/deployments/${t.deployment}/domains`, who, { body: { service: 'web', domain: t.host, container_port: 80 } });
      expect(d.status, d.text).toBe(201);
      const route = await api('POST', '/security/protected-routes', who, {
        body: { path: '/cgi-bin', method: 'ALL', auth_type: 'basic', credentials: `${t.label}:pw-${t.label}-1`, deployment: t.deployment },
      });
      expect(route.status, route.text).toBe(201);
      if (t === a) ids.aRoute = route.body.data.id;
      else ids.bRoute = route.body.data.id;
      const block = await api('POST', '/security/blocked-ips', who, {
        body: { ip: t === a ? '127.0.0.41' : '127.0.0.42', reason: `${t.label} only`, deployment: t.deployment },
      });
      expect(block.status, block.text).toBe(201);
      const cert = await api('POST', '/certificates', t.principals[1 - i]!.token, { body: { domain: t.host } });
      expect(cert.status, cert.text).toBe(201);
      expect(cert.body.data).toMatchObject({ domain: t.host, deployment: t.deployment, status: 'valid' });
    }
    // Global state: a certificate of a name no deployment uses, a block for every site.
    expect((await agent.api('POST', '/certificates', { body: { domain: free } })).status).toBe(201);
    expect((await agent.api('POST', '/security/blocked-ips', { body: { ip: '127.0.0.43', reason: 'everyone' } })).status).toBe(201);

    // Traffic and an attack-path event on each site, and on a host no deployment owns.
    await waitFor(
      async () => (await hit(nginx.httpPort, a.host, '/')).status === 200 && (await hit(nginx.httpPort, b.host, '/')).status === 200,
      'both sites up',
    );
    for (let i = 0; i < 3; i++) await hit(nginx.httpPort, a.host, `/?a=${i}`);
    for (let i = 0; i < 5; i++) await hit(nginx.httpPort, b.host, `/?b=${i}`);
    await hit(nginx.httpPort, a.host, '/.env', { localAddress: '127.0.0.31' });
    await hit(nginx.httpPort, b.host, '/.env', { localAddress: '127.0.0.32' });
    await hit(nginx.httpPort, unknownHost, '/.env', { localAddress: '127.0.0.33' });
    await traffic({ deployment: b.deployment }, 6);
    ids.aEvent = (await event({ source_ip: '127.0.0.31' }))!.id;
    ids.bEvent = (await event({ source_ip: '127.0.0.32' }))!.id;
    const untagged = (await event({ source_ip: '127.0.0.33' }))!;
    expect(untagged.deployment).toBeNull();
    ids.untaggedEvent = untagged.id;
  }, 240_000);

  afterAll(async () => {
    for (const name of new Set(created)) await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await pebble?.stop();
    await nginx?.stop();
  });

  /** Runs `check` for both of tenant A's principals. */
  const asA = async (check: (token: string, who: string) => Promise<void>) => {
    for (const p of a.principals) await check(p.token, p.name);
  };
  const hidesB = (text: string, who: string) => {
    expect(text, who).not.toContain(b.deployment);
    expect(text, who).not.toContain(b.host);
  };

  it("domains and vhosts: the other tenant's are 404 and never named", async () => {
    await asA(async (t, who) => {
      expect((await api('GET', `/deployments/${b.deployment}/domains`, t)).status, who).toBe(404);
      expect(
        (await api('POST', `/deployments/${b.deployment}/domains`, t, { body: { service: 'web', domain: `x.${b.host}`, container_port: 80 } })).status,
        who,
      ).toBe(404);
      expect((await api('GET', `/proxy/status/${b.deployment}`, t)).status, who).toBe(404);
      expect((await api('DELETE', `/proxy/${b.deployment}`, t)).status, who).toBe(404);
      // Claiming B's host for A: a conflict, without B's name.
      const claim = await api('POST', `/deployments/${a.deployment}/domains`, t, {
        body: { service: 'web', domain: b.host, container_port: 80, path_prefix: '/claim' },
      });
      expect(claim.status, who).toBe(409);
      expect(claim.body.code).toBe('DOMAIN_CLAIMED');
      expect(claim.text, who).not.toContain(b.deployment);
      const vhosts = await api('GET', '/proxy/vhosts', t);
      expect(vhosts.status, who).toBe(200);
      expect(
        vhosts.body.data.map((v: { domain: string }) => v.domain),
        who,
      ).toEqual([a.host]);
      const status = await api('GET', `/proxy/status/${a.deployment}`, t);
      expect(status.status, who).toBe(200);
      hidesB(status.text, who);
    });
    // The global operator sees both and is told whose a claimed host is.
    const all = await api('GET', '/proxy/vhosts', globalOp);
    expect(all.body.data.map((v: { domain: string }) => v.domain)).toEqual(expect.arrayContaining([a.host, b.host]));
    const claim = await api('POST', `/deployments/${a.deployment}/domains`, globalOp, {
      body: { service: 'web', domain: b.host, container_port: 80, path_prefix: '/claim' },
    });
    expect(claim.text).toContain(b.deployment);
  });

  it("certificates: only those of the tenant's domains; others look global", async () => {
    await asA(async (t, who) => {
      const list = await api('GET', '/certificates', t);
      expect(list.status, who).toBe(200);
      expect(
        list.body.data.map((c: { domain: string }) => c.domain),
        who,
      ).toEqual([a.host]);
      for (const domain of [b.host, free]) {
        const post = await api('POST', '/certificates', t, { body: { domain } });
        expect([post.status, post.body.code], `${who} POST ${domain}`).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
        hidesB(post.text, who);
        const del = await api('DELETE', `/certificates/${domain}`, t);
        expect([del.status, del.body.code], `${who} DELETE ${domain}`).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
        hidesB(del.text, who);
      }
      const renew = await api('POST', '/certificates/renew', t);
      expect([renew.status, renew.body.code], who).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
    });
    const all = await api('GET', '/certificates', globalOp);
    expect(all.body.data.map((c: { domain: string }) => c.domain).sort()).toEqual([a.host, b.host, free].sort());
    const renew = await api('POST', '/certificates/renew', globalOp);
    expect(renew.status, renew.text).toBe(200);
    expect(renew.body.data.checked).toBe(3);
  });

  it("security events and stats count only the tenant's deployment", async () => {
    const mine = (await agent.api('GET', '/security/events', { query: { deployment: a.deployment } })).body.meta.total as number;
    expect(mine).toBeGreaterThan(0);
    await asA(async (t, who) => {
      const list = await api('GET', '/security/events', t);
      expect(list.status, who).toBe(200);
      expect(new Set(list.body.data.map((e: Row) => e.deployment)), who).toEqual(new Set([a.deployment]));
      expect(list.body.meta.total, who).toBe(mine);
      const other = await api('GET', '/security/events', t, { query: { deployment: b.deployment } });
      expect(other.status, who).toBe(404);
      for (const id of [ids.bEvent, ids.untaggedEvent]) {
        const one = await api('GET', `/security/events/${id}`, t);
        expect(one.status, `${who} event ${id}`).toBe(404);
        hidesB(one.text, who);
      }
      expect((await api('GET', `/security/events/${ids.aEvent}`, t)).status, who).toBe(200);
      const byIp = await api('GET', '/security/ips/127.0.0.32/events', t);
      expect(byIp.body.data, who).toEqual([]);
      expect(byIp.body.meta, who).toMatchObject({ total: 0, blocked: false, whitelisted: null });
      // A global block is global state: not shown to a tenant; its own deployment's block is.
      expect((await api('GET', '/security/ips/127.0.0.43/events', t)).body.meta.blocked, who).toBe(false);
      expect((await api('GET', '/security/ips/127.0.0.41/events', t)).body.meta.blocked, who).toBe(true);
      const stats = await api('GET', '/security/stats', t);
      expect(stats.status, who).toBe(200);
      expect(stats.body.data.events.total, who).toBe(mine);
      expect(stats.body.data, who).toMatchObject({ blocked_ips: 1, protected_routes: 1, whitelist_entries: null, auto_block: null, realtime_capture: null });
      expect(
        stats.body.data.events.top_ips.map((i: { ip: string }) => i.ip),
        who,
      ).not.toContain('127.0.0.32');
      hidesB(stats.text, who);
    });
    const all = await api('GET', '/security/stats', globalOp);
    expect(all.body.data.events.total).toBeGreaterThan(mine);
    expect(all.body.data).toMatchObject({ blocked_ips: 3, protected_routes: 2, whitelist_entries: 0, realtime_capture: true });
    expect((await api('GET', `/security/events/${ids.untaggedEvent}`, globalOp)).status).toBe(200);
  });

  it("traffic: rows, totals and stats of the tenant's deployment only", async () => {
    const mine = (await agent.api('GET', '/traffic/logs', { query: { deployment: a.deployment } })).body.meta.total as number;
    expect(mine).toBeGreaterThan(3);
    await asA(async (t, who) => {
      const logs = await api('GET', '/traffic/logs', t, { query: { limit: 1000 } });
      expect(logs.status, who).toBe(200);
      expect(new Set(logs.body.data.map((r: Row) => r.deployment)), who).toEqual(new Set([a.deployment]));
      expect(logs.body.meta.total, who).toBe(logs.body.data.length);
      expect(logs.body.meta.total, who).toBeGreaterThanOrEqual(mine);
      // Filters that take other paths through the journal stay inside too.
      for (const query of [
        { status_group: '4xx' },
        { source_ip: '127.0.0.32' },
        { path: '.env' },
        { start_time: new Date(Date.now() - 3_600_000).toISOString() },
      ]) {
        const r = await api('GET', '/traffic/logs', t, { query });
        expect(r.status, `${who} ${JSON.stringify(query)}`).toBe(200);
        expect(
          r.body.data.every((row: Row) => row.deployment === a.deployment),
          `${who} ${JSON.stringify(query)}`,
        ).toBe(true);
      }
      expect((await api('GET', '/traffic/logs', t, { query: { source_ip: '127.0.0.32' } })).body.meta.total, who).toBe(0);
      const other = await api('GET', '/traffic/logs', t, { query: { deployment: b.deployment } });
      expect(other.status, who).toBe(404);
      expect((await api('GET', '/traffic/stats', t, { query: { deployment: b.deployment } })).status, who).toBe(404);
      expect((await api('GET', `/deployments/${b.deployment}/traffic`, t)).status, who).toBe(404);
      const stats = await api('GET', '/traffic/stats', t);
      expect(stats.status, who).toBe(200);
      expect(
        stats.body.data.deployments.map((d: Row) => d.deployment),
        who,
      ).toEqual([a.deployment]);
      expect(stats.body.data.total.requests, who).toBe(stats.body.data.deployments[0].requests);
      hidesB(stats.text, who);
      const unknown = await api('GET', '/traffic/unknown-domains', t);
      expect([unknown.status, unknown.body.code], who).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
    });
    const all = await api('GET', '/traffic/stats', globalOp);
    expect(all.body.data.deployments.map((d: Row) => d.deployment)).toEqual(expect.arrayContaining([a.deployment, b.deployment, null]));
    const unknown = await api('GET', '/traffic/unknown-domains', globalOp);
    expect(unknown.body.data.map((d: { host: string }) => d.host)).toContain(unknownHost);
  });

  it("protected routes and blocks: the other tenant's ids are 404, global entries are hidden", async () => {
    await asA(async (t, who) => {
      const routes = await api('GET', '/security/protected-routes', t);
      expect(
        routes.body.data.map((r: { id: number }) => r.id),
        who,
      ).toEqual([ids.aRoute]);
      for (const [method, body] of [
        ['PUT', { enabled: false }],
        ['DELETE', undefined],
      ] as const) {
        const r = await api(method, `/security/protected-routes/${ids.bRoute}`, t, { body });
        expect(r.status, `${who} ${method}`).toBe(404);
        hidesB(r.text, who);
      }
      // Moving its own route to B's deployment, or creating one there.
      const move = await api('PUT', `/security/protected-routes/${ids.aRoute}`, t, { body: { deployment: b.deployment } });
      expect(move.status, who).toBe(404);
      expect(
        (
          await api('POST', '/security/protected-routes', t, {
            body: { path: '/x', method: 'ALL', auth_type: 'basic', credentials: 'x:y', deployment: b.deployment },
          })
        ).status,
        who,
      ).toBe(404);
      expect((await api('PUT', `/security/protected-routes/${ids.aRoute}`, t, { body: { enabled: true } })).status, who).toBe(200);

      const blocked = await api('GET', '/security/blocked-ips', t);
      expect(
        blocked.body.data.map((x: { ip: string; deployment: string }) => [x.ip, x.deployment]),
        who,
      ).toEqual([['127.0.0.41', a.deployment]]);
      expect((await api('POST', '/security/blocked-ips', t, { body: { ip: '198.51.100.1', reason: 'x', deployment: b.deployment } })).status, who).toBe(404);
      expect((await api('DELETE', '/security/blocked-ips/127.0.0.42', t, { query: { deployment: b.deployment } })).status, who).toBe(404);
      const global = await api('DELETE', '/security/blocked-ips/127.0.0.43', t);
      expect([global.status, global.body.code], who).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
      // Its own deployment's block: bound, removable and re-creatable.
      expect((await api('DELETE', '/security/blocked-ips/127.0.0.41', t, { query: { deployment: a.deployment } })).status, who).toBe(200);
      expect((await api('POST', '/security/blocked-ips', t, { body: { ip: '127.0.0.41', reason: 'again', deployment: a.deployment } })).status, who).toBe(201);
    });
    // B's rules are untouched.
    expect((await api('GET', '/security/protected-routes', b.userToken)).body.data).toEqual([expect.objectContaining({ id: ids.bRoute, enabled: true })]);
    expect((await api('GET', '/security/blocked-ips', globalOp)).body.data.map((x: { ip: string }) => x.ip).sort()).toEqual([
      '127.0.0.41',
      '127.0.0.42',
      '127.0.0.43',
    ]);
  });

  it('refuses every global write to scoped principals; a global operator still makes them', async () => {
    const writes: [string, string, unknown?][] = [
      ['POST', '/security/blocked-ips', { ip: '0.0.0.0/0', reason: 'everyone' }],
      ['POST', '/security/whitelist', { type: 'path', value: '/' }],
      ['POST', '/security/whitelist', { type: 'cidr', value: '0.0.0.0/0' }],
      ['PUT', '/security/realtime-capture', { enabled: false }],
      ['PUT', '/settings/security', { auto_block: true }],
      ['POST', '/security/refresh'],
      ['POST', '/security/cleanup', { older_than: 0 }],
      ['POST', '/traffic/cleanup', { older_than: 0 }],
      ['POST', '/certificates/renew'],
    ];
    const reads = ['/security/whitelist', '/security/realtime-capture', '/settings/security', '/traffic/unknown-domains', '/system/logs/sources'];
    for (const t of [...a.principals, ...b.principals]) {
      for (const [method, path, body] of writes) {
        const r = await api(method, path, t.token, { body });
        expect([r.status, r.body.code], `${t.name} ${method} ${path}`).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
      }
      for (const path of reads) expect((await api('GET', path, t.token)).status, `${t.name} GET ${path}`).toBe(403);
    }
    // Nothing of it happened.
    const http = await api('GET', '/security/whitelist', globalOp);
    expect(http.body.data).toEqual([]);
    expect((await api('GET', '/security/realtime-capture', globalOp)).body.data.enabled).toBe(true);

    // The global operator: a block for every site and a whitelist entry, then removed.
    const block = await api('POST', '/security/blocked-ips', globalOp, { body: { ip: '203.0.113.7', reason: 'global operator' } });
    expect(block.status, block.text).toBe(201);
    expect((await api('DELETE', '/security/blocked-ips/203.0.113.7', globalOp)).status).toBe(200);
    const wl = await api('POST', '/security/whitelist', globalOp, { body: { type: 'ip', value: '203.0.113.9' } });
    expect(wl.status, wl.text).toBe(201);
    expect((await api('DELETE', `/security/whitelist/${wl.body.data.id}`, globalOp)).status).toBe(200);
    const refresh = await api('POST', '/security/refresh', globalOp);
    expect(refresh.body.data).toMatchObject({ reloaded: true, errors: [] });
    expect((await api('GET', '/system/logs/sources', globalOp)).status).toBe(200);
  });

  it("system logs: a tenant reads its own deployment's access lines only", async () => {
    await hit(nginx.httpPort, a.host, '/?syslog=a');
    await hit(nginx.httpPort, b.host, '/?syslog=b');
    await asA(async (t, who) => {
      const none = await api('GET', '/system/logs', t, { query: { source: 'proxy-access' } });
      expect([none.status, none.body.code], who).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
      expect((await api('GET', '/system/logs', t, { query: { source: 'proxy-access', deployment: b.deployment } })).status, who).toBe(404);
      expect((await api('GET', '/system/logs', t, { query: { source: 'proxy-error', deployment: a.deployment } })).status, who).toBe(400);
      const own = await waitFor(async () => {
        const r = await api('GET', '/system/logs', t, { query: { source: 'proxy-access', deployment: a.deployment, tail: 0 } });
        return r.body.data.some((l: { line: string }) => l.line.includes('syslog=a')) && r;
      }, `${who}: own access line`);
      expect(
        own.body.data.every((l: { line: string }) => JSON.parse(l.line).deployment === a.deployment),
        who,
      ).toBe(true);
      hidesB(own.text, who);

      // The websocket: refused without a deployment and for B's; A's own lines only.
      expect(await socket(`/api/system/logs/stream?source=proxy-access`, t)).toMatchObject({
        ready: false,
        reason: expect.stringContaining('GLOBAL_SCOPE_REQUIRED'),
      });
      expect(await socket(`/api/system/logs/stream?source=proxy-access&deployment=${b.deployment}`, t)).toMatchObject({
        ready: false,
        reason: expect.stringContaining('NOT_FOUND'),
      });
      const live = await socket(
        `/api/system/logs/stream?source=proxy-access&tail=0&deployment=${a.deployment}`,
        t,
        async () => {
          await hit(nginx.httpPort, b.host, '/?ws=b');
          await hit(nginx.httpPort, a.host, '/?ws=a');
        },
        'ws=a',
      );
      expect(live.ready, who).toBe(true);
      expect(
        live.lines.some((l) => l.includes('ws=a')),
        who,
      ).toBe(true);
      expect(
        live.lines.every((l) => JSON.parse(l).deployment === a.deployment),
        who,
      ).toBe(true);
    });
    const all = await api('GET', '/system/logs', globalOp, { query: { source: 'proxy-access', tail: 50 } });
    expect(all.status).toBe(200);
    expect(all.text).toContain(b.host);
  });

  it('deletion keeps traffic and events under the retired name; a new deployment of the name starts empty', async () => {
    const depC = uniqueName('ten-c');
    const hostC = `${depC}.example.test`;
    await deploy(depC);
    expect((await agent.api('POST', `/deployments/${depC}/domains`, { body: { service: 'web', domain: hostC, container_port: 80 } })).status).toBe(201);
    await waitFor(async () => (await hit(nginx.httpPort, hostC, '/')).status === 200, 'site C up');
    for (let i = 0; i < 4; i++) await hit(nginx.httpPort, hostC, `/?c=${i}`);
    await hit(nginx.httpPort, hostC, '/.env', { localAddress: '127.0.0.34' });
    await traffic({ deployment: depC }, 6);
    await event({ source_ip: '127.0.0.34', deployment: depC });
    // Rules that hang on the name: removed with the deployment.
    expect((await agent.api('PUT', `/deployments/${depC}/security`, { body: { blocked_ips: ['198.51.100.9'] } })).status).toBe(200);
    expect(
      (
        await agent.api('POST', '/security/protected-routes', {
          body: { path: '/c', method: 'ALL', auth_type: 'basic', credentials: 'c:pw-c-1', deployment: depC },
        })
      ).status,
    ).toBe(201);
    expect((await agent.api('POST', '/security/blocked-ips', { body: { ip: '198.51.100.10', reason: 'c only', deployment: depC } })).status).toBe(201);

    expect((await agent.api('DELETE', `/deployments/${depC}`, { query: { remove_files: true } })).status).toBe(200);
    // The rows move (counts included) under `<name>~<time>`, which only global principals reach.
    const retired = await waitFor(
      async () => {
        const s = await agent.api('GET', '/traffic/stats');
        return s.body.data.deployments.find((d: Row) => typeof d.deployment === 'string' && d.deployment.startsWith(`${depC}~`)) as
          { deployment: string; requests: number } | undefined;
      },
      'retired traffic',
      15_000,
      100,
    );
    expect(retired.deployment).toMatch(new RegExp(`^${depC}~\\d{14}$`));
    const before = retired.requests;
    expect(before).toBeGreaterThanOrEqual(6);
    expect((await agent.api('GET', '/traffic/logs', { query: { deployment: depC } })).body.meta.total).toBe(0);
    const kept = await agent.api('GET', '/traffic/logs', { query: { deployment: retired.deployment, limit: 1000 } });
    expect(kept.body.meta.total).toBe(before);
    expect(kept.body.data.filter((r: { path: string }) => /[?]c=/.test(r.path))).toHaveLength(4);
    expect((await agent.api('GET', '/security/events', { query: { deployment: depC } })).body.data).toEqual([]);
    expect((await agent.api('GET', '/security/events', { query: { deployment: retired.deployment } })).body.data).toEqual([
      expect.objectContaining({ source_ip: '127.0.0.34' }),
    ]);
    // A retired name is never a deployment: a scoped principal cannot even name it.
    expect((await api('GET', '/traffic/logs', a.userToken, { query: { deployment: retired.deployment } })).status).toBe(404);

    // The name again, granted to tenant A: nothing of the old deployment, then only its own traffic.
    await deploy(depC);
    expect((await agent.api('POST', `/users/${a.userId}/deployments`, { body: { deployment_name: depC, access_level: 'write' } })).status).toBe(201);
    const fresh = await api('GET', `/deployments/${depC}/traffic`, a.userToken, { query: { since: '7d' } });
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.body.data.requests).toBe(0);
    expect((await api('GET', '/traffic/logs', a.userToken, { query: { deployment: depC } })).body.meta.total).toBe(0);
    expect((await api('GET', '/security/events', a.userToken, { query: { deployment: depC } })).body.meta.total).toBe(0);
    expect((await api('GET', '/traffic/stats', a.userToken)).body.data.deployments.map((d: Row) => d.deployment)).not.toContain(depC);
    const oldLines = await api('GET', '/system/logs', a.userToken, { query: { source: 'proxy-access', deployment: depC, tail: 0 } });
    expect(oldLines.body.data).toEqual([]);
    expect((await api('GET', `/deployments/${depC}/domains`, a.userToken)).body.data).toEqual([]);
    expect((await api('GET', `/deployments/${depC}/security`, a.userToken)).body.data).toMatchObject({ blocked_ips: [], protected_paths: [] });
    expect((await api('GET', '/security/protected-routes', a.userToken)).body.data.map((r: { deployment: string }) => r.deployment)).not.toContain(depC);
    expect((await agent.api('GET', '/security/blocked-ips')).body.data.map((x: { ip: string }) => x.ip)).not.toContain('198.51.100.10');

    const d = await api('POST', `/deployments/${depC}/domains`, a.userToken, { body: { service: 'web', domain: hostC, container_port: 80 } });
    expect(d.status, d.text).toBe(201);
    await waitFor(async () => (await hit(nginx.httpPort, hostC, '/?new=1')).status === 200, 'new site C up');
    const now = await traffic({ deployment: depC, path: 'new=1' });
    expect(now.body.data[0]).toMatchObject({ deployment: depC });
    const count = await api('GET', '/traffic/logs', a.userToken, { query: { deployment: depC } });
    expect(count.body.meta.total).toBeGreaterThan(0);
    expect(count.body.data.every((r: { path: string }) => !/[?]c=|\.env/.test(r.path))).toBe(true);
    // The retired rows did not move back.
    expect((await agent.api('GET', '/traffic/logs', { query: { deployment: retired.deployment } })).body.meta.total).toBe(before);
  });

  it('bounds integer and date query parameters (400, never 500)', async () => {
    const cases: [string, Record<string, string>][] = [
      ['/traffic/logs', { offset: '1e30' }],
      ['/traffic/logs', { offset: '99999999999999999999' }],
      ['/traffic/logs', { limit: '100000' }],
      ['/traffic/logs', { start_time: '+275760-09-13T00:00:00Z' }],
      ['/traffic/logs', { end_time: '2024-13-45T99:00:00Z' }],
      ['/traffic/stats', { start_time: 'yesterday' }],
      ['/security/events', { offset: '1e30' }],
      ['/security/events', { start_time: '99999-01-01T00:00:00Z' }],
      ['/security/ips/127.0.0.1/events', { offset: '1e30' }],
      ['/system/logs', { tail: '1e30' }],
      ['/traffic/unknown-domains', { limit: '1e30' }],
      [`/deployments/${a.deployment}/traffic`, { since: '9999999d' }],
      [`/deployments/${a.deployment}/traffic`, { since: 'yesterday' }],
      ['/security/events/99999999999999999999', {}],
    ];
    for (const [path, query] of cases) {
      const r = await agent.api('GET', path, { query });
      expect(r.status, `${path} ${JSON.stringify(query)}: ${r.text}`).toBe(400);
    }
    for (const path of ['/security/cleanup', '/traffic/cleanup']) {
      const r = await agent.api('POST', path, { body: { older_than: 1e30 } });
      expect(r.status, `${path}: ${r.text}`).toBe(400);
    }
  });

  /** A websocket session: the token first, `during` once ready, then lines until `until` shows (or 5 s). */
  function socket(path: string, token: string, during?: () => Promise<void>, until?: string): Promise<{ ready: boolean; reason: string; lines: string[] }> {
    return new Promise((resolve) => {
      const ws = new WebSocket(`${agent.url.replace(/^http/, 'ws')}${path}`);
      const lines: string[] = [];
      let ready = false;
      const finish = (reason = '') => {
        clearTimeout(timer);
        ws.removeAllListeners();
        ws.on('error', () => undefined);
        ws.terminate();
        resolve({ ready, reason, lines });
      };
      const timer = setTimeout(() => finish('timeout'), 5000);
      ws.on('open', () => ws.send(token));
      ws.on('message', (m) => {
        const msg = JSON.parse(m.toString()) as { type?: string; line?: string };
        if (msg.type === 'ready') {
          ready = true;
          if (!until) return finish();
          void during?.();
        } else if (msg.line !== undefined) {
          lines.push(msg.line);
          if (until && msg.line.includes(until)) setTimeout(() => finish(), 300);
        }
      });
      ws.on('close', (_code, reason) => finish(reason.toString()));
      ws.on('error', () => finish('error'));
    });
  }
});
