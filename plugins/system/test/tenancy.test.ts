/**
 * Tenancy of the system routes (issue #14): `/stats` is filtered — host and agent figures for everyone, deployments
 * and containers of the caller's deployments only, containers of no deployment and the image count only for global
 * principals — against two real deployments and a container of none; settings (read and write) and the doctor are
 * global: 403 GLOBAL_SCOPE_REQUIRED to two tenants, each a scoped user and a scoped key.
 */
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobalUser, createTenant, expectGlobalOnly, principals, type Tenant } from '../../docker/test/tenants.js';

const RUN = `s${randomBytes(3).toString('hex')}`;
const A = `${RUN}-a`;
const B = `${RUN}-b`;
const LOOSE = `${RUN}-loose`;
const COMPOSE = `services:
  app:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "while true; do sleep 1; done"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

const docker = (...args: string[]) =>
  new Promise<string>((resolve, reject) => execFile('docker', args, { encoding: 'utf8' }, (err, stdout) => (err ? reject(err) : resolve(stdout))));

describe('system routes and tenants', () => {
  let agent: TestAgent;
  let alice: Tenant;
  let bob: Tenant;
  let operator: string;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['access', 'system', 'docker', 'deployments'] });
    for (const name of [A, B]) {
      const created = await agent.api('POST', '/deployments', { body: { name, compose_content: COMPOSE, auto_start: true } });
      expect(created.status, created.text).toBe(201);
    }
    await docker('run', '-d', '--name', LOOSE, '--label', 'agent.test=1', 'agent-test/busybox:latest', 'sh', '-c', 'while true; do sleep 1; done');
    [alice, bob] = await Promise.all([createTenant(agent, `alice${RUN}`, [A]), createTenant(agent, `bob${RUN}`, [B])]);
    operator = await createGlobalUser(agent, `gop${RUN}`);
  });
  afterAll(async () => {
    for (const name of [A, B]) await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    await agent?.stop();
    await docker('rm', '-f', LOOSE).catch(() => undefined);
  });

  it("counts only the caller's deployments and containers; host figures for everyone", async () => {
    for (const [who, token] of [...principals(alice), ...principals(bob)]) {
      const res = await agent.api('GET', '/stats', { token });
      expect(res.status, `${who}: ${res.text}`).toBe(200);
      const s = res.body.data;
      expect(s.deployments, who).toEqual({ total: 1, by_status: { running: 1 } });
      expect(s.docker, who).toMatchObject({ available: true, containers: { total: 1, running: 1, stopped: 0 }, images: null, volumes: null });
      expect(s.host.cpu.count, who).toBeGreaterThan(0);
      expect(s.host.memory.total_bytes, who).toBeGreaterThan(0);
      expect(s.agent.version, who).toMatch(/^\d+\.\d+\.\d+/);
      expect(res.text, who).not.toContain(who.startsWith('alice') ? B : A);
    }
    const global = (await agent.api('GET', '/stats', { token: operator })).body.data;
    expect(global.deployments.total).toBeGreaterThanOrEqual(2);
    // Both deployments' containers and the one of no deployment.
    expect(global.docker.containers.total).toBeGreaterThanOrEqual(3);
    expect(global.docker.images).toEqual(expect.any(Number));
  });

  it('refuses settings and the doctor to scoped principals', async () => {
    for (const [who, token] of [...principals(alice), ...principals(bob)]) {
      expectGlobalOnly(await agent.api('GET', '/settings', { token }), `${who} GET /settings`);
      // Changing settings and the doctor need settings:write and doctor:read, which operators lack: the permission
      // answers first (FORBIDDEN); with them, scope does (below).
      for (const [method, path] of [
        ['PUT', '/settings'],
        ['GET', '/system/doctor'],
      ] as const) {
        const res = await agent.api(method, path, { token, body: method === 'PUT' ? { access: { retention_days: 1 } } : undefined });
        expect(res.status, `${who} ${method} ${path}`).toBe(403);
      }
    }
    // Whatever its permissions say: a scoped user holding doctor:read and settings:write reaches neither.
    const strong = await agent.api('POST', '/users', {
      body: {
        username: `strong${RUN}`,
        email: `strong${RUN}@example.org`,
        password: 'Tenant-Pass-2024!x',
        role: 'operator',
        permissions: ['doctor:read', 'settings:write'],
      },
    });
    expect(strong.status, strong.text).toBe(201);
    const token = await agent.login(`strong${RUN}`, 'Tenant-Pass-2024!x');
    expectGlobalOnly(await agent.api('GET', '/system/doctor', { token }), 'scoped user with doctor:read');
    expectGlobalOnly(await agent.api('PUT', '/settings', { token, body: { access: { retention_days: 1 } } }), 'scoped user with settings:write');
    const settings = await agent.api('GET', '/settings', { token: operator });
    expect(settings.status).toBe(200);
    expect(settings.body.data.values.access.retention_days).toBe(365);
  });
});
