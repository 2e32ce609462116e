/**
 * Every change is one operation: the request, its `?plan=true` preview and a plan's apply run the same `prepare`.
 * A preview of a change the checks refuse answers exactly what the request answers (status and body) and stores no
 * plan; a plan's apply runs the checks again; a plan whose files were edited is stale before anything is checked.
 * Each refusal below is one the previews of old did not see (they restated part of the handler's checks).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName } from './helpers.js';

const compose = (extra = '') =>
  `services:\n  app:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    stop_signal: SIGKILL\n    labels: {agent.test: "1"}\n${extra}`;

describe('operations: previews and applies cannot drift from the request', () => {
  let agent: TestAgent;
  let root: string;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments'] });
    root = join(agent.dataDir, 'deployments');
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
  });

  const plans = async () => (await agent.api('GET', '/plans')).body.data.length as number;
  const status = async (name: string) => (await agent.api('GET', `/deployments/${name}`)).body.data.status as string;

  /** The preview first (it must change nothing), then the request: the same status and the same `{error, code, …}`. */
  async function sameRefusal(method: string, path: string, options: { body?: unknown } = {}) {
    const before = await plans();
    const preview = await agent.api(method, path, { ...options, query: { plan: true } });
    expect(preview.status, preview.text).toBeGreaterThanOrEqual(400);
    expect(await plans()).toBe(before);
    const direct = await agent.api(method, path, options);
    expect(direct.status, direct.text).toBe(preview.status);
    expect(direct.body).toEqual(preview.body);
    return direct.body as { error: string; code: string };
  }

  it('refuses the preview of a create as the create: duplicate variables, a folder that is not a deployment', async () => {
    const name = uniqueName('op-create');
    const twice = await sameRefusal('POST', '/deployments', {
      body: {
        name,
        compose_content: compose(),
        env_vars: [
          { key: 'A', value: 'x' },
          { key: 'A', value: 'y' },
        ],
      },
    });
    expect(twice).toMatchObject({ code: 'VALIDATION_FAILED', field: 'env_vars' });
    expect(twice.error).toMatch(/twice/);

    const squatted = uniqueName('op-folder');
    mkdirSync(join(root, squatted));
    writeFileSync(join(root, squatted, 'notes.txt'), 'not a deployment');
    expect(await sameRefusal('POST', '/deployments', { body: { name: squatted, compose_content: compose() } })).toMatchObject({ code: 'DEPLOYMENT_EXISTS' });
    expect(readFileSync(join(root, squatted, 'notes.txt'), 'utf8')).toBe('not a deployment');
  });

  it('refuses the preview of an update and of a stop as the requests', async () => {
    const name = uniqueName('op-update');
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose() } })).status).toBe(201);
    const twice = await sameRefusal('PUT', `/deployments/${name}`, {
      body: {
        env_vars: [
          { key: 'B', value: '1' },
          { key: 'B', value: '2' },
        ],
      },
    });
    expect(twice.code).toBe('VALIDATION_FAILED');
    expect(await sameRefusal('POST', `/deployments/${name}/stop`)).toMatchObject({ code: 'DEPLOYMENT_NOT_RUNNING', status: 'stopped' });
    expect(await sameRefusal('PUT', `/deployments/${uniqueName('op-none')}/host-safety`, { body: { exceptions: [] } })).toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('checks the files in the preview of a start; only the start itself is a failed start', async () => {
    const name = uniqueName('op-start');
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose() } })).status).toBe(201);
    // A container (or anyone) rewrote the compose file on disk since: the start is refused by the policy.
    writeFileSync(join(root, name, 'docker-compose.yml'), compose('    privileged: true\n'));
    const before = await plans();
    const preview = await agent.api('POST', `/deployments/${name}/start`, { query: { plan: true } });
    expect(preview.status, preview.text).toBe(400);
    expect(preview.body).toMatchObject({ code: 'HOST_SAFETY', service: 'app', key: 'privileged' });
    expect(await plans()).toBe(before);
    // The preview changed nothing; the refused start is recorded as a failed start.
    expect(await status(name)).toBe('stopped');
    const direct = await agent.api('POST', `/deployments/${name}/start`);
    expect(direct.status).toBe(400);
    expect(direct.body).toEqual(preview.body);
    expect(await status(name)).toBe('failed');
  });

  it('runs the checks again when a plan is applied: a start planned before its exception was revoked is refused', async () => {
    const name = uniqueName('op-revoked');
    const created = await agent.api('POST', '/deployments', {
      body: { name, compose_content: compose('    cap_add: [NET_ADMIN]\n'), host_safety_exceptions: ['cap_add:NET_ADMIN'] },
    });
    expect(created.status, created.text).toBe(201);
    const plan = await agent.api('POST', `/deployments/${name}/start`, { query: { plan: true } });
    expect(plan.status, plan.text).toBe(201);
    expect((await agent.api('PUT', `/deployments/${name}/host-safety`, { body: { exceptions: [] } })).status).toBe(200);
    const applied = await agent.api('POST', `/plans/${plan.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(400);
    expect(applied.body).toMatchObject({ code: 'HOST_SAFETY', exception: 'cap_add:NET_ADMIN' });
    const stored = await agent.api('GET', `/plans/${plan.body.data.id}`);
    expect(stored.body.data).toMatchObject({ status: 'failed', apply_error: { code: 'HOST_SAFETY' } });
    expect(await status(name)).not.toBe('running');
  });

  it('answers PLAN_STALE for a plan whose files were edited, before checking the edited files', async () => {
    const name = uniqueName('op-stale');
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose() } })).status).toBe(201);
    const plan = await agent.api('PUT', `/deployments/${name}`, { query: { plan: true }, body: { env_vars: [{ key: 'MODE', value: 'x' }] } });
    expect(plan.status, plan.text).toBe(201);
    const file = join(root, name, 'docker-compose.yml');
    writeFileSync(file, compose('    privileged: true\n'));
    const applied = await agent.api('POST', `/plans/${plan.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(409);
    expect(applied.body).toMatchObject({ code: 'PLAN_STALE', drifted: [`file:${file}`] });
    expect((await agent.api('GET', `/plans/${plan.body.data.id}`)).body.data.status).toBe('available');
  });
});
