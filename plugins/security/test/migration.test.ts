/**
 * The data of an edge from before the security plugin: its rules in the edge's state document, its events in the
 * edge's journal (`security_events`), its thresholds in the `edge` runtime settings, its files in nginx's
 * `security/` folder. Written here as that edge wrote them (its schema and shapes), on the data of a real agent.
 * - started without the security plugin, the agent keeps them (for later), renders none of them and removes the old
 *   files from nginx;
 * - started with it, the plugin takes everything over once (same ids, same answers), nginx enforces the rules, the
 *   edge forgets its copy; a restart takes nothing twice.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { hit, startNginx, type TestNginx } from '../../edge/test/helpers/nginx.js';
import { waitFor } from '../../edge/test/helpers/ports.js';
import { createDeployment, EDGE_PLUGINS, SECURITY_PLUGINS, uniqueName } from '../../edge/test/helpers/deployment.js';

const basic = (user: string, pass: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` });
const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

describe('security: migration from the edge that kept it', () => {
  let nginx: TestNginx;
  let agent: TestAgent | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'agent-security-migration-'));
  const app = uniqueName('migr');
  const host = `${app}.example.test`;
  const edgeState = join(dataDir, 'plugins', 'edge', 'state.json');
  const edgeJournal = join(dataDir, 'plugins', 'edge', 'journal.sqlite');
  // `system` serves /api/settings, where the old `edge` section shows.
  const start = async (plugins: string[]) => (agent = await startAgent({ plugins: [...plugins, 'system'], dataDir, config: { proxy: nginx.proxyConfig } }));
  const stop = async () => {
    await agent?.stop();
    agent = undefined;
  };
  const get = (path: string, opts: { localAddress?: string; headers?: Record<string, string> } = {}) => hit(nginx.httpPort, host, path, opts);
  const now = Date.now();
  const legacyRules = {
    next_id: 120,
    blocked: [
      { ip: '127.0.0.51', reason: 'legacy block', deployment: null, auto: false, created_at: new Date(now).toISOString(), expires_at: null },
      { ip: '127.0.0.52', reason: 'legacy auto', deployment: app, auto: true, created_at: new Date(now).toISOString(), expires_at: null },
    ],
    whitelist: [{ id: 101, type: 'ip', value: '127.0.0.53', description: 'office', created_at: new Date(now).toISOString() }],
    protected: [
      {
        id: 102,
        path: '/cgi-bin',
        method: 'ALL',
        auth_type: 'basic',
        username: 'admin',
        password_hash: bcrypt.hashSync('legacy-pass', 9),
        deployment: app,
        enabled: true,
        created_at: new Date(now).toISOString(),
        updated_at: new Date(now).toISOString(),
      },
    ],
    deployment_security: { [app]: { enabled: true, blocked_ips: [], protected_paths: [{ pattern: '/sub', enabled: true }], rate_limits: [] } },
  };
  const legacyEvents = [
    {
      id: 5,
      time_ms: now - 60_000,
      type: 'scan',
      severity: 'medium',
      source_ip: '203.0.113.5',
      deployment: app,
      host,
      path: '/x.php',
      details: '{"client_errors":30}',
      auto_blocked: 1,
    },
    {
      id: 6,
      time_ms: now - 50_000,
      type: 'attack_path',
      severity: 'high',
      source_ip: '203.0.113.6',
      deployment: '',
      host: 'other.test',
      path: '/.env',
      details: '{}',
      auto_blocked: 0,
    },
    {
      id: 9,
      time_ms: now - 40_000,
      type: 'auth_failure',
      severity: 'high',
      source_ip: '203.0.113.9',
      deployment: app,
      host,
      path: '/cgi-bin/env',
      details: '{"user":"admin"}',
      auto_blocked: 0,
    },
  ];

  beforeAll(async () => {
    nginx = await startNginx();
    // A real deployment with a domain, from an agent with the edge alone.
    const a = await start(EDGE_PLUGINS);
    await createDeployment(a, app);
    expect((await a.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', domain: host, container_port: 80 } })).status).toBe(201);
    await waitFor(async () => (await get('/')).status === 200, 'site up');
    await stop();
    // The deployment's events come after it was created; the one tagged with its name from before belonged to an
    // earlier deployment of that name (deleted while the events were the edge's: kept under a retired name then).
    const created = Date.now();
    legacyEvents.forEach((e, i) => (e.time_ms = created + 100 + i));
    legacyEvents.push({ ...legacyEvents[0]!, id: 4, time_ms: created - 3_600_000, source_ip: '203.0.113.4' });

    // What the older edge kept, as it kept it.
    const state = readJson(edgeState);
    delete state.contributors;
    writeFileSync(edgeState, JSON.stringify({ ...state, ...legacyRules }));
    const db = new Database(edgeJournal);
    db.exec(`CREATE TABLE security_events (
      id INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, type TEXT NOT NULL, severity TEXT NOT NULL, source_ip TEXT NOT NULL,
      deployment TEXT NOT NULL, host TEXT NOT NULL, path TEXT NOT NULL, details TEXT NOT NULL, auto_blocked INTEGER NOT NULL DEFAULT 0)`);
    const insert = db.prepare(
      'INSERT INTO security_events VALUES (@id, @time_ms, @type, @severity, @source_ip, @deployment, @host, @path, @details, @auto_blocked)',
    );
    for (const e of legacyEvents) insert.run(e);
    db.close();
    const settingsFile = join(dataDir, 'core', 'settings.json');
    // Written at the first change of a setting: absent when none was ever changed.
    const settings = existsSync(settingsFile) ? readJson(settingsFile) : { values: {} };
    settings.values.edge = { realtime_capture: true, auto_block: true, auto_block_duration: 7200, scan_threshold: 7, event_retention_days: 90 };
    writeFileSync(settingsFile, JSON.stringify(settings));
    // The files it rendered (a rule that nginx loads through a file only the old layout had).
    mkdirSync(join(nginx.configDir, 'security', 'htpasswd'), { recursive: true });
    writeFileSync(join(nginx.configDir, 'security', 'http.conf'), 'geo $agent_blocked_ip {\n    default 0;\n    127.0.0.51 1;\n}\n');
    writeFileSync(join(nginx.configDir, 'security', 'htpasswd', 'route-102'), 'admin:x\n');
  });

  // One agent at a time on the data folder, also when a test failed half-way.
  afterEach(() => stop());

  afterAll(async () => {
    await start(EDGE_PLUGINS);
    await agent?.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } }).catch(() => undefined);
    await stop();
    await nginx?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('without the security plugin: the old data is kept for it, none of it is rendered, the old files go', async () => {
    const a = await start(EDGE_PLUGINS);
    await waitFor(async () => !existsSync(join(nginx.configDir, 'security')), 'old security files removed');
    expect(readFileSync(join(nginx.configDir, 'agent.conf'), 'utf8')).not.toContain('security');
    expect((await get('/', { localAddress: '127.0.0.51' })).status).toBe(200);
    expect((await get('/cgi-bin/env')).status).toBe(200);
    // Kept as it was, for the security plugin to take later.
    expect(readJson(edgeState)).toMatchObject({ blocked: legacyRules.blocked, protected: legacyRules.protected });
    const db = new Database(edgeJournal, { readonly: true });
    expect((db.prepare('SELECT COUNT(*) AS n FROM security_events').get() as { n: number }).n).toBe(4);
    db.close();
    // The old settings section stays valid while the old data is here.
    const put = await a.api('PUT', '/settings', { body: { edge: { scan_threshold: 8 } } });
    expect(put.status, put.text).toBe(200);
    expect((await a.api('PUT', '/settings', { body: { edge: { scan_threshold: 7 } } })).status).toBe(200);
    await stop();
  });

  it('with it: everything is taken over once, with the same ids and answers, and enforced', async () => {
    const a = await start(SECURITY_PLUGINS);
    // The first render runs in the background after the start, and old nginx workers answer for a moment after a
    // reload: wait for each rule to show.
    await waitFor(async () => (await get('/', { localAddress: '127.0.0.51' })).status === 403, 'legacy block enforced');
    await waitFor(async () => (await get('/cgi-bin/env')).status === 401, 'legacy protected route enforced');
    expect((await get('/cgi-bin/env', { headers: basic('admin', 'legacy-pass') })).status).toBe(200);
    expect((await get('/sub/')).status).toBe(403);
    expect((await get('/sub/', { localAddress: '127.0.0.53' })).status).toBe(200); // whitelisted
    expect((await get('/', { localAddress: '127.0.0.52' })).status).toBe(403); // the block tied to the deployment

    const blocked = (await a.api('GET', '/security/blocked-ips')).body.data;
    expect(blocked).toEqual(legacyRules.blocked.map((b) => ({ ...b, remaining_seconds: null })));
    expect((await a.api('GET', '/security/whitelist')).body.data).toEqual(legacyRules.whitelist);
    const { password_hash: _hash, ...route } = legacyRules.protected[0]!;
    expect((await a.api('GET', '/security/protected-routes')).body.data).toEqual([route]);
    expect((await a.api('GET', `/deployments/${app}/security`)).body.data).toEqual(legacyRules.deployment_security[app]);
    // The old events, with their ids; those the requests above raised (blocked hits) come after them.
    const events = (await a.api('GET', '/security/events', { query: { limit: 1000 } })).body.data as { id: number }[];
    expect(events.filter((e) => e.id <= 9).map((e) => e.id)).toEqual([9, 6, 5, 4]);
    expect(events.filter((e) => ![4, 5, 6, 9].includes(e.id) && e.id <= 9)).toEqual([]);
    const earlier = (await a.api('GET', '/security/events/4')).body.data;
    expect(earlier.deployment).toMatch(new RegExp(`^${app}~\\d{14}$`));
    expect((await a.api('GET', '/security/events/5')).body.data).toEqual({
      ...legacyEvents[0],
      time_ms: undefined,
      time: new Date(legacyEvents[0]!.time_ms).toISOString(),
      details: { client_errors: 30 },
      auto_blocked: true,
    });
    expect((await a.api('GET', '/settings/security')).body.data).toMatchObject({
      auto_block: true,
      auto_block_duration: 7200,
      scan_threshold: 7,
      event_retention_days: 90,
    });
    // New records take ids after the old ones.
    const wl = await a.api('POST', '/security/whitelist', { body: { type: 'ip', value: '127.0.0.54' } });
    expect(wl.body.data.id).toBe(120);

    // The edge forgot its copy.
    const state = readJson(edgeState);
    for (const key of ['blocked', 'whitelist', 'protected', 'deployment_security']) expect(state).not.toHaveProperty(key);
    const db = new Database(edgeJournal, { readonly: true });
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'security_events'").get()).toBeUndefined();
    db.close();
    await stop();
  });

  it('a restart takes nothing twice, and the old settings section is gone', async () => {
    const a = await start(SECURITY_PLUGINS);
    const events = (await a.api('GET', '/security/events', { query: { limit: 1000 } })).body.data as { id: number }[];
    expect(events.filter((e) => e.id <= 9).map((e) => e.id)).toEqual([9, 6, 5, 4]);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    expect((await a.api('GET', '/security/blocked-ips')).body.data).toHaveLength(2);
    expect((await a.api('GET', '/security/whitelist')).body.data).toHaveLength(2);
    const settings = (await a.api('GET', '/settings')).body.data.values;
    expect(settings).not.toHaveProperty('edge');
    expect(settings.security).toMatchObject({ auto_block: true, scan_threshold: 7 });
    await waitFor(async () => (await get('/', { localAddress: '127.0.0.51' })).status === 403, 'still enforced');
  });
});
