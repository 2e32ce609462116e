/**
 * Scheduled tasks against the real engine: commands run inside a busybox service, restarts, backups through the
 * backups plugin, cron validation, executions, persistence across an agent restart, and a deleted deployment.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const runId = randomBytes(3).toString('hex');
const app = `s${runId}-app`;
const gone = `s${runId}-gone`;
const plugins = ['docker', 'deployments', 'backups', 'scheduler'];
const dataDir = mkdtempSync(join(tmpdir(), 'scheduler-data-'));
let agent: TestAgent;

const compose = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "echo hello > /tmp/greeting; exec httpd -f -p 80 -h /www"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`condition not met: ${JSON.stringify(v).slice(0, 400)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const createTask = (body: Record<string, unknown>) =>
  agent.api('POST', '/scheduler/tasks', { body: { deployment_name: app, cron_expr: '0 4 * * *', ...body } });

beforeAll(async () => {
  agent = await startAgent({ plugins, dataDir });
  for (const name of [app, gone]) {
    const res = await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } });
    expect(res.status, res.text).toBe(201);
  }
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  for (const name of [app, gone]) {
    const ids = spawnSync('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${name}`], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean);
    if (ids.length) spawnSync('docker', ['rm', '-f', ...ids]);
    spawnSync('docker', ['network', 'rm', `${name}_default`]);
  }
  rmSync(dataDir, { recursive: true, force: true });
});

describe('scheduled tasks', () => {
  let commandTask: number;

  it('refuses invalid cron expressions with the reason, and other bad input', async () => {
    for (const cron of ['61 * * * *', 'every day', '* * *', '* * * * * * *']) {
      const res = await createTask({ task_type: 'restart', cron_expr: cron });
      expect(res.status, cron).toBe(400);
      expect(res.body.code).toBe('INVALID_CRON');
      expect(res.body.error).toContain('cron_expr');
    }
    expect(
      (await agent.api('POST', '/scheduler/tasks', { body: { deployment_name: 'no-such-app', task_type: 'restart', cron_expr: '0 4 * * *' } })).status,
    ).toBe(404);
    expect((await createTask({ task_type: 'command', service: 'web' })).status).toBe(400);
    expect((await createTask({ task_type: 'command', service: 'nope', command: ['true'] })).status).toBe(400);
    expect((await createTask({ task_type: 'reboot-host' })).status).toBe(400);
    expect((await createTask({ task_type: 'restart', extra: 1 })).status).toBe(400);
  });

  it('creates, reads, updates a command task and runs it now inside the service', async () => {
    const res = await createTask({ task_type: 'command', service: 'web', command: ['sh', '-c', 'cat /tmp/greeting; echo "$0 ran"'], description: 'greet' });
    expect(res.status, res.text).toBe(201);
    commandTask = res.body.data.id;
    expect(res.body.data).toMatchObject({ task_type: 'command', enabled: true, service: 'web', next_run: expect.any(String), last_run: null });

    const run = await agent.api('POST', `/scheduler/tasks/${commandTask}/run`);
    expect(run.status, run.text).toBe(200);
    expect(run.body.data).toMatchObject({ task_id: commandTask, status: 'succeeded', trigger: 'manual', error: null });
    expect(run.body.data.output).toContain('hello');
    expect(run.body.data.output).toContain('sh ran');
    expect(run.body.data.duration_ms).toBeGreaterThanOrEqual(0);

    const failing = await agent.api('PUT', `/scheduler/tasks/${commandTask}`, { body: { command: ['sh', '-c', 'echo broken >&2; exit 3'] } });
    expect(failing.status, failing.text).toBe(200);
    const bad = await agent.api('POST', `/scheduler/tasks/${commandTask}/run`);
    expect(bad.body.data).toMatchObject({ status: 'failed', error: 'command exited with 3' });
    expect(bad.body.data.output).toContain('broken');

    const execs = await agent.api('GET', `/scheduler/tasks/${commandTask}/executions`);
    expect(execs.body.data.map((e: any) => e.status)).toEqual(['failed', 'succeeded']);
    const got = await agent.api('GET', `/scheduler/tasks/${commandTask}`);
    expect(got.body.data.last_run).toMatchObject({ status: 'failed' });
    expect((await agent.api('PUT', `/scheduler/tasks/${commandTask}`, { body: { cron_expr: '99 * * * *' } })).status).toBe(400);
  });

  it('bounds the output of a chatty command', async () => {
    const res = await createTask({
      task_type: 'command',
      service: 'web',
      command: ['sh', '-c', 'i=0; while [ $i -lt 4000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done'],
    });
    const run = await agent.api('POST', `/scheduler/tasks/${res.body.data.id}/run`);
    expect(run.body.data.status).toBe('succeeded');
    expect(run.body.data.output.length).toBeLessThan(20_000);
    expect(run.body.data.output).toContain('truncated');
    await agent.api('DELETE', `/scheduler/tasks/${res.body.data.id}`);
  });

  it('fires on its cron schedule', async () => {
    const res = await createTask({ task_type: 'command', service: 'web', command: ['echo', 'tick'], cron_expr: '* * * * * *' });
    const id = res.body.data.id;
    const execs = await until(
      () => agent.api('GET', `/scheduler/tasks/${id}/executions`),
      (r) => r.body.data.filter((e: any) => e.trigger === 'cron' && e.status === 'succeeded').length >= 2,
    );
    expect(execs.body.data[0].output).toContain('tick');
    await agent.api('PUT', `/scheduler/tasks/${id}`, { body: { enabled: false } });
    const recent = await agent.api('GET', '/scheduler/executions', { query: { limit: 10 } });
    expect(recent.body.data.some((e: any) => e.task_id === id)).toBe(true);
    expect((await agent.api('DELETE', `/scheduler/tasks/${id}`)).status).toBe(200);
    expect((await agent.api('GET', `/scheduler/tasks/${id}`)).status).toBe(404);
  });

  it('restarts a deployment and backs it up through the backups plugin', async () => {
    const restart = await createTask({ task_type: 'restart' });
    const r = await agent.api('POST', `/scheduler/tasks/${restart.body.data.id}/run`);
    expect(r.body.data, JSON.stringify(r.body)).toMatchObject({ status: 'succeeded' });
    expect(r.body.data.output).toContain(`restarted ${app}`);

    const backup = await createTask({ task_type: 'backup', retention: 1 });
    expect(backup.status, backup.text).toBe(201);
    for (let i = 0; i < 2; i++) {
      const b = await agent.api('POST', `/scheduler/tasks/${backup.body.data.id}/run`);
      expect(b.body.data.status, b.body.data.error).toBe('succeeded');
      expect(b.body.data.output).toMatch(/backup bkp_\w+ completed/);
    }
    const backups = await agent.api('GET', `/deployments/${app}/backups`);
    expect(backups.body.data).toHaveLength(1);
    expect(backups.body.data[0].trigger).toBe('task');
  });

  it('removes the tasks of a deleted deployment (a new one of the same name does not get them back)', async () => {
    const res = await agent.api('POST', '/scheduler/tasks', { body: { deployment_name: gone, task_type: 'restart', cron_expr: '0 4 * * *' } });
    expect(res.status).toBe(201);
    expect((await agent.api('DELETE', `/deployments/${gone}`)).status).toBe(200);
    await until(
      () => agent.api('GET', `/scheduler/tasks/${res.body.data.id}`),
      (r) => r.status === 404,
    );
    expect((await agent.api('GET', '/scheduler/tasks')).body.data.map((t: any) => t.deployment_name)).not.toContain(gone);
  });

  it('keeps tasks across an agent restart', async () => {
    const before = (await agent.api('GET', '/scheduler/tasks')).body.data;
    await agent.stop();
    agent = await startAgent({ plugins, dataDir });
    const after = (await agent.api('GET', '/scheduler/tasks')).body.data;
    expect(after.map((t: any) => [t.id, t.enabled, t.cron_expr])).toEqual(before.map((t: any) => [t.id, t.enabled, t.cron_expr]));
    expect(after.find((t: any) => t.id === commandTask).next_run).toEqual(expect.any(String));
    const execs = await agent.api('GET', `/scheduler/tasks/${commandTask}/executions`);
    expect(execs.body.data.length).toBeGreaterThanOrEqual(2);
  });
});
