/**
 * proxy.mode own: the agent runs its own nginx, with every file under its data folder, on its own ports, started and
 * stopped with it. Real Debian nginx, the real agent and a real container: routing and the security plugin's
 * snippets through the own instance, HTTPS on its port, a refused configuration rolled back (nginx -t and the
 * master's reload), a stale instance of a killed agent ended at the next start, a port in use named with its
 * setting, and the host's /etc/nginx left byte for byte as it was.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { treeHashes } from '../../../test/helpers/files.js';
import { hit } from './helpers/nginx.js';
import { freePort, waitFor } from './helpers/ports.js';
import { createDeployment, SECURITY_PLUGINS, uniqueName } from './helpers/deployment.js';

const PLUGINS = [...SECURITY_PLUGINS, 'system'];
const basic = (user: string, pass: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` });

/** The command line of a process, or null when it does not run (or is a zombie). */
function commandLine(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return null;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return null;
  }
}

/** Every nginx master running this configuration. */
function mastersOf(conf: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => {
      const cmd = commandLine(pid);
      return !!cmd && cmd.startsWith('nginx: master process') && cmd.includes(` -c ${conf}`);
    });
}

/** The doctor's nginx check. */
async function nginxCheck(agent: TestAgent): Promise<{ status: string; detail: string; fix?: string }> {
  const res = await agent.api('GET', '/system/doctor');
  expect(res.status, res.text).toBe(200);
  return res.body.data.checks.find((c: { id: string }) => c.id === 'edge.nginx');
}

function httpsGet(port: number, host: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, servername: host, headers: { host }, rejectUnauthorized: false, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Holds a TCP port on loopback (another program on the port the agent wants). */
function holdPort(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((s) => s.destroy());
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe('proxy.mode own: the agent runs its own nginx', () => {
  // Made in beforeAll (a filtered run that skips these tests leaves nothing behind).
  const work = join(tmpdir(), `edge-own-${randomBytes(4).toString('hex')}`);
  const dataDir = join(work, 'data');
  const prefix = join(dataDir, 'plugins', 'edge', 'nginx');
  const conf = join(prefix, 'nginx.conf');
  const app = uniqueName('own-web');
  const host = `${app}.example.test`;
  let agent: TestAgent;
  let httpPort = 0;
  let httpsPort = 0;
  let hostNginx: Record<string, string>;
  let config: Record<string, unknown>;

  const start = async () => (agent = await startAgent({ plugins: PLUGINS, dataDir, config }));
  const get = (path = '/', opts = {}) => hit(httpPort, host, path, opts);

  beforeAll(async () => {
    mkdirSync(work, { recursive: true });
    hostNginx = treeHashes('/etc/nginx');
    [httpPort, httpsPort] = [await freePort(), await freePort()];
    // No mode and nothing naming the host's nginx: own mode, the default. Loopback only, on ports of its own.
    config = { proxy: { http_port: httpPort, https_port: httpsPort, listen_address: '127.0.0.1' } };
    await start();
    await createDeployment(agent, app);
  });

  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    // Whatever failed, no nginx of this test stays behind.
    for (const pid of mastersOf(conf)) process.kill(pid, 'SIGKILL');
    rmSync(work, { recursive: true, force: true });
  });

  it('starts its own nginx with every file under the data folder, and the doctor says so', async () => {
    const check = await waitFor(async () => {
      const c = await nginxCheck(agent);
      return c.status === 'ok' && c;
    }, 'own nginx running');
    const pid = Number(/master pid (\d+)/.exec(check.detail)![1]);
    expect(check.detail).toContain(`proxy.mode own (the default`);
    expect(check.detail).toContain(`HTTP :${httpPort}, HTTPS :${httpsPort}`);
    expect(check.detail).toContain(`its files under ${prefix}`);
    expect(mastersOf(conf)).toEqual([pid]);
    expect(commandLine(pid)).toContain(`-p ${prefix}/ -c ${conf}`);
    // The agent's process is its parent: it runs as the agent's child, not as a daemon.
    expect(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]).toBe(String(agent.process.pid));
    expect(readFileSync(join(prefix, 'nginx.pid'), 'utf8').trim()).toBe(String(pid));

    const main = readFileSync(conf, 'utf8');
    expect(main).toMatch(/^daemon off;$/m);
    expect(main).toContain(`pid "${join(prefix, 'nginx.pid')}";`);
    expect(main).toContain(`error_log "${join(prefix, 'logs', 'error.log')}" notice;`);
    for (const t of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) expect(main).toContain(`${t}_temp_path "${join(prefix, 'tmp', t)}";`);
    expect(main).toContain(`include "${join(prefix, 'agent', 'agent.conf')}";`);
    // Nothing of the host's nginx: no file of /etc/nginx is read by this configuration.
    expect(
      execFileSync('nginx', ['-p', `${prefix}/`, '-c', conf, '-e', join(prefix, 'logs', 'error.log'), '-T'], { encoding: 'utf8', stdio: 'pipe' }),
    ).not.toContain('/etc/nginx');
    expect(existsSync(join(prefix, 'agent', 'default.conf'))).toBe(true);
    // Both its ports are held from the start: the default server answers 404 on HTTP and refuses TLS on HTTPS.
    await waitFor(async () => (await hit(httpPort, 'unknown.example.test', '/')).status === 404, 'default server');
    await expect(httpsGet(httpsPort, 'unknown.example.test', '/')).rejects.toThrow();
  });

  it('routes a domain to the container and writes its access log under the data folder', async () => {
    const res = await agent.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', domain: host, container_port: 80 } });
    expect(res.status, res.text).toBe(201);
    // The answer comes once the new workers serve the domain (the reload went to the own master).
    const page = await get('/');
    expect(page.status).toBe(200);
    expect(page.body).toContain('hello from agent-test/busybox');
    expect((await get('/cgi-bin/env')).body).toContain(`HTTP_X_FORWARDED_HOST=${host}`);
    await waitFor(async () => readFileSync(join(prefix, 'logs', 'access.log'), 'utf8').includes(`"host":"${host}"`), 'access log line');
    // The traffic journal reads the own instance's access log.
    await waitFor(async () => (await agent.api('GET', '/traffic/logs', { query: { deployment: app } })).body.data.length > 0, 'traffic rows');
    expect(readdirSync(join(prefix, 'agent', 'sites'))).toEqual([`${host}.conf`]);
  });

  it("enforces the security plugin's snippets (basic authentication, blocks) through the own instance", async () => {
    const res = await agent.api('POST', '/security/protected-routes', {
      body: { path: '/cgi-bin', method: 'ALL', auth_type: 'basic', credentials: 'admin:own-s3cret', deployment: app },
    });
    expect(res.status, res.text).toBe(201);
    expect((await get('/cgi-bin/env')).status).toBe(401);
    expect((await get('/cgi-bin/env', { headers: basic('admin', 'wrong') })).status).toBe(401);
    expect((await get('/cgi-bin/env', { headers: basic('admin', 'own-s3cret') })).status).toBe(200);
    // The htpasswd file is read by the own workers, which run as the agent's user: readable by it alone.
    const dir = join(prefix, 'agent', 'security', 'htpasswd');
    const file = join(dir, readdirSync(dir)[0]!);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8')).toMatch(/^admin:\$2[aby]\$/);

    const block = await agent.api('POST', '/security/blocked-ips', { body: { ip: '127.0.0.7', reason: 'own mode' } });
    expect(block.status, block.text).toBe(201);
    expect((await get('/', { localAddress: '127.0.0.7' })).status).toBe(403);
    expect((await get('/')).status).toBe(200);
    expect((await agent.api('DELETE', '/security/blocked-ips/127.0.0.7')).status).toBe(200);
    expect((await agent.api('DELETE', `/security/protected-routes/${res.body.data.id}`)).status).toBe(200);
    expect((await get('/cgi-bin/env')).status).toBe(200);
  });

  it('tests a change with nginx -t against its own configuration first and restores the files when it fails', async () => {
    const before = treeHashes(join(prefix, 'agent'));
    const main = readFileSync(conf, 'utf8');
    // Something nginx refuses in the instance's own nginx.conf (rewritten at the next start).
    writeFileSync(conf, main.replace('http {', 'http {\n    this_is_not_a_directive on;'));
    try {
      const res = await agent.api('POST', `/deployments/${app}/domains`, { body: { service: 'web', domain: `other.${host}`, container_port: 80 } });
      expect(res.status, res.text).toBe(400);
      expect(res.body).toMatchObject({ code: 'PROXY_CONFIG_INVALID', error: expect.stringContaining('unknown directive "this_is_not_a_directive"') });
      expect(res.body.error).toContain(conf);
    } finally {
      writeFileSync(conf, main);
    }
    expect(treeHashes(join(prefix, 'agent'))).toEqual(before);
    expect((await get('/')).status).toBe(200);
  });

  it('serves HTTPS on its own port', async () => {
    // A certificate in the edge's store (self-signed: the point is the own instance's TLS port, not ACME).
    const certDir = join(dataDir, 'plugins', 'edge', 'certs', host);
    mkdirSync(certDir, { recursive: true, mode: 0o700 });
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${host}`, '-addext', `subjectAltName=DNS:${host}`].concat([
        '-keyout',
        join(certDir, 'privkey.pem'),
        '-out',
        join(certDir, 'fullchain.pem'),
      ]),
      { stdio: 'pipe' },
    );
    const list = await agent.api('GET', `/deployments/${app}/domains`);
    const id = list.body.data.find((d: { domain: string }) => d.domain === host).id;
    const tls = await agent.api('PUT', `/deployments/${app}/domains/${id}`, { body: { ssl: { enabled: true } } });
    expect(tls.status, tls.text).toBe(200);
    const page = await httpsGet(httpsPort, host, '/');
    expect(page.status).toBe(200);
    expect(page.body).toContain('hello from agent-test/busybox');
    expect((await get('/')).status).toBe(301);
    const off = await agent.api('PUT', `/deployments/${app}/domains/${id}`, { body: { ssl: { enabled: false } } });
    expect(off.status, off.text).toBe(200);
    expect((await get('/')).status).toBe(200);
  });

  it('starts its nginx again when the master is killed, ending the workers it left', async () => {
    const [old] = mastersOf(conf);
    const workers = readdirSync('/proc')
      .filter((e) => /^\d+$/.test(e) && e !== String(old))
      .map(Number)
      .filter((p) => {
        try {
          // Same process group as the master: its workers.
          return readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1]!.split(' ')[2] === String(old);
        } catch {
          return false;
        }
      });
    expect(workers.length).toBeGreaterThan(0);
    // As the OOM killer would: its workers survive it and hold the ports.
    process.kill(old!, 'SIGKILL');
    const next = await waitFor(
      async () => {
        const m = mastersOf(conf);
        return m.length === 1 && m[0] !== old && m[0];
      },
      'a new master',
      15_000,
    );
    for (const w of workers) expect(commandLine(w)).toBeNull();
    await waitFor(async () => (await get('/')).status === 200, 'served by the new master');
    expect(agent.output()).toMatch(/"msg":"the own nginx exited \(SIGKILL\): starting it again"/);
    expect((await nginxCheck(agent)).detail).toContain(`master pid ${next}`);
  });

  it('leaves no nginx behind when it stops, and ends the one a killed agent left at its next start', async () => {
    const first = mastersOf(conf);
    expect(first).toHaveLength(1);
    // kill -9: the agent cannot stop its nginx, which goes on serving with the last configuration.
    await agent.kill();
    expect(commandLine(first[0]!)).toMatch(/^nginx: master process/);
    expect((await get('/')).status).toBe(200);

    await start();
    expect(agent.output()).toContain('ending the own nginx a previous run of the agent left running');
    expect(commandLine(first[0]!)).toBeNull();
    const second = await waitFor(async () => {
      const m = mastersOf(conf);
      return m.length === 1 && m[0] !== first[0] && m;
    }, 'a new master');
    await waitFor(async () => (await get('/')).status === 200, 'domain served by the new instance');

    expect(await agent.stop()).toBe(0);
    expect(commandLine(second[0]!)).toBeNull();
    expect(mastersOf(conf)).toEqual([]);
    expect(existsSync(join(prefix, 'nginx.pid'))).toBe(false);
    await expect(hit(httpPort, host, '/')).rejects.toThrow();
    await start();
    await waitFor(async () => (await get('/')).status === 200, 'served again after a clean restart');

    // The agent and its master both killed (a host under memory pressure): the workers keep the ports; the next
    // start finds them in the group of the master its pid file names.
    const [third] = await waitFor(async () => {
      const m = mastersOf(conf);
      return m.length === 1 && m;
    }, 'the master');
    await agent.kill();
    process.kill(third!, 'SIGKILL');
    expect((await get('/')).status).toBe(200);
    await start();
    expect(agent.output()).toContain("ending the own nginx's workers a killed master left running");
    await waitFor(async () => {
      const m = mastersOf(conf);
      return m.length === 1 && m[0] !== third;
    }, 'a new master');
    await waitFor(async () => (await get('/')).status === 200, 'served by the new instance');
  });

  it("left the host's nginx configuration byte for byte as it was", () => {
    expect(treeHashes('/etc/nginx')).toEqual(hostNginx);
  });
});

describe('proxy.mode own: ports and configuration errors', () => {
  const work = join(tmpdir(), `edge-own-ports-${randomBytes(4).toString('hex')}`);
  const agents: TestAgent[] = [];
  const servers: Server[] = [];

  beforeAll(() => {
    mkdirSync(work, { recursive: true });
  });

  afterAll(async () => {
    for (const a of agents) await a.stop().catch(() => undefined);
    for (const s of servers) s.close();
    rmSync(work, { recursive: true, force: true });
  });

  const startOwn = async (name: string, proxy: Record<string, unknown>) => {
    const a = await startAgent({ plugins: PLUGINS, dataDir: join(work, name), config: { proxy: { listen_address: '127.0.0.1', ...proxy } } });
    agents.push(a);
    return a;
  };
  /** The agent-ready record's failed plugins, and the error the kernel logged for the edge. */
  const failure = (a: TestAgent) => {
    const ready = JSON.parse(
      a
        .output()
        .split('\n')
        .find((l) => l.includes('"msg":"agent ready"'))!,
    ) as { failed: string[] };
    const disabled = a
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"plugin disabled"') && l.includes('"plugin":"edge"'));
    return { failed: ready.failed, error: disabled ? (JSON.parse(disabled) as { error: string }).error : null };
  };

  it('does not start on a port another process holds, naming the port and its setting', async () => {
    const [http, https] = [await freePort(), await freePort()];
    servers.push(await holdPort(https));
    const a = await startOwn('taken', { http_port: http, https_port: https });
    const { failed, error } = failure(a);
    expect(failed).toContain('edge');
    expect(error).toContain(`port ${https} (proxy.https_port) is in use on 127.0.0.1:${https} by another process`);
    expect(error).toContain(`set proxy.https_port to another port (agent.yaml, or AGENT__proxy__https_port=<port>)`);
    // Nothing was started for it.
    expect(mastersOf(join(work, 'taken', 'plugins', 'edge', 'nginx', 'nginx.conf'))).toEqual([]);
  });

  it('refuses settings of the host nginx with proxy.mode own', async () => {
    const a = await startOwn('conflict', { mode: 'own', config_dir: join(work, 'elsewhere') });
    const { failed, error } = failure(a);
    expect(failed).toContain('edge');
    expect(error).toContain('proxy.config_dir applies to proxy.mode: system only');
  });

  it('rolls back a change whose reload the master refuses (a port taken after the start)', async () => {
    const [http, https] = [await freePort(), await freePort()];
    // Without the default server nothing holds the HTTPS port until a first HTTPS site needs it.
    const a = await startOwn('reload', { http_port: http, https_port: https, default_server: false });
    const prefix = join(a.dataDir, 'plugins', 'edge', 'nginx');
    // With no server at all (no default server, no site yet) the instance runs, listening nowhere.
    await waitFor(async () => (await nginxCheck(a)).status === 'ok', 'own nginx running');
    const name = uniqueName('own-tls');
    const domain = `${name}.example.test`;
    await createDeployment(a, name);
    try {
      const added = await a.api('POST', `/deployments/${name}/domains`, { body: { service: 'web', domain, container_port: 80 } });
      expect(added.status, added.text).toBe(201);
      await waitFor(async () => (await hit(http, domain, '/')).status === 200, 'served');
      const certDir = join(a.dataDir, 'plugins', 'edge', 'certs', domain);
      mkdirSync(certDir, { recursive: true, mode: 0o700 });
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${domain}`].concat([
          '-keyout',
          join(certDir, 'privkey.pem'),
          '-out',
          join(certDir, 'fullchain.pem'),
        ]),
        { stdio: 'pipe' },
      );
      servers.push(await holdPort(https));
      const before = treeHashes(join(prefix, 'agent'));
      // nginx -t passes (it opens no socket); the master's reload cannot open the HTTPS port.
      const res = await a.api('PUT', `/deployments/${name}/domains/${added.body.data.id}`, { body: { ssl: { enabled: true } } });
      expect(res.status, res.text).toBe(502);
      expect(res.body).toMatchObject({ code: 'PROXY_RELOAD_FAILED', error: expect.stringContaining(`port ${https} (proxy.https_port) is in use`) });
      expect(treeHashes(join(prefix, 'agent'))).toEqual(before);
      expect((await a.api('GET', `/deployments/${name}/domains`)).body.data[0].ssl.enabled).toBe(false);
      // The master kept the configuration it had: the site is served as before.
      expect((await hit(http, domain, '/')).status).toBe(200);
    } finally {
      await a.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    }
  });
});
