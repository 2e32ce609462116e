import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AGENT_ENTRY, firstStartPassword, startAgent, request } from '../../test/helpers/agent.js';
import { FIXTURE } from './helpers/fixture.js';

const dir = mkdtempSync(join(tmpdir(), 'agent-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the agent with a config text; it must refuse to start. */
function refuse(yaml: string, env: Record<string, string> = {}) {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, yaml);
  const r = spawnSync(process.execPath, [AGENT_ENTRY, '--config', path], {
    env: { ...process.env, AGENT_DATA_DIR: join(dir, 'data'), ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { code: r.status, stderr: r.stderr };
}

describe('configuration', () => {
  it('exits non-zero naming the bad key', () => {
    expect(refuse('api:\n  enable_cors: "yes please"\n')).toMatchObject({ code: 2, stderr: expect.stringContaining('api.enable_cors') });
    expect(refuse('plans:\n  ttl: forever\n').stderr).toContain('plans.ttl');
    expect(refuse('api:\n  enable_corz: true\n').stderr).toContain("config.api: unknown field 'enable_corz'");
    expect(refuse('listen: nowhere\n').stderr).toContain('listen');
    expect(refuse('auth: [1, 2\n').stderr).toMatch(/config .*:1:/);
    expect(refuse('', { AGENT__auth__token_ttl: 'soon' }).stderr).toContain('auth.token_ttl');
  });

  it('validates plugin config sections by the plugin schema', () => {
    const r = refuse(`plugins:\n  enabled: ['${FIXTURE}']\nfixture:\n  level: -1\n`);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('config fixture.level');
  });

  it('refuses a missing --config file', () => {
    const r = spawnSync(process.execPath, [AGENT_ENTRY, '--config', join(dir, 'absent.yaml')], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('does not exist');
  });

  it('applies environment overrides over the file', async () => {
    const agent = await startAgent({
      plugins: [FIXTURE],
      config: { fixture: { label: 'from-file' } },
      env: { AGENT__fixture__level: '7' },
    });
    try {
      expect((await agent.api('GET', '/fixture/config')).body.data).toEqual({ fixture: { label: 'from-file', level: 7 } });
    } finally {
      await agent.stop();
    }
  });

  it('writes secrets 0600 in a 0700 folder and never uses a fixed admin password', async () => {
    const { statSync } = await import('node:fs');
    const agent = await startAgent({ env: { AGENT_ADMIN_PASSWORD: '' } });
    try {
      expect(statSync(join(agent.dataDir, 'secrets')).mode & 0o777).toBe(0o700);
      expect(statSync(join(agent.dataDir, 'secrets/jwt.key')).mode & 0o777).toBe(0o600);
      expect(statSync(join(agent.dataDir, 'secrets/data.key')).mode & 0o777).toBe(0o600);
      expect(firstStartPassword(agent.output())).toMatch(/^\S{16,}$/);
    } catch (err) {
      throw err;
    } finally {
      await agent.stop().catch(() => undefined);
    }
  });
});

describe('CORS', () => {
  it('is off unless enabled, and then only for the listed origins', async () => {
    const off = await startAgent();
    try {
      const res = await request(off.url, 'GET', '/health', { headers: { origin: 'https://app.example.com' } });
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await off.stop();
    }
    const on = await startAgent({ config: { api: { enable_cors: true, allowed_origins: ['https://app.example.com'] } } });
    try {
      const ok = await request(on.url, 'GET', '/health', { headers: { origin: 'https://app.example.com' } });
      expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
      const other = await request(on.url, 'GET', '/health', { headers: { origin: 'https://evil.example.com' } });
      expect(other.headers.get('access-control-allow-origin')).toBeNull();
      const preflight = await request(on.url, 'OPTIONS', '/deployments', {
        headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST' },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
      const denied = await request(on.url, 'OPTIONS', '/deployments', {
        headers: { origin: 'https://evil.example.com', 'access-control-request-method': 'POST' },
      });
      expect(denied.status).toBe(403);
    } finally {
      await on.stop();
    }
  });
});
