/**
 * Tasks follow their deployment, and run with their creator's rights of the moment (issue #14): two tenants (a
 * scoped operator user and a key limited to its deployment each) against each other's tasks and executions; runs
 * refused, recorded as failed and the task disabled when its creator lost access (grant removed, key revoked, user
 * deactivated, no recorded creator); a deleted deployment's tasks removed and its executions kept under the retired
 * name. Real engine (busybox services), real backups plugin.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobal, createTenant, createUser, principalsOf, TENANT_PASSWORD, type Tenant } from '../../backups/test/helpers/tenants.js';

const runId = randomBytes(3).toString('hex');
const A = `st${runId}-a`;
const B = `st${runId}-b`;
const plugins = ['access', 'docker', 'deployments', 'backups', 'scheduler'];
const dataDir = mkdtempSync(join(tmpdir(), 'scheduler-tenancy-'));
let agent: TestAgent;
let alice: Tenant;
let bob: Tenant;
let globalOperator: string;
let taskA: number;
let taskB: number;

const compose = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "exec httpd -f -p 80 -h /www"]
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

async function createDeployment(name: string, token?: string) {
  const res = await agent.api('POST', '/deployments', { ...(token ? { token } : {}), body: { name, compose_content: compose, auto_start: true } });
  expect(res.status, res.text).toBe(201);
}

async function createTask(token: string, deployment: string, body: Record<string, unknown> = {}): Promise<number> {
  const res = await agent.api('POST', '/scheduler/tasks', {
    token,
    body: { deployment_name: deployment, task_type: 'command', service: 'web', command: ['echo', `hello from ${deployment}`], cron_expr: '0 4 * * *', ...body },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

const runTask = async (id: number, token = agent.token) => {
  const res = await agent.api('POST', `/scheduler/tasks/${id}/run`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
};

beforeAll(async () => {
  agent = await startAgent({ plugins, dataDir });
  await createDeployment(A);
  await createDeployment(B);
  [alice, bob] = await Promise.all([createTenant(agent, 'alice', A), createTenant(agent, 'bob', B)]);
  globalOperator = await createGlobal(agent, 'gop', 'operator');
  taskA = await createTask(alice.user, A);
  taskB = await createTask(bob.key, B);
  expect((await runTask(taskA, alice.key)).status).toBe('succeeded');
  expect((await runTask(taskB, bob.user)).status).toBe('succeeded');
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  for (const name of [A, B]) {
    const ids = spawnSync('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${name}`], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean);
    if (ids.length) spawnSync('docker', ['rm', '-f', ...ids]);
    spawnSync('docker', ['network', 'rm', `${name}_default`]);
  }
  rmSync(dataDir, { recursive: true, force: true });
});

describe('tasks follow their deployment', () => {
  it("lists only the tasks and executions of the caller's deployments", async () => {
    for (const [who, token] of principalsOf(alice)) {
      const tasks = await agent.api('GET', '/scheduler/tasks', { token });
      expect(tasks.status, who).toBe(200);
      expect(
        tasks.body.data.map((t: any) => t.id),
        who,
      ).toEqual([taskA]);
      const execs = await agent.api('GET', '/scheduler/executions', { token });
      expect(execs.status, who).toBe(200);
      expect(execs.body.data.length, who).toBeGreaterThan(0);
      expect(
        execs.body.data.every((e: any) => e.task_id === taskA && e.deployment === A),
        who,
      ).toBe(true);
      for (const text of [tasks.text, execs.text]) expect(text, who).not.toContain(B);
      expect((await agent.api('GET', '/scheduler/tasks', { token, query: { deployment: B } })).status, who).toBe(404);
      expect((await agent.api('GET', '/scheduler/executions', { token, query: { deployment: B } })).status, who).toBe(404);
    }
    for (const token of [agent.token, globalOperator]) {
      const ids = (await agent.api('GET', '/scheduler/tasks', { token })).body.data.map((t: any) => t.id);
      expect(ids).toEqual(expect.arrayContaining([taskA, taskB]));
      const execs = (await agent.api('GET', '/scheduler/executions', { token, query: { limit: 500 } })).body.data.map((e: any) => e.task_id);
      expect(execs).toEqual(expect.arrayContaining([taskA, taskB]));
    }
  });

  it("answers 404 for another tenant's task by id, exactly as for an unknown one, and leaves it untouched", async () => {
    const before = (await agent.api('GET', `/scheduler/tasks/${taskB}`)).body.data;
    const unknown = 99_999;
    for (const [who, token] of principalsOf(alice)) {
      for (const [method, path, body] of [
        ['GET', ''],
        ['PUT', '', { enabled: false, command: ['echo', 'pwned'] }],
        ['DELETE', ''],
        ['POST', '/run'],
        ['GET', '/executions'],
      ] as [string, string, unknown?][]) {
        const res = await agent.api(method, `/scheduler/tasks/${taskB}${path}`, { token, body });
        const other = await agent.api(method, `/scheduler/tasks/${unknown}${path}`, { token, body });
        expect([res.status, res.body.code], `${who} ${method} ${path}`).toEqual([404, 'TASK_NOT_FOUND']);
        expect([other.status, other.body.code], `${who} ${method} ${path}`).toEqual([404, 'TASK_NOT_FOUND']);
        expect(res.text).not.toContain(B);
      }
      const create = await agent.api('POST', '/scheduler/tasks', { token, body: { deployment_name: B, task_type: 'restart', cron_expr: '0 4 * * *' } });
      expect(create.status, who).toBe(404);
    }
    const after = (await agent.api('GET', `/scheduler/tasks/${taskB}`)).body.data;
    expect({ ...after, last_run: null, next_run: null }).toEqual({ ...before, last_run: null, next_run: null });
  });

  it('bounds integer query and path parameters', async () => {
    for (const query of [{ offset: '100000000000000000000' }, { offset: '10001' }, { offset: '-1' }, { limit: '0' }, { limit: '501' }]) {
      expect((await agent.api('GET', '/scheduler/executions', { query })).status, JSON.stringify(query)).toBe(400);
      expect((await agent.api('GET', `/scheduler/tasks/${taskA}/executions`, { query })).status, JSON.stringify(query)).toBe(400);
    }
    expect((await agent.api('GET', '/scheduler/tasks/100000000000000000000')).status).toBe(400);
    expect((await agent.api('GET', '/scheduler/executions', { query: { offset: 10_000 } })).status).toBe(200);
  });
});

describe("a task runs with its creator's rights of the moment", () => {
  it('does not run once its creator lost its grant: the execution says why and the task is disabled', async () => {
    const dave = await createTenant(agent, 'dave', A);
    const id = await createTask(dave.user, A);
    expect((await agent.api('GET', `/scheduler/tasks/${id}`)).body.data.run_as).toMatchObject({ id: `user:${dave.userId}`, name: dave.username });
    expect((await runTask(id)).status).toBe('succeeded');
    expect((await agent.api('DELETE', `/users/${dave.userId}/deployments/${A}`)).status).toBe(200);
    // Run by an admin: the task still runs as dave, who may no longer write to A.
    const refused = await runTask(id);
    expect(refused.status).toBe('failed');
    expect(refused.error).toContain(`no longer has write access to deployment '${A}'`);
    expect(refused.output).not.toContain('hello');
    const task = (await agent.api('GET', `/scheduler/tasks/${id}`)).body.data;
    expect(task).toMatchObject({ enabled: false, next_run: null });
    expect(task.disabled_reason).toContain('no longer has write access');
    // Whoever re-enables it takes it over: it runs again, with the rights of that principal.
    const again = await agent.api('PUT', `/scheduler/tasks/${id}`, { body: { enabled: true } });
    expect(again.body.data).toMatchObject({ enabled: true, disabled_reason: null, run_as: { id: 'user:1' } });
    expect((await runTask(id)).status).toBe('succeeded');
  });

  it('stops a cron task whose key was revoked, at its next run', async () => {
    const erin = await createTenant(agent, 'erin', A);
    const id = await createTask(erin.key, A, { cron_expr: '* * * * * *' });
    await until(
      () => agent.api('GET', `/scheduler/tasks/${id}/executions`),
      (r) => r.body.data.some((e: any) => e.trigger === 'cron' && e.status === 'succeeded'),
    );
    expect((await agent.api('POST', `/api/apikeys/${erin.keyId}/revoke`, { token: erin.user })).status).toBe(200);
    const execs = await until(
      () => agent.api('GET', `/scheduler/tasks/${id}/executions`),
      (r) => r.body.data[0]?.status === 'failed',
    );
    expect(execs.body.data[0]).toMatchObject({ trigger: 'cron', status: 'failed' });
    expect(execs.body.data[0].error).toContain('can no longer act');
    const task = (await agent.api('GET', `/scheduler/tasks/${id}`)).body.data;
    expect(task).toMatchObject({ enabled: false, next_run: null });
    // Disabled: no further runs.
    const count = execs.body.data.length;
    await new Promise((r) => setTimeout(r, 2500));
    expect((await agent.api('GET', `/scheduler/tasks/${id}/executions`)).body.data).toHaveLength(count);
  });

  it('does not back up for a deactivated user, nor for an operator who lost scheduler:write', async () => {
    const frank = await createTenant(agent, 'frank', A);
    const backup = await createTask(frank.user, A, { task_type: 'backup', service: undefined, command: undefined });
    const restart = await createTask(frank.key, A, { task_type: 'restart', service: undefined, command: undefined });
    // A viewer now: it reads, it no longer runs tasks.
    expect((await agent.api('PUT', `/users/${frank.userId}`, { body: { role: 'viewer' } })).status).toBe(200);
    const byViewer = await runTask(restart);
    expect(byViewer.status).toBe('failed');
    expect(byViewer.error).toContain("no longer holds 'scheduler:write'");
    expect((await agent.api('PUT', `/users/${frank.userId}`, { body: { is_active: false } })).status).toBe(200);
    const backupsBefore = (await agent.api('GET', `/deployments/${A}/backups`)).body.data.length;
    const refused = await runTask(backup);
    expect(refused.status).toBe('failed');
    expect(refused.error).toContain('can no longer act');
    expect((await agent.api('GET', `/deployments/${A}/backups`)).body.data).toHaveLength(backupsBefore);
    for (const id of [backup, restart]) expect((await agent.api('GET', `/scheduler/tasks/${id}`)).body.data.enabled).toBe(false);
  });

  it('treats a task without a recorded creator (older agent) as no longer authorised until someone re-enables it', async () => {
    const id = await createTask(agent.token, A);
    await agent.stop();
    const file = join(dataDir, 'plugins', 'scheduler', 'tasks.json');
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    for (const t of doc.tasks) if (t.id === id) delete t.run_as;
    writeFileSync(file, JSON.stringify(doc));
    agent = await startAgent({ plugins, dataDir });
    bob.user = await agent.login(bob.username, TENANT_PASSWORD);
    expect((await agent.api('GET', `/scheduler/tasks/${id}`)).body.data.run_as).toBeNull();
    const refused = await runTask(id);
    expect(refused.status).toBe('failed');
    expect(refused.error).toContain('no recorded creator');
    expect((await agent.api('GET', `/scheduler/tasks/${id}`)).body.data.enabled).toBe(false);
    expect((await agent.api('PUT', `/scheduler/tasks/${id}`, { body: { enabled: true } })).status).toBe(200);
    expect((await runTask(id)).status).toBe('succeeded');
  });
});

describe('a deleted deployment', () => {
  it('loses its tasks; its executions stay under the retired name, out of reach of a new deployment of the same name', async () => {
    const before = (await agent.api('GET', '/scheduler/executions', { query: { limit: 500 } })).body.data.filter((e: any) => e.task_id === taskB);
    expect(before.length).toBeGreaterThan(0);
    expect((await agent.api('DELETE', `/deployments/${B}`)).status).toBe(200);
    expect((await agent.api('GET', `/scheduler/tasks/${taskB}`)).status).toBe(404);
    expect((await agent.api('GET', '/scheduler/tasks')).body.data.map((t: any) => t.id)).not.toContain(taskB);
    const retired = (await agent.api('GET', '/scheduler/executions', { query: { limit: 500 } })).body.data.filter((e: any) => e.task_id === taskB);
    expect(retired.map((e: any) => e.id)).toEqual(before.map((e: any) => e.id));
    const retiredName = retired[0].deployment as string;
    expect(retiredName).toMatch(new RegExp(`^${B}~\\d{14}$`));
    const byName = await agent.api('GET', '/scheduler/executions', { query: { deployment: retiredName } });
    expect(byName.body.data.map((e: any) => e.id)).toEqual(before.map((e: any) => e.id));

    const carol = await createUser(agent, `carol-${runId}`, 'operator');
    await createDeployment(B, carol.token);
    for (const token of [carol.token, bob.user, bob.key]) {
      // bob's key still lists the name B: the new B is not its owner's, so it reaches nothing.
      const tasks = await agent.api('GET', '/scheduler/tasks', { token });
      expect(tasks.body.data).toEqual([]);
      expect((await agent.api('GET', '/scheduler/executions', { token })).body.data).toEqual([]);
      expect((await agent.api('GET', '/scheduler/executions', { token, query: { deployment: retiredName } })).status).toBe(404);
      expect((await agent.api('GET', `/scheduler/tasks/${taskB}/executions`, { token })).status).toBe(404);
    }
    // The new B starts empty, and its own tasks are its own.
    const fresh = await createTask(carol.token, B);
    expect((await agent.api('GET', '/scheduler/tasks', { token: carol.token })).body.data.map((t: any) => t.id)).toEqual([fresh]);
  });
});
