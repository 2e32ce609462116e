/**
 * The agent on a host without a Docker engine and without nginx: it starts, says once what is missing and which
 * routes answer 503 (no line per retry, no listener-leak warning from the observability app), and the routes that
 * need a missing part answer 503 with a code naming it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from './helpers/agent.js';

const PLUGINS = ['docker', 'deployments', 'edge', 'security', 'observability', 'system'];

describe('missing parts: no Docker engine, no nginx', () => {
  let agent: TestAgent;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agent-missing-'));
    const missing = join(dir, 'missing');
    agent = await startAgent({
      plugins: PLUGINS,
      config: {
        docker: { host: `unix://${join(dir, 'docker.sock')}`, check_interval: 1 },
        observability: { docker_socket: join(dir, 'docker.sock'), sample_interval: 1 },
        proxy: {
          config_dir: join(dir, 'nginx'),
          webroot: join(dir, 'webroot'),
          test_command: [join(missing, 'nginx'), '-t'],
          reload_command: [join(missing, 'nginx'), '-s', 'reload'],
          access_log: join(dir, 'access.log'),
          error_log: join(dir, 'error.log'),
        },
      },
    });
  });

  afterAll(async () => {
    await agent?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const lines = (pattern: RegExp) =>
    agent
      .output()
      .split('\n')
      .filter((l) => pattern.test(l));

  it('answers 503 naming the part on the routes that need it', async () => {
    const containers = await agent.api('GET', '/containers');
    expect(containers.status, containers.text).toBe(503);
    expect(containers.body.code).toBe('DOCKER_UNAVAILABLE');

    const block = await agent.api('POST', '/security/blocked-ips', { body: { ip: '203.0.113.9', reason: 'test' } });
    expect(block.status, block.text).toBe(503);
    expect(block.body).toMatchObject({ code: 'NGINX_UNAVAILABLE', error: expect.stringContaining('nginx is not installed') });
    expect((await agent.api('GET', '/security/blocked-ips')).body.data).toEqual([]);

    const status = await agent.api('GET', '/proxy/status/web');
    expect(status.status, status.text).toBe(200);
    expect(status.body.data.nginx).toMatchObject({ installed: false, config_valid: false });

    // Reads that need neither still work.
    expect((await agent.api('GET', '/deployments')).status).toBe(200);
  });

  it('warns once per missing part, then retries quietly', async () => {
    // check_interval 1 s and sample_interval 1 s: without the backoff and the once-only reports, eight seconds
    // would print a line per attempt of the engine check, the collector and the event stream.
    await new Promise((r) => setTimeout(r, 8000));
    const docker = lines(/Docker engine not reachable/);
    expect(docker).toHaveLength(1);
    expect(docker[0]).toContain('DOCKER_UNAVAILABLE');
    expect(docker[0]).toContain('/api/containers');
    expect(docker[0]).toContain(join(dir, 'docker.sock'));
    const nginx = lines(/nginx is not installed/);
    expect(nginx).toHaveLength(1);
    expect(nginx[0]).toContain('NGINX_UNAVAILABLE');
    expect(lines(/rejected the configuration|no output/)).toEqual([]);
    expect(lines(/container metrics and the health watcher wait for the Docker engine/)).toHaveLength(1);
    expect(lines(/MaxListenersExceededWarning|event stream interrupted|did not answer/)).toEqual([]);
    expect(lines(/"level":(40|50)/)).toHaveLength(2);
  });
});
