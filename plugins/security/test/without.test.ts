/**
 * The agent with every plugin but security (`plugins.enabled: ['*', '!security']`), on the data of an agent that ran
 * with it, against a real nginx and a real ACME server (pebble): domains, certificates and traffic work; no rule is
 * enforced and nothing in nginx's files refers to one; the API description has no security route or resource.
 * Enabled again, the plugin restores its rules from its own state.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { hit, startNginx, type TestNginx } from '../../edge/test/helpers/nginx.js';
import { startPebble, type TestPebble } from '../../edge/test/helpers/pebble.js';
import { waitFor } from '../../edge/test/helpers/ports.js';
import { createDeployment, uniqueName } from '../../edge/test/helpers/deployment.js';

const basic = (user: string, pass: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` });

/** Every file under a folder, relative path → content. */
function files(dir: string, prefix = ''): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) for (const [k, v] of files(path, `${prefix}${name}/`)) out.set(k, v);
    else out.set(`${prefix}${name}`, readFileSync(path, 'utf8'));
  }
  return out;
}

describe('security: the agent without it, and with it again', () => {
  let nginx: TestNginx;
  let pebble: TestPebble;
  let agent: TestAgent | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'agent-without-security-'));
  const app = uniqueName('nosec');
  const host = `${app}.example.test`;
  const start = async (plugins: string[]) => {
    agent = await startAgent({
      plugins,
      dataDir,
      config: {
        proxy: nginx.proxyConfig,
        certificates: { directory_url: pebble.directoryUrl, directory_ca_file: pebble.apiCaFile, email: 'ops@example.test' },
      },
    });
    return agent;
  };
  const get = (path: string, opts: { localAddress?: string; headers?: Record<string, string> } = {}) => hit(nginx.httpPort, host, path, opts);
  const blockedIp = '127.0.0.41';
  /** The rules of the first run, as nginx answers them. */
  const enforced = async () => {
    await waitFor(async () => (await get('/', { localAddress: blockedIp })).status === 403, 'block enforced');
    expect((await get('/cgi-bin/env')).status).toBe(401);
    expect((await get('/cgi-bin/env', { headers: basic('admin', 'pw-nosec-1') })).status).toBe(200);
    expect((await get('/sub/')).status).toBe(403);
  };

  beforeAll(async () => {
    nginx = await startNginx();
    pebble = await startPebble(nginx.httpPort);
    const a = await start(['*']);
    await createDeployment(a, app);
    expect((await a.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', domain: host, container_port: 80 } })).status).toBe(201);
    await waitFor(async () => (await get('/')).status === 200, 'site up');
    expect((await a.api('POST', '/security/blocked-ips', { body: { ip: blockedIp, reason: 'test' } })).status).toBe(201);
    const route = await a.api('POST', '/security/protected-routes', {
      body: { path: '/cgi-bin', method: 'ALL', auth_type: 'basic', credentials: 'admin:pw-nosec-1', deployment: app },
    });
    expect(route.status, route.text).toBe(201);
    const rules = await a.api('PUT', `/deployments/${app}/security`, { body: { protected_paths: [{ pattern: '/sub', enabled: true }] } });
    expect(rules.status, rules.text).toBe(200);
    await enforced();
    await a.stop();
    agent = undefined;
  });

  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await pebble?.stop();
    await nginx?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("without it ('*', '!security'): proxy, certificates and traffic work, no rule is enforced or rendered, no route described", async () => {
    const a = await start(['*', '!security']);
    // The initial render runs in the background after the start: wait for the blocked address to get through.
    // The first render runs in the background after the start, and old nginx workers answer for a moment after a
    // reload: wait for each rule to go.
    await waitFor(async () => (await get('/', { localAddress: blockedIp })).status === 200, 'block gone');
    await waitFor(async () => (await get('/cgi-bin/env')).status === 200, 'protected route gone');
    await waitFor(async () => (await get('/sub/')).status === 200, 'closed path open');

    const generated = files(nginx.configDir);
    expect([...generated.keys()].filter((f) => f.startsWith('security'))).toEqual([]);
    for (const [file, content] of generated)
      expect({ file, refs: content.match(/security|agent_deny|agent_ddeny|auth_basic|limit_req|htpasswd/g) }).toEqual({ file, refs: null });

    const doc = (await a.api('GET', '/api/openapi.json')).body;
    const paths = Object.keys(doc.paths);
    expect(paths.filter((p) => p.includes('security'))).toEqual([]);
    expect(paths).toEqual(expect.arrayContaining(['/api/deployments/{name}/domains', '/api/certificates', '/api/traffic/logs']));
    expect(doc['x-permissions'].map((r: { resource: string }) => r.resource)).not.toContain('security');
    expect((await a.api('GET', '/security/blocked-ips')).status).toBe(404);

    // A certificate from the ACME server, served over HTTPS.
    const cert = await a.api('POST', '/certificates', { body: { domain: host } });
    expect(cert.status, cert.text).toBe(201);
    expect(cert.body.data).toMatchObject({ domain: host, status: 'valid', deployment: app });
    const ssl = await a.api('PUT', `/deployments/${app}/domains/${(await a.api('GET', `/deployments/${app}/domains`)).body.data[0].id}`, {
      body: { ssl: { enabled: true } },
    });
    expect(ssl.status, ssl.text).toBe(200);
    expect(ssl.body.data.https).toBe(true);

    // Traffic: the requests above are in the journal.
    const marker = `/?without-security=${Date.now()}`;
    await hit(nginx.httpPort, host, marker);
    await waitFor(async () => (await a.api('GET', '/traffic/logs', { query: { path: 'without-security=' } })).body.data.length === 1, 'traffic row');
    await a.stop();
    agent = undefined;
  });

  it('with it again: its rules are back from its own state', async () => {
    const a = await start(['*']);
    // HTTP now redirects to HTTPS (the domain has SSL): the rules apply before the redirect, on both servers.
    await waitFor(async () => (await get('/', { localAddress: blockedIp })).status === 403, 'block restored');
    await waitFor(async () => (await get('/cgi-bin/env')).status === 301, 'served as before (redirected to HTTPS)');
    expect(readFileSync(join(nginx.configDir, 'security', 'http.conf'), 'utf8')).toContain(`${blockedIp} 1;`);
    const site = readFileSync(join(nginx.configDir, 'sites', `${host}.conf`), 'utf8');
    expect(site).toContain('auth_basic "Restricted";');
    expect(site).toContain('if ($agent_allowed_ip = 0) {');
    expect((await a.api('GET', '/security/blocked-ips')).body.data.map((b: { ip: string }) => b.ip)).toEqual([blockedIp]);
    expect((await a.api('GET', '/security/protected-routes')).body.data).toHaveLength(1);
  });
});
