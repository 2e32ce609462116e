/**
 * Swarm deployments (`runtime: swarm`, issue 29) against the real engine's single-node swarm (test/env initialises
 * one when the engine has none): a stack deployed from the checked model with safe update defaults, its replicas in
 * the deployment's answers, scale (plannable, audited), stop/start, delete; and the attacker's spellings of Swarm's
 * own dangerous keys from a principal limited to its deployments, refused before anything reaches the engine.
 */
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createTenant, type Tenant } from '../../docker/test/tenants.js';
import { busyboxStack, cleanupStacks, runId, uniqueName, until } from './helpers.js';

const stackFile = (replicas = 2, extra = '') => busyboxStack({ web: { replicas } }, extra);

const services = async (stack: string) => {
  const { stdout } = await execa('docker', ['service', 'ls', '--filter', `label=com.docker.stack.namespace=${stack}`, '--format', '{{.Name}} {{.Replicas}}']);
  return stdout.split('\n').filter(Boolean);
};

describe('swarm deployments against the real engine', () => {
  let agent: TestAgent;
  let tenant: Tenant;
  const name = uniqueName('sw');
  const own = uniqueName('swt');

  beforeAll(async () => {
    const { stdout } = await execa('docker', ['info', '--format', '{{.Swarm.ControlAvailable}}']);
    if (stdout.trim() !== 'true') throw new Error('the engine manages no swarm: test/env (start.d/20-swarm.sh) initialises a single-node one');
    agent = await startAgent({ plugins: ['access', 'docker', 'deployments'] });
    tenant = await createTenant(agent, `swt${runId}`, [own]);
  });

  afterAll(async () => {
    await agent?.stop();
    await cleanupStacks();
  });

  it('deploys a stack from the checked model with start-first, rollback-on-failure updates, and shows its replicas', async () => {
    const created = await agent.api('POST', '/deployments', { body: { name, compose_content: stackFile(2), runtime: 'swarm', auto_start: true } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ name, runtime: 'swarm', start_error: null });

    const running = await until(
      () => agent.api('GET', `/deployments/${name}`),
      (r) => r.body.data?.status === 'running' && r.body.data.services?.[0]?.replicas?.running === 2,
      60_000,
      300,
    );
    expect(running.body.data).toMatchObject({ runtime: 'swarm', status: 'running' });
    expect(running.body.data.services[0]).toMatchObject({ name: 'web', status: 'running', replicas: { running: 2, desired: 2 }, errors: [] });
    expect(await services(name)).toEqual([`${name}_web 2/2`]);

    // The defaults the file did not give: Swarm's own are stop-first and `pause`.
    const { stdout } = await execa('docker', ['service', 'inspect', `${name}_web`, '--format', '{{json .Spec.UpdateConfig}} {{json .Spec.RollbackConfig}}']);
    const [update, rollback] = stdout.split(' ').map((j) => JSON.parse(j) as Record<string, unknown>);
    expect(update).toMatchObject({ Order: 'start-first', FailureAction: 'rollback', Monitor: 10_000_000_000, Parallelism: 1 });
    expect(rollback).toMatchObject({ Order: 'start-first' });

    // The tasks' containers carry the project's compose labels: the list and its status see them as a compose deployment's.
    const list = await agent.api('GET', '/deployments');
    expect(list.body.data.find((d: { name: string }) => d.name === name)).toMatchObject({ status: 'running', runtime: 'swarm' });
    const labelled = await execa('docker', [
      'ps',
      '-q',
      '--filter',
      `label=com.docker.compose.project=${name}`,
      '--filter',
      'label=com.docker.compose.service=web',
    ]);
    expect(labelled.stdout.split('\n').filter(Boolean)).toHaveLength(2);
  });

  it('scales a service through a plan, audited', async () => {
    const planned = await agent.api('POST', `/deployments/${name}/scale`, { query: { plan: true }, body: { service: 'web', replicas: 3 } });
    expect(planned.status, planned.text).toBe(201);
    expect(planned.body.data.changes[0]).toMatchObject({ type: 'service', id: `${name}/web`, before: { replicas: 2 }, after: { replicas: 3 } });
    expect(await services(name)).toEqual([`${name}_web 2/2`]);
    const applied = await agent.api('POST', `/plans/${planned.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(200);
    expect(applied.body.data.result).toEqual({ name, service: 'web', replicas: 3 });
    const scaled = await until(
      () => agent.api('GET', `/deployments/${name}`),
      (r) => r.body.data?.services?.[0]?.replicas?.running === 3,
      60_000,
      300,
    );
    expect(scaled.body.data.services[0].replicas).toEqual({ running: 3, desired: 3 });
    const audit = await agent.api('GET', '/audit/events', { query: { limit: 200 } });
    expect(
      audit.body.data.some((e: { resource_id?: string; success: boolean; action: string }) => e.resource_id === name && e.success && /scale/.test(e.action)),
    ).toBe(true);

    expect((await agent.api('POST', `/deployments/${name}/scale`, { body: { service: 'nope', replicas: 1 } })).status).toBe(404);
    expect((await agent.api('POST', `/deployments/${name}/scale`, { body: { service: 'web', replicas: 101 } })).status).toBe(400);
    // Another tenant's deployment: not even its existence.
    expect((await agent.api('POST', `/deployments/${name}/scale`, { token: tenant.user, body: { service: 'web', replicas: 1 } })).status).toBe(404);
  });

  it('stops (the stack is removed), starts again, and deletes', async () => {
    const stopped = await agent.api('POST', `/deployments/${name}/stop`);
    expect(stopped.status, stopped.text).toBe(200);
    expect(await services(name)).toEqual([]);
    const afterStop = await until(
      () => agent.api('GET', `/deployments/${name}`),
      (r) => r.body.data?.status === 'stopped',
      30_000,
      300,
    );
    expect(afterStop.body.data.status).toBe('stopped');

    const started = await agent.api('POST', `/deployments/${name}/start`);
    expect(started.status, started.text).toBe(200);
    await until(
      () => agent.api('GET', `/deployments/${name}`),
      (r) => r.body.data?.status === 'running',
      60_000,
      300,
    );
    // The scale set through the API holds across deploys of the same file (swarm-revisions.test.ts: until the file's
    // replicas change).
    expect(await services(name)).toEqual([`${name}_web 3/3`]);

    const removed = await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    expect(removed.status, removed.text).toBe(200);
    expect(await services(name)).toEqual([]);
    const left = await until(
      async () => (await execa('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${name}`])).stdout.trim(),
      (s) => s === '',
      30_000,
      300,
    );
    expect(left).toBe('');
  });

  it('rolls an update that fails its health check back, with the old task serving throughout, and says so', async () => {
    const rolled = uniqueName('swr');
    const file = (marker: string, check: string) => busyboxStack({ web: { environment: { MARKER: marker }, healthcheck: ['CMD', check] } });
    const envOf = async () =>
      (await execa('docker', ['service', 'inspect', `${rolled}_web`, '--format', '{{json .Spec.TaskTemplate.ContainerSpec.Env}}'])).stdout.trim();
    const created = await agent.api('POST', '/deployments', {
      body: { name: rolled, compose_content: file('v1', 'true'), runtime: 'swarm', auto_start: true },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.start_error).toBeNull();
    expect(created.body.data.status).toBe('running');
    const before = (await execa('docker', ['ps', '-q', '--filter', `label=com.docker.compose.project=${rolled}`])).stdout.trim();
    expect(before).not.toBe('');

    const updated = await agent.api('PUT', `/deployments/${rolled}`, { body: { compose_content: file('v2', 'false') } });
    expect(updated.status, updated.text).toBe(502);
    expect(updated.body.code).toBe('COMPOSE_FAILED');
    expect(updated.body.error).toMatch(/service 'web': the update was rolled back/);
    expect(await envOf()).toBe('["MARKER=v1"]');
    // Start-first: the old task was never stopped.
    expect((await execa('docker', ['ps', '-q', '--filter', `label=com.docker.compose.project=${rolled}`])).stdout.trim()).toBe(before);
    const revisions = await agent.api('GET', `/deployments/${rolled}/revisions`);
    // The failed update, then the agent's rollback of the whole stack to revision 1 (swarm-revisions.test.ts): Swarm
    // had rolled the one service back already, so its task is the same (above).
    expect(revisions.body.data[1]).toMatchObject({ action: 'update', status: 'failed' });
    expect(revisions.body.data[0]).toMatchObject({ action: 'rollback', status: 'succeeded', rollback_of: 1, reason: 'automatic: revision 2 failed' });
    expect(updated.body.error).toMatch(/The whole stack was rolled back to revision 1/);
    expect((await agent.api('DELETE', `/deployments/${rolled}`, { query: { remove_files: true } })).status).toBe(200);
    // Swarm's rollback, then the agent's deploy of the whole stack's last good revision, each waited for.
  }, 180_000);

  it('never takes over a stack it did not deploy (409 NAME_IN_USE)', async () => {
    const foreign = uniqueName('swf');
    const deployed = await execa('docker', ['stack', 'deploy', '-c', '-', foreign], {
      input: JSON.stringify({
        version: '3.9',
        services: { web: { image: 'agent-test/busybox:latest', command: ['sleep', '3600'], deploy: { replicas: 0, labels: { 'agent.test': '1' } } } },
      }),
      reject: false,
    });
    expect(deployed.exitCode, deployed.stderr).toBe(0);
    try {
      for (const taken of [foreign, `${foreign}_x`]) {
        const res = await agent.api('POST', '/deployments', { body: { name: taken, compose_content: stackFile(1), runtime: 'swarm', auto_start: true } });
        expect(res.status, res.text).toBe(409);
        expect(res.body).toMatchObject({ code: 'NAME_IN_USE', project: foreign });
      }
      expect(await services(foreign)).toEqual([`${foreign}_web 0/0`]);
    } finally {
      await execa('docker', ['stack', 'rm', foreign], { reject: false });
    }
  });

  it('refuses scale on a compose deployment (409 NOT_SWARM_DEPLOYMENT)', async () => {
    const plain = uniqueName('swc');
    const created = await agent.api('POST', '/deployments', { body: { name: plain, compose_content: stackFile(1) } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.runtime).toBeUndefined();
    const res = await agent.api('POST', `/deployments/${plain}/scale`, { body: { service: 'web', replicas: 2 } });
    expect(res.status, res.text).toBe(409);
    expect(res.body.code).toBe('NOT_SWARM_DEPLOYMENT');
    expect((await agent.api('DELETE', `/deployments/${plain}`, { query: { remove_files: true } })).status).toBe(200);
  });

  describe("a scoped operator's stack file", () => {
    const attacks: [string, string, string][] = [
      [
        'placement on managers',
        stackFile(1).replace('      replicas: 1\n', '      replicas: 1\n      placement:\n        constraints: ["node.role == manager"]\n'),
        'deploy.placement:managers',
      ],
      [
        'placement on managers, spelt as not-a-worker',
        stackFile(1).replace('      replicas: 1\n', '      placement:\n        constraints: ["node.role!=WORKER"]\n'),
        'deploy.placement:managers',
      ],
      ['global mode', stackFile(1).replace('      replicas: 1\n', '      mode: global\n'), 'deploy.mode:global'],
      ['a host-mode port', stackFile(1, '    ports:\n      - target: 80\n        published: 18089\n        mode: host\n'), 'ports.mode:host:18089'],
      [
        "another stack's network, as external",
        stackFile(1, '    networks: [other]\nnetworks:\n  other:\n    external: true\n    name: victim_default\n'),
        'networks.external:victim_default',
      ],
      [
        "another stack's secret, as external",
        stackFile(1, '    secrets: [key]\nsecrets:\n  key:\n    external: true\n    name: victim_key\n'),
        'secrets.external:key',
      ],
      ['a bind mount', stackFile(1, '    volumes:\n      - ./data:/data\n'), 'swarm.bind:'],
    ];

    for (const [what, content, exception] of attacks) {
      it(`is refused: ${what}`, async () => {
        let named = '';
        for (const query of [{ plan: true }, undefined]) {
          const res = await agent.api('POST', '/deployments', {
            token: tenant.user,
            body: { name: own, compose_content: content, runtime: 'swarm', auto_start: true },
            ...(query ? { query } : {}),
          });
          expect(res.status, res.text).toBe(400);
          expect(res.body.code).toBe('HOST_SAFETY');
          named = (res.body.violations as { exception: string }[]).map((v) => v.exception).find((e) => e.startsWith(exception)) ?? '';
          expect(named, res.text).not.toBe('');
        }
        // Nor may it grant itself the exception the refusal names.
        const granted = await agent.api('POST', '/deployments', {
          token: tenant.user,
          body: { name: own, compose_content: content, runtime: 'swarm', host_safety_exceptions: [named] },
        });
        expect(granted.status, granted.text).toBe(403);
        expect(await services(own)).toEqual([]);
      });
    }

    it('is refused on update of its own swarm deployment too', async () => {
      const created = await agent.api('POST', '/deployments', { token: tenant.user, body: { name: own, compose_content: stackFile(1), runtime: 'swarm' } });
      expect(created.status, created.text).toBe(201);
      const res = await agent.api('PUT', `/deployments/${own}`, { token: tenant.user, body: { compose_content: attacks[2]![1] } });
      expect(res.status, res.text).toBe(400);
      expect(res.body.code).toBe('HOST_SAFETY');
      expect((await agent.api('DELETE', `/deployments/${own}`, { token: tenant.user, query: { remove_files: true } })).status).toBe(200);
    });

    it('passes for an admin who grants the exception (planned only: nothing is deployed)', async () => {
      const res = await agent.api('POST', '/deployments', {
        query: { plan: true },
        body: { name: uniqueName('swg'), compose_content: attacks[2]![1], runtime: 'swarm', host_safety_exceptions: ['deploy.mode:global'] },
      });
      expect(res.status, res.text).toBe(201);
    });
  });
});
