/**
 * `GET /api/system/doctor` and `agentctl doctor` against real parts: the Docker engine and compose of test/env,
 * a real nginx that includes the agent's file, pebble as the ACME server, a real PowerDNS, the database drivers;
 * then with parts broken (a secret file readable by others, PowerDNS gone): the checks say what fails and what
 * fixes it. Admins only.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from './helpers/agent.js';
import { startNginx, type TestNginx } from '../plugins/edge/test/helpers/nginx.js';
import { startPebble, type TestPebble } from '../plugins/edge/test/helpers/pebble.js';
import { startPowerDns, type PowerDns } from '../plugins/dns/test/pdns.js';
import { cliHome, type CliHome } from '../cli/test/helpers/cli.js';

const PLUGINS = ['access', 'system', 'docker', 'deployments', 'edge', 'databases', 'dns'];
const DNS_KEY = 'doctor-test-key-1234567890';

interface Check {
  id: string;
  plugin: string;
  status: string;
  detail: string;
  fix?: string;
}

describe('doctor: the external parts of the enabled plugins', () => {
  let nginx: TestNginx;
  let pebble: TestPebble;
  let pdns: PowerDns;
  let agent: TestAgent;
  let cli: CliHome;

  beforeAll(async () => {
    nginx = await startNginx();
    pebble = await startPebble(nginx.httpPort);
    pdns = await startPowerDns(DNS_KEY);
    agent = await startAgent({
      plugins: PLUGINS,
      config: { proxy: nginx.proxyConfig, certificates: { directory_url: pebble.directoryUrl, directory_ca_file: pebble.apiCaFile } },
    });
    const set = await agent.api('PUT', '/settings', { body: { dns: { api_url: pdns.apiUrl, api_key: DNS_KEY } } });
    expect(set.status, set.text).toBe(200);
    cli = cliHome();
  });

  afterAll(async () => {
    await agent?.stop();
    await pdns?.stop();
    await pebble?.stop();
    await nginx?.stop();
    cli?.remove();
  });

  const report = async () => {
    const res = await agent.api('GET', '/system/doctor');
    expect(res.status, res.text).toBe(200);
    return { ok: res.body.data.ok as boolean, checks: new Map((res.body.data.checks as Check[]).map((c) => [c.id, c])) };
  };

  it('reports every part as working, with what it found', async () => {
    const { ok, checks } = await report();
    expect([...checks.keys()].sort()).toEqual([
      'core.data-dir',
      'core.node',
      'core.secrets',
      'databases.drivers',
      'deployments.log-followers',
      'dns.server',
      'docker.compose',
      'docker.engine',
      'edge.acme',
      'edge.clock',
      'edge.nginx',
    ]);
    const server = JSON.parse(execFileSync('docker', ['version', '--format', '{{json .Server}}'], { encoding: 'utf8' })) as {
      Version: string;
      ApiVersion: string;
    };
    expect(checks.get('docker.engine')).toMatchObject({
      plugin: 'docker',
      status: 'ok',
      detail: expect.stringContaining(`Docker ${server.Version}, API ${server.ApiVersion}`),
    });
    const composeVersion = execFileSync('docker-compose', ['version', '--short'], { encoding: 'utf8' }).trim();
    expect(checks.get('docker.compose')!.detail).toContain(composeVersion);
    expect(checks.get('edge.nginx')).toMatchObject({ status: 'ok', detail: expect.stringContaining(`includes ${join(nginx.configDir, 'agent.conf')}`) });
    expect(checks.get('edge.acme')).toMatchObject({ status: 'ok', detail: `${pebble.directoryUrl}: ACME directory` });
    // pebble runs on this host: same clock.
    expect(checks.get('edge.clock')).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^this host is [01]\.\d s /) });
    expect(checks.get('dns.server')).toMatchObject({ status: 'ok', detail: expect.stringContaining(`at ${pdns.apiUrl}`) });
    expect(checks.get('databases.drivers')!.detail).toMatch(/^pg \d+\.\d+\.\d+ \(PostgreSQL\), mysql2 \d+\.\d+\.\d+/);
    expect(checks.get('core.secrets')).toMatchObject({ plugin: 'core', status: 'ok' });
    expect(checks.get('deployments.log-followers')).toMatchObject({
      status: 'ok',
      detail: '0 follower(s) on 0 shared upstream stream(s); 0 dropped as too slow since start',
    });
    expect(checks.get('core.data-dir')!.detail).toContain(agent.dataDir);
    expect(checks.get('core.node')!.detail).toContain(process.version);
    expect(ok).toBe(checks.get('core.node')!.status !== 'failed');
  });

  it('names what fails and the command that fixes it', async () => {
    const key = join(agent.dataDir, 'secrets', 'data.key');
    chmodSync(key, 0o644);
    await pdns.stop();
    try {
      const { ok, checks } = await report();
      expect(ok).toBe(false);
      expect(checks.get('core.secrets')).toMatchObject({
        status: 'failed',
        detail: expect.stringContaining('data.key (0644)'),
        fix: `chmod 700 ${join(agent.dataDir, 'secrets')} && chmod 600 ${join(agent.dataDir, 'secrets')}/*`,
      });
      expect(checks.get('dns.server')).toMatchObject({
        status: 'failed',
        detail: expect.stringContaining('not reachable'),
        fix: expect.stringContaining('agentctl dns enable'),
      });

      const login = await cli.run(['login', '--url', agent.url, '--username', 'admin', '--password-stdin'], { input: 'Admin-Test-Pass-1\n' });
      expect(login.code, login.stderr).toBe(0);
      const doctor = await cli.run(['doctor']);
      expect(doctor.code, doctor.stderr).toBe(1);
      expect(doctor.stdout).toMatch(/✗ Secret files: modes\s+readable by other users: .*data\.key \(0644\)/);
      expect(doctor.stdout).toContain(`fix: chmod 700 ${join(agent.dataDir, 'secrets')}`);
      expect(doctor.stdout).toMatch(/✓ Docker engine and API version\s+Docker /);
      expect(doctor.stdout).toMatch(/\d+ ok, \d+ warnings?, 2 failed/);
      const json = await cli.run(['doctor', '--json']);
      expect(JSON.parse(json.stdout).checks).toHaveLength(11);
    } finally {
      chmodSync(key, 0o600);
    }
    expect(statSync(key).mode & 0o777).toBe(0o600);
    expect((await report()).checks.get('core.secrets')!.status).toBe('ok');
  });

  it('is for admins only', async () => {
    const created = await agent.api('POST', '/users', {
      body: { username: 'doc-ops', email: 'ops@example.test', password: 'Operator-Pass-42', role: 'operator' },
    });
    expect(created.status, created.text).toBe(201);
    const token = await agent.login('doc-ops', 'Operator-Pass-42');
    const res = await agent.api('GET', '/system/doctor', { token });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('FORBIDDEN');
  });

  it('says when the agent does not answer', async () => {
    const res = await cli.run(['doctor', '--url', 'http://127.0.0.1:9']);
    expect(res.code).toBe(1);
    expect(res.stdout).toContain('✗ agent  no answer at http://127.0.0.1:9');
    expect(res.stdout).toContain('systemctl start host-agent');
  });
});
