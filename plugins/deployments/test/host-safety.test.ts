/**
 * Host safety through the API, against the real engine: a container that rewrites its own compose file (or swaps it
 * for a symlink) gains nothing at the next read, restart or start; a bind source turned into a symlink is refused
 * at the next start; exceptions and the policy switch are an admin's; names of other compose projects are not taken;
 * a plugin's deployable is checked like any file.
 */
import { existsSync, readFileSync, renameSync, symlinkSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName, until } from './helpers.js';

const PASS = 'Hs-Operator-Pass-1';
const EVIL = 'services:\\n  app:\\n    image: agent-test/busybox:latest\\n    privileged: true\\n    volumes: [\\"/:/host\\"]\\n';

/** Mounts of the running containers of a project, and whether any is privileged. */
async function exposure(project: string): Promise<{ ids: string[]; sources: string[]; privileged: boolean }> {
  const { stdout } = await execa('docker', ['ps', '-q', '--filter', `label=com.docker.compose.project=${project}`]);
  const ids = stdout.split('\n').filter(Boolean);
  if (!ids.length) return { ids, sources: [], privileged: false };
  const inspect = JSON.parse((await execa('docker', ['inspect', ...ids])).stdout) as { Mounts: { Source: string }[]; HostConfig: { Privileged: boolean } }[];
  return { ids: ids.sort(), sources: inspect.flatMap((c) => c.Mounts.map((m) => m.Source)), privileged: inspect.some((c) => c.HostConfig.Privileged) };
}

describe('host safety through the deployments API', () => {
  let agent: TestAgent;
  let operator: string;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments', 'access', 'system', join(import.meta.dirname, 'fixtures', 'deployable-probe')] });
    const user = await agent.api('POST', '/users', {
      body: { username: `hsop${Date.now() % 100000}`, email: 'hs@example.org', password: PASS, role: 'operator' },
    });
    expect(user.status, user.text).toBe(201);
    operator = await agent.login(user.body.data.username, PASS);
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
  });

  it('a container rewriting its compose file, or swapping it for a symlink, gains nothing (and needs an exception to see it)', async () => {
    const name = uniqueName('rewriter');
    // The container sees the whole folder read-write and keeps replacing the compose file: with a file that would
    // hand it the host, and with a symlink to a host secret.
    const compose = `services:
  app:
    image: agent-test/busybox:latest
    volumes: [".:/app"]
    stop_signal: SIGKILL
    labels: {agent.test: "1"}
    command: ["sh", "-c", "while true; do printf '${EVIL}' > /app/c.tmp; mv -f /app/c.tmp /app/docker-compose.yml; sleep 0.01; ln -sf /etc/shadow /app/docker-compose.yml; ln -sf /etc/shadow /app/.env; sleep 0.01; done"]
`;
    // The folder holds the compose file and .env: mounting it read-write needs an admin's exception.
    const refused = await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body).toMatchObject({ code: 'HOST_SAFETY', service: 'app', key: 'volumes', exception: 'volumes.folder:rw' });
    // Granted, a container that rewrites the files still gains nothing: what runs is checked again at every start.
    const created = await agent.api('POST', '/deployments', {
      body: { name, compose_content: compose, auto_start: true, host_safety_exceptions: ['volumes.folder:rw'] },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.start_error).toBeNull();
    const dir = join(agent.dataDir, 'deployments', name);
    // `ln -sf` unlinks before it links: for a moment there is no file at all.
    const current = () => {
      try {
        return readFileSync(join(dir, 'docker-compose.yml'), 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
        throw err;
      }
    };
    await until(async () => current().includes('privileged'), Boolean, 20_000, 20);
    const before = await exposure(name);
    expect(before.ids).toHaveLength(1);
    const shadow = readFileSync('/etc/shadow', 'utf8');

    for (let i = 0; i < 8; i++) {
      const restart = await agent.api('POST', `/deployments/${name}/restart`);
      expect([400, 409], restart.text).toContain(restart.status);
      expect(['HOST_SAFETY', 'UNSAFE_FILE']).toContain(restart.body.code);
      const start = await agent.api('POST', `/deployments/${name}/start`);
      expect([400, 409], start.text).toContain(start.status);
      const details = await agent.api('GET', `/deployments/${name}`);
      expect(details.status).toBe(200);
      expect(details.text).not.toContain(shadow.split('\n')[0]!);
      expect(details.body.data.compose_content === '' || details.body.data.compose_content.includes('privileged')).toBe(true);
      const report = await agent.api('GET', `/deployments/${name}/host-safety`);
      expect([200, 409]).toContain(report.status);
      if (report.status === 200) expect(report.body.data.passes).toBe(false);
      const now = await exposure(name);
      expect(now.privileged).toBe(false);
      expect(now.sources).not.toContain('/');
      expect(now.ids).toEqual(before.ids);
    }
    // The checked model that last ran still removes it, whatever the folder holds now.
    const removed = await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    expect(removed.status, removed.text).toBe(200);
    expect((await exposure(name)).ids).toEqual([]);
    expect(existsSync(dir)).toBe(false);
  }, 180_000);

  it('refuses to start when a bind source was turned into a symlink since the check', async () => {
    const name = uniqueName('moved');
    const compose =
      'services:\n  app:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    stop_signal: SIGKILL\n    volumes: ["./data:/data"]\n    labels: {agent.test: "1"}\n';
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } })).status).toBe(201);
    expect((await agent.api('POST', `/deployments/${name}/stop`)).status).toBe(200);
    const dir = join(agent.dataDir, 'deployments', name);
    renameSync(join(dir, 'data'), join(dir, 'data.old'));
    symlinkSync('/', join(dir, 'data'));
    const start = await agent.api('POST', `/deployments/${name}/start`);
    expect(start.status).toBe(400);
    expect(start.body).toMatchObject({ code: 'HOST_SAFETY', service: 'app', key: 'volumes' });
    expect((await exposure(name)).ids).toEqual([]);
    rmSync(join(dir, 'data'));
    renameSync(join(dir, 'data.old'), join(dir, 'data'));
    expect((await agent.api('POST', `/deployments/${name}/start`)).status).toBe(200);
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  });

  it('leaves exceptions and the policy switch to admins, visible in details and plans', async () => {
    const name = uniqueName('vpn');
    const compose =
      'services:\n  app:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    cap_add: [NET_ADMIN]\n    labels: {agent.test: "1"}\n';
    const refused = await agent.api('POST', '/deployments', { token: operator, body: { name, compose_content: compose } });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ code: 'HOST_SAFETY', service: 'app', key: 'cap_add', exception: 'cap_add:NET_ADMIN' });
    expect(refused.body.error).toContain("exception 'cap_add:NET_ADMIN'");
    const selfGranted = await agent.api('POST', '/deployments', {
      token: operator,
      body: { name, compose_content: compose, host_safety_exceptions: ['cap_add:NET_ADMIN'] },
    });
    expect(selfGranted.status).toBe(403);

    const plan = await agent.api('POST', '/deployments', {
      query: { plan: true },
      body: { name, compose_content: compose, host_safety_exceptions: ['cap_add:NET_ADMIN'] },
    });
    expect(plan.status, plan.text).toBe(201);
    expect(plan.body.data.changes).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'host-safety', after: expect.objectContaining({ used: ['cap_add:NET_ADMIN'] }) })]),
    );
    const applied = await agent.api('POST', `/plans/${plan.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(201);
    const details = await agent.api('GET', `/deployments/${name}`);
    expect(details.body.data.host_safety).toMatchObject({ policy: 'enforced', exceptions: ['cap_add:NET_ADMIN'] });

    // The operator may not widen or narrow them; an admin may, and it is audited.
    expect((await agent.api('PUT', `/deployments/${name}/host-safety`, { token: operator, body: { exceptions: ['cap_add:SYS_ADMIN'] } })).status).toBe(403);
    const set = await agent.api('PUT', `/deployments/${name}/host-safety`, { body: { exceptions: [] } });
    expect(set.status, set.text).toBe(200);
    const audit = await agent.api('GET', '/audit/events', { query: { resource_id: name } });
    expect(audit.body.data.map((e: any) => e.action)).toEqual(expect.arrayContaining([expect.stringMatching(/setHostSafety/)]));
    const start = await agent.api('POST', `/deployments/${name}/start`);
    expect(start.body.code).toBe('HOST_SAFETY');
    expect((await agent.api('PUT', `/deployments/${name}/host-safety`, { body: { exceptions: ['not an exception'] } })).status).toBe(400);

    // Turning the policy off is an admin's decision too: holding settings:write is not enough (sending the value back
    // unchanged, a read-modify-write of all settings, is fine).
    const settingsUser = await agent.api('POST', '/users', {
      body: {
        username: `hsset${Date.now() % 100000}`,
        email: 'set@example.org',
        password: PASS,
        role: 'viewer',
        permissions: ['settings:write'],
        scope: 'global',
      },
    });
    expect(settingsUser.status, settingsUser.text).toBe(201);
    const setter = await agent.login(settingsUser.body.data.username, PASS);
    const off = await agent.api('PUT', '/settings', { token: setter, body: { deployments: { host_safety: false } } });
    expect(off.status).toBe(403);
    expect(off.body.error).toContain('host-safety:write');
    expect((await agent.api('PUT', '/settings', { token: setter, body: { deployments: { host_safety: true } } })).status).toBe(200);
    // Settings are global: an operator limited to its deployments does not even read them.
    expect((await agent.api('PUT', '/settings', { token: operator, body: { deployments: { host_safety: false } } })).status).toBe(403);
    expect((await agent.api('GET', '/settings', { token: operator })).status).toBe(403);
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  });

  it('does not take over the names of other compose projects', async () => {
    const reserved = await agent.api('POST', '/deployments', {
      body: { name: 'agent-infra-database', compose_content: 'services:\n  a:\n    image: agent-test/busybox:latest\n' },
    });
    expect(reserved.status).toBe(400);
    expect(reserved.body.code).toBe('NAME_RESERVED');
    const foreign = uniqueName('foreign');
    const dir = mkdtempSync(join(tmpdir(), 'agent-foreign-'));
    writeFileSync(
      join(dir, 'docker-compose.yml'),
      'services:\n  a:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    labels: {agent.test: "1"}\n',
    );
    await execa('docker-compose', ['-p', foreign, 'up', '-d'], { cwd: dir });
    try {
      const taken = await agent.api('POST', '/deployments', {
        body: { name: foreign, compose_content: 'services:\n  a:\n    image: agent-test/busybox:latest\n' },
      });
      expect(taken.status).toBe(409);
      expect(taken.body).toMatchObject({ code: 'NAME_IN_USE', containers: 1 });
    } finally {
      await execa('docker-compose', ['-p', foreign, 'down'], { cwd: dir, reject: false });
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("checks what a plugin's deployable renders like any other file", async () => {
    const name = uniqueName('deployable');
    const refused = await agent.api('POST', '/plugins/deployable-probe/deployments', { body: { name, config: { privileged: true } } });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body).toMatchObject({ code: 'HOST_SAFETY', key: 'privileged' });
    const fine = await agent.api('POST', '/plugins/deployable-probe/deployments', { body: { name, config: { privileged: false } } });
    expect(fine.status, fine.text).toBe(201);
    expect((await exposure(name)).privileged).toBe(false);
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  });
});
