/**
 * Infrastructure services on the real Docker engine: the DNS server template runs a locally built PowerDNS image
 * (no registry), is driven through /api/infrastructure and /api/dns/dnsserver, and answers dig on its published
 * port; a deployment's container joins the shared network and reaches the service by its alias. The shared
 * database and the cache run PostgreSQL and Redis images built locally the same way.
 */
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { POSTGRES_IMAGE, ensurePostgresImage } from '../../backups/test/helpers/postgres-image.js';
import { PDNS_IMAGE, REDIS_IMAGE, ensurePdnsImage, ensureRedisImage } from './local-images.js';
import { freePort } from '../../../test/helpers/net.js';

const RUN = `t${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const PROJECT_PREFIX = `${RUN}-infra`;
const NETWORK_PREFIX = `${RUN}-net`;
const SHARED = `${NETWORK_PREFIX}-shared`;
const KEY = `key-${RUN}`;
const APP = `${RUN}-app`;
const APP_CONTAINER = `${RUN}-app-web`;

let agent: TestAgent;
let apiPort: number;
let dnsPort: number;

/**
 * Programs run asynchronously: a blocked event loop would miss the agent closing an idle keep-alive socket and
 * the next request would fail with "other side closed".
 */
function run(cmd: string, args: string[], cwd?: string): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { encoding: 'utf8', cwd, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ status: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}
const docker = (...args: string[]) => run('docker', args);
const dig = async (name: string, type: string) => {
  const r = await run('dig', ['@127.0.0.1', '-p', String(dnsPort), '+short', '+norecurse', '+time=2', '+tries=2', name, type]);
  return r.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .sort();
};

async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  let last: T;
  for (;;) {
    last = await fn();
    if (ok(last)) return last;
    if (Date.now() > end) throw new Error(`${what}: still ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

beforeAll(async () => {
  ensurePdnsImage();
  ensureRedisImage();
  ensurePostgresImage();
  [apiPort, dnsPort] = [await freePort(), await freePort()];
  agent = await startAgent({
    plugins: ['docker', 'infrastructure', 'dns', 'databases', 'system'],
    config: { infrastructure: { project_prefix: PROJECT_PREFIX, network_prefix: NETWORK_PREFIX, labels: { 'agent.test': '1' } } },
  });
  expect((await agent.api('PUT', '/settings', { body: { dns: { api_url: `http://127.0.0.1:${apiPort}`, api_key: KEY } } })).status).toBe(200);
});

afterAll(async () => {
  if (process.env.DEBUG_AGENT) console.log(agent?.output());
  await agent?.stop();
  // Everything this run created carries its unique prefix.
  const ids = (await docker('ps', '-aq', '--filter', 'label=agent.test=1', '--filter', `name=${RUN}`)).stdout.split('\n').filter(Boolean);
  if (ids.length) await docker('rm', '-f', '-v', ...ids);
  for (const n of ['proxy', 'shared']) await docker('network', 'rm', `${NETWORK_PREFIX}-${n}`);
  const volumes = (await docker('volume', 'ls', '-q', '--filter', `name=${RUN}`)).stdout.split('\n').filter(Boolean);
  if (volumes.length) await docker('volume', 'rm', ...volumes);
});

describe('infrastructure services', () => {
  it('lists the built-in services, none created yet', async () => {
    const res = await agent.api('GET', '/infrastructure');
    expect(res.status).toBe(200);
    expect(res.body.data.map((s: { name: string }) => s.name)).toEqual(['proxy-network', 'database', 'cache', 'dns']);
    for (const s of res.body.data) expect(s).toMatchObject({ status: 'not_created', enabled: false, ports: [] });
    const dns = res.body.data.find((s: { name: string }) => s.name === 'dns');
    // Secrets are generated when the service is first configured or started.
    expect(dns.settings).toMatchObject({ api_key: '', api_port: 8081, dns_port: 53 });
    expect(dns.networks).toEqual([SHARED]);
    expect((await agent.api('GET', '/infrastructure/nope')).status).toBe(404);
    expect((await agent.api('GET', '/infrastructure/networks')).body.data.map((n: { name: string }) => n.name)).toEqual([`${NETWORK_PREFIX}-proxy`, SHARED]);
  });

  it('refuses bad settings with 400 and changes nothing', async () => {
    const bad: Record<string, unknown>[] = [
      { dns_port: 'fifty-three' },
      { dns_port: 70000 },
      { image: 'evil image; rm -rf /' },
      { image: 'x\nprivileged: true' },
      { api_bind: 'example.com' },
      { unknown_key: 'x' },
      { api_key: 'has spaces and "quotes"' },
    ];
    for (const settings of bad) {
      const res = await agent.api('PUT', '/infrastructure/dns/settings', { body: { settings } });
      expect(res.status, JSON.stringify(settings)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    const dns = await agent.api('GET', '/infrastructure/dns');
    expect(dns.body.data.settings).toMatchObject({ image: 'powerdns/pdns-auth-48:latest', dns_port: 53, api_key: '[redacted]' });
  });

  it('renders compose files that compose accepts, with secrets only in the 0600 .env', async () => {
    for (const name of ['database', 'cache']) {
      const res = await agent.api('PUT', `/infrastructure/${name}/settings`, { body: { settings: { port: 0 } } });
      expect(res.status, res.text).toBe(200);
      const dir = join(agent.dataDir, 'plugins', 'infrastructure', name);
      const compose = readFileSync(join(dir, 'compose.yml'), 'utf8');
      const env = readFileSync(join(dir, '.env'), 'utf8');
      const secret = env.split('\n')[0]!.split('=')[1]!;
      expect(secret.length).toBeGreaterThan(20);
      expect(compose).not.toContain(secret);
      expect(parse(compose).services[name].labels).toMatchObject({ 'agent.test': '1', 'agent.infrastructure': name });
      const check = await run('docker-compose', ['-f', 'compose.yml', '--project-name', `${PROJECT_PREFIX}-${name}`, 'config', '-q'], dir);
      expect(check.status, check.stderr).toBe(0);
    }
  });

  it('starts the DNS server through the dns plugin; it serves the API and records on its ports', async () => {
    expect(
      (await agent.api('PUT', '/infrastructure/dns/settings', { body: { settings: { image: PDNS_IMAGE, dns_port: dnsPort, dns_bind: '127.0.0.1' } } })).status,
    ).toBe(200);
    const enabled = await agent.api('POST', '/dns/dnsserver/enable');
    expect(enabled.status, enabled.text).toBe(200);
    expect(enabled.body.data.service).toMatchObject({ status: expect.stringMatching(/running|starting/) });

    const status = await until(
      'dns status',
      async () => (await agent.api('GET', '/dns/dnsserver/status')).body.data,
      (d) => d.reachable && d.error === null,
    );
    expect(status).toMatchObject({ reachable: true, zone_count: 0, version: expect.any(String) });

    const zone = await agent.api('POST', '/dns/dnsserver/zones', { body: { name: `${RUN}.example.`, nameservers: [`ns1.${RUN}.example.`] } });
    expect(zone.status, zone.text).toBe(201);
    const rr = await agent.api('PATCH', `/dns/dnsserver/zones/${RUN}.example.`, {
      body: { rrsets: [{ name: `www.${RUN}.example.`, type: 'A', ttl: 60, changetype: 'REPLACE', records: [{ content: '198.51.100.7' }] }] },
    });
    expect(rr.status, rr.text).toBe(200);
    expect(await dig(`www.${RUN}.example.`, 'A')).toEqual(['198.51.100.7']);

    const infra = await until(
      'dns healthy',
      async () => (await agent.api('GET', '/infrastructure/dns')).body.data,
      (d) => d.health === 'healthy',
    );
    expect(infra).toMatchObject({
      status: 'running',
      enabled: true,
      health: 'healthy',
      services: [expect.objectContaining({ name: 'dns', status: 'running', image: PDNS_IMAGE })],
    });
    expect(infra.ports).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ service: 'dns', host_port: apiPort, container_port: 8081, protocol: 'tcp' }),
        expect.objectContaining({ service: 'dns', host_port: dnsPort, container_port: 53, protocol: 'udp' }),
      ]),
    );
  });

  it('shows logs with tail and filter', async () => {
    const all = await agent.api('GET', '/infrastructure/dns/logs', { query: { tail: 3 } });
    expect(all.status).toBe(200);
    expect(all.body.data).toHaveLength(3);
    expect(all.body.data[0]).toMatchObject({ service: 'dns', stream: expect.any(String), text: expect.any(String), time: expect.any(String) });
    const filtered = await agent.api('GET', '/infrastructure/dns/logs', { query: { tail: 0, filter: 'WEBSERVER' } });
    expect(filtered.body.data.length).toBeGreaterThan(0);
    for (const line of filtered.body.data) expect(line.text.toLowerCase()).toContain('webserver');
    expect((await agent.api('GET', '/infrastructure/dns/logs', { query: { tail: -1 } })).status).toBe(400);
    expect((await agent.api('GET', '/infrastructure/dns/logs', { query: { service: 'other' } })).status).toBe(404);
  });

  it('lets a deployment container join the shared network and reach the service by its alias', async () => {
    const started = await docker(
      'run',
      '-d',
      '--name',
      APP_CONTAINER,
      '--label',
      'agent.test=1',
      '--label',
      `com.docker.compose.project=${APP}`,
      '--label',
      'com.docker.compose.service=web',
      'agent-test/busybox:latest',
      'httpd',
      '-f',
      '-p',
      '80',
      '-h',
      '/www',
    );
    expect(started.status, started.stderr).toBe(0);
    const attached = await agent.api('POST', `/infrastructure/networks/${SHARED}/attach`, { body: { deployment: APP } });
    expect(attached.status, attached.text).toBe(200);
    expect(attached.body.data).toEqual({ network: SHARED, deployment: APP, containers: [APP_CONTAINER] });
    const reached = await docker('exec', APP_CONTAINER, 'wget', '-q', '-O', '-', '--header', `X-API-Key: ${KEY}`, 'http://dns:8081/api/v1/servers/localhost');
    expect(reached.status, reached.stderr).toBe(0);
    expect(JSON.parse(reached.stdout)).toMatchObject({ daemon_type: 'authoritative' });

    const detached = await agent.api('POST', `/infrastructure/networks/${SHARED}/detach`, { body: { deployment: APP } });
    expect(detached.status).toBe(200);
    const networks = JSON.parse((await docker('inspect', '-f', '{{json .NetworkSettings.Networks}}', APP_CONTAINER)).stdout);
    expect(Object.keys(networks)).not.toContain(SHARED);

    expect((await agent.api('POST', '/infrastructure/networks/bridge/attach', { body: { deployment: APP } })).status).toBe(400);
    expect((await agent.api('POST', `/infrastructure/networks/${SHARED}/attach`, { body: { deployment: '../etc' } })).status).toBe(400);
    expect((await agent.api('POST', `/infrastructure/networks/${SHARED}/attach`, { body: { deployment: `${RUN}-none` } })).status).toBe(409);
  });

  it('restarts the DNS server through the dns plugin and keeps its zones', async () => {
    const res = await agent.api('POST', '/dns/dnsserver/restart');
    expect(res.status, res.text).toBe(200);
    await until(
      'dns back',
      async () => (await agent.api('GET', '/dns/dnsserver/status')).body.data,
      (d) => d.reachable && d.zone_count === 1,
    );
    expect(await dig(`www.${RUN}.example.`, 'A')).toEqual(['198.51.100.7']);
  });

  it('stops the DNS server (disable) and starts it again through /api/infrastructure', async () => {
    const disabled = await agent.api('POST', '/dns/dnsserver/disable');
    expect(disabled.status).toBe(200);
    expect(disabled.body.data).toMatchObject({ reachable: false, service: { status: 'stopped' } });
    expect((await agent.api('GET', '/infrastructure/dns')).body.data).toMatchObject({ status: 'stopped', enabled: false });

    const started = await agent.api('POST', '/infrastructure/dns/start');
    expect(started.status).toBe(200);
    await until(
      'dns up',
      async () => (await agent.api('GET', '/dns/dnsserver/status')).body.data,
      (d) => d.reachable && d.zone_count === 1,
    );
    const stopped = await agent.api('POST', '/infrastructure/dns/stop');
    expect(stopped.status).toBe(200);
    expect(stopped.body.data.status).toBe('stopped');
  });

  it('runs the shared database; the databases plugin reaches it on its published port', async () => {
    const port = await freePort();
    const password = `pw${RUN}`;
    const started = await agent.api('POST', '/infrastructure/database/start', {
      body: { settings: { image: POSTGRES_IMAGE, password, port, bind: '127.0.0.1' } },
    });
    expect(started.status, started.text).toBe(200);
    expect(started.body.data.settings.password).toBe('[redacted]');
    expect(started.text).not.toContain(password);
    const healthy = await until(
      'database healthy',
      async () => (await agent.api('GET', '/infrastructure/database')).body.data,
      (d) => d.health === 'healthy',
    );
    expect(healthy.ports).toContainEqual(expect.objectContaining({ service: 'database', host_ip: '127.0.0.1', host_port: port, container_port: 5432 }));
    const test = await agent.api('POST', '/databases/test', { body: { type: 'postgres', host: '127.0.0.1', port, username: 'postgres', password } });
    expect(test.status, test.text).toBe(200);
    expect(test.body.data.type).toBe('postgres');
    // It ran through the compose guard: a checked model with exactly its two exceptions, and the secret only there.
    const projectDir = join(agent.dataDir, 'plugins', 'docker', 'projects', `${PROJECT_PREFIX}-database`);
    const last = readFileSync(join(projectDir, 'last'), 'utf8').trim();
    const kept = JSON.parse(readFileSync(join(projectDir, `${last}.meta.json`), 'utf8'));
    expect(kept.granted).toEqual(['labels:agent.infrastructure', `networks.external:${SHARED}`]);
    expect(statSync(join(projectDir, `${last}.json`)).mode & 0o777).toBe(0o600);
    expect((await agent.api('POST', '/infrastructure/database/stop')).body.data.status).toBe('stopped');
  });

  it('runs the shared cache with its password and memory limit', async () => {
    const port = await freePort();
    const password = `cache${RUN}`;
    const started = await agent.api('POST', '/infrastructure/cache/start', {
      body: { settings: { image: REDIS_IMAGE, password, port, bind: '127.0.0.1', max_memory_mb: 64 } },
    });
    expect(started.status, started.text).toBe(200);
    await until(
      'cache healthy',
      async () => (await agent.api('GET', '/infrastructure/cache')).body.data,
      (d) => d.health === 'healthy',
    );
    const cli = (...args: string[]) => run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), '--no-auth-warning', ...args]);
    expect((await cli('-a', password, 'SET', 'greeting', 'hello')).stdout.trim()).toBe('OK');
    expect((await cli('-a', password, 'GET', 'greeting')).stdout.trim()).toBe('hello');
    expect((await cli('-a', password, 'CONFIG', 'GET', 'maxmemory')).stdout).toContain(String(64 * 1024 * 1024));
    expect((await cli('GET', 'greeting')).stdout).toMatch(/NOAUTH/);
    const logs = await agent.api('GET', '/infrastructure/cache/logs', { query: { filter: 'ready to accept' } });
    expect(logs.body.data.length).toBeGreaterThan(0);
    expect((await agent.api('POST', '/infrastructure/cache/stop')).body.data.status).toBe('stopped');
  });

  it('creates the proxy network; a shared network cannot be stopped', async () => {
    const res = await agent.api('POST', '/infrastructure/proxy-network/start');
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'running', enabled: true, networks: [`${NETWORK_PREFIX}-proxy`] });
    expect((await docker('network', 'inspect', `${NETWORK_PREFIX}-proxy`)).status).toBe(0);
    const stop = await agent.api('POST', '/infrastructure/proxy-network/stop');
    expect(stop.status).toBe(400);
    expect(stop.body.code).toBe('NOT_STOPPABLE');
  });
});
