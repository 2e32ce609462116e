/**
 * Swarm deployments through the revisions, against the real single-node swarm (issue 29): an update that Swarm
 * rolls back for one service, or that does not converge in time, takes the whole stack back to the last good
 * revision (the other service too), and says so; redeploy and rollback jobs replace the tasks through
 * `docker stack deploy` and a forced update (images built locally under two tags: a rollback runs the image its
 * revision ran although the tag now names another);
 * secrets from the deployment's `.env`, created through the engine API, rotated under a new name, never answered or
 * written in clear; the scale set through the API kept across deploys of the same file. And a swarm of two nodes of
 * its own (swarm-nodes.ts): placement by a node label, and a drained node's tasks moved to the other.
 */
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { busyboxStack, cleanupStacks, runId, uniqueName, until } from './helpers.js';
import { startTwoNodes, tasksOn, type TwoNodes } from './swarm-nodes.js';

/** Images of this run: built from agent-test/busybox, each serving its own version (no registry is reachable). */
const REPO = `agent-test/swrev-${runId}`;
const built: string[] = [];
async function buildImage(version: string, tag: string): Promise<string> {
  const dockerfile = `FROM agent-test/busybox:latest\nRUN mkdir -p /www && echo ${version}-${runId} > /www/index.html\nLABEL agent.test=1\n`;
  await execa('docker', ['build', '-q', '-t', tag, '-'], { input: dockerfile });
  const { stdout } = await execa('docker', ['image', 'inspect', '-f', '{{.Id}}', tag]);
  built.push(stdout.trim());
  return stdout.trim();
}

/** The image ids of the running task containers of a service. */
async function taskImages(stack: string, service: string): Promise<string[]> {
  const { stdout } = await execa('docker', [
    'ps',
    '--filter',
    `label=com.docker.compose.project=${stack}`,
    '--filter',
    `label=com.docker.compose.service=${service}`,
    '--format',
    '{{.ID}}',
  ]);
  const ids = stdout.split('\n').filter(Boolean);
  if (!ids.length) return [];
  return (await execa('docker', ['inspect', '-f', '{{.Image}}', ...ids])).stdout.split('\n').filter(Boolean);
}

const serviceEnv = async (stack: string, service: string) =>
  (await execa('docker', ['service', 'inspect', `${stack}_${service}`, '--format', '{{json .Spec.TaskTemplate.ContainerSpec.Env}}'])).stdout.trim();

describe('swarm deployments through the revisions', () => {
  let agent: TestAgent;

  /** Waits for a job to end and returns its record. */
  const finished = async (id: string) =>
    (
      await until(
        () => agent.api('GET', `/jobs/${id}`),
        (r) => !['pending', 'running'].includes(r.body.data?.status),
        180_000,
        300,
      )
    ).body.data;

  beforeAll(async () => {
    const { stdout } = await execa('docker', ['info', '--format', '{{.Swarm.ControlAvailable}}']);
    if (stdout.trim() !== 'true') throw new Error('the engine manages no swarm: test/env (start.d/20-swarm.sh) initialises a single-node one');
    agent = await startAgent({ plugins: ['access', 'docker', 'deployments', 'jobs'] });
  });

  afterAll(async () => {
    await agent?.stop();
    await cleanupStacks();
    await execa('docker', ['rmi', '-f', ...[`${REPO}:one`, `${REPO}:two`, `${REPO}:hc`], ...new Set(built)], { reject: false });
  });

  it('rolls the whole stack back to the last good revision when Swarm rolled one service back, and says so', async () => {
    const name = uniqueName('swwr');
    const file = (web: string, api: string, check: string) =>
      busyboxStack({ web: { environment: { MARKER: web } }, api: { environment: { MARKER: api }, healthcheck: ['CMD', check] } });
    const created = await agent.api('POST', '/deployments', { body: { name, compose_content: file('v1', 'v1', 'true'), runtime: 'swarm', auto_start: true } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ start_error: null, status: 'running', revision: 1 });

    // web's update succeeds, api's fails its health check: Swarm rolls back api only, the agent the whole stack.
    const updated = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: file('v2', 'v2', 'false'), reason: 'both to v2' } });
    expect(updated.status, updated.text).toBe(502);
    expect(updated.body).toMatchObject({ code: 'COMPOSE_FAILED', rolled_back_to: 1, rollback_revision: 3 });
    expect(updated.body.error).toMatch(/service 'api': the update was rolled back/);
    expect(updated.body.error).toMatch(/The whole stack was rolled back to revision 1 \(revision 3\) and converged/);
    expect(await serviceEnv(name, 'web')).toBe('["MARKER=v1"]');
    expect(await serviceEnv(name, 'api')).toBe('["MARKER=v1"]');

    const revisions = await agent.api('GET', `/deployments/${name}/revisions`);
    expect(revisions.body.data.map((r: { rev: number; action: string; status: string }) => [r.rev, r.action, r.status])).toEqual([
      [3, 'rollback', 'succeeded'],
      [2, 'update', 'failed'],
      [1, 'create', 'succeeded'],
    ]);
    expect(revisions.body.data[0]).toMatchObject({ rollback_of: 1, reason: 'automatic: revision 2 failed', strategy: 'swarm', ran: true });
    expect(revisions.body.data[1].error).toMatch(/service 'api'/);
    // The files are the good revision's again (the failed one keeps its own in its revision).
    const details = await agent.api('GET', `/deployments/${name}`);
    expect(details.body.data.compose_content).toBe(file('v1', 'v1', 'true'));
    expect(details.body.data.status).toBe('running');
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  }, 240_000);

  it('rolls the whole stack back when it does not converge in time (setting deployments.swarm_converge_timeout)', async () => {
    // An agent of its own: the other tests keep the default timeout.
    const quick = await startAgent({ plugins: ['access', 'docker', 'deployments', 'jobs'], config: { deployments: { swarm_converge_timeout: 20 } } });
    try {
      const name = uniqueName('swnc');
      const file = (marker: string, placement?: string[]) => busyboxStack({ web: { environment: { MARKER: marker } }, api: { placement } });
      const created = await quick.api('POST', '/deployments', { body: { name, compose_content: file('v1'), runtime: 'swarm', auto_start: true } });
      expect(created.status, created.text).toBe(201);
      expect(created.body.data).toMatchObject({ start_error: null, status: 'running' });

      // api's new task has no node to run on: its update never ends (the old task keeps serving, start-first).
      const nowhere = ['node.labels.agent-test-nowhere == 1'];
      const updated = await quick.api('PUT', `/deployments/${name}`, { body: { compose_content: file('v2', nowhere) } });
      expect(updated.status, updated.text).toBe(502);
      expect(updated.body).toMatchObject({ code: 'COMPOSE_FAILED', rolled_back_to: 1, rollback_revision: 3 });
      expect(updated.body.error).toMatch(/the stack did not converge within 20 s: 'api'/);
      expect(updated.body.error).toMatch(/The whole stack was rolled back to revision 1 \(revision 3\) and converged/);
      expect(await serviceEnv(name, 'web')).toBe('["MARKER=v1"]');
      const constraints = (await execa('docker', ['service', 'inspect', `${name}_api`, '--format', '{{json .Spec.TaskTemplate.Placement}}'])).stdout;
      expect(constraints).not.toContain('agent-test-nowhere');
      const details = await quick.api('GET', `/deployments/${name}`);
      expect(details.body.data).toMatchObject({ status: 'running', compose_content: file('v1') });
      expect((await quick.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
    } finally {
      await quick.stop();
    }
  }, 240_000);

  it('redeploys and rolls back through jobs: Swarm replaces the tasks, pinned to the image the revision ran', async () => {
    const name = uniqueName('swrj');
    const file = (tag: string) => busyboxStack({ web: { image: `${REPO}:${tag}`, command: ['httpd', '-f', '-p', '80', '-h', '/www'], replicas: 2 } });
    const runs = async (image: string) => {
      const found = await until(
        () => taskImages(name, 'web'),
        (ids) => ids.length === 2 && ids.every((id) => id === image),
        30_000,
        300,
      );
      expect(found).toEqual([image, image]);
    };
    const v1 = await buildImage('v1', `${REPO}:one`);
    const created = await agent.api('POST', '/deployments', { body: { name, compose_content: file('one'), runtime: 'swarm', auto_start: true } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ start_error: null, revision: 1 });
    await runs(v1);

    // Compose's start-first does not apply: Swarm's update_config decides.
    const startFirst = await agent.api('POST', `/deployments/${name}/redeploy`, { body: { strategy: 'start-first' } });
    expect(startFirst.status, startFirst.text).toBe(400);
    expect(startFirst.body.code).toBe('STRATEGY_UNAVAILABLE');

    // A new image under the same tag: a redeploy replaces every task (the spec did not change).
    const v2 = await buildImage('v2', `${REPO}:one`);
    const redeploy = await agent.api('POST', `/deployments/${name}/redeploy`, { body: { reason: 'new build' } });
    expect(redeploy.status, redeploy.text).toBe(202);
    expect(redeploy.body.data).toMatchObject({ deployment: name, strategy: 'swarm', note: expect.stringMatching(/update_config/) });
    const job = await finished(redeploy.body.data.job_id);
    expect(job, JSON.stringify(job)).toMatchObject({ status: 'succeeded', result: { revision: 2, strategy: 'swarm', services: ['web'] } });
    await runs(v2);

    // Another tag in an update, then back to revision 1: its image by id, although `one` names v2 now.
    const v3 = await buildImage('v3', `${REPO}:two`);
    const updated = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: file('two') } });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body.data.revision).toBe(3);
    await runs(v3);

    const plan = await agent.api('POST', `/deployments/${name}/rollback`, { query: { plan: 'true' }, body: { revision: 1 } });
    expect(plan.status, plan.text).toBe(201);
    expect(plan.body.data.changes).toContainEqual(expect.objectContaining({ type: 'image', id: 'web', after: expect.objectContaining({ pinned: v1 }) }));
    const applied = await agent.api('POST', `/plans/${plan.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(202);
    expect(applied.body.data.result).toMatchObject({ strategy: 'swarm', revision: 1, pins: { web: v1 }, note: expect.stringMatching(/update_config/) });
    const rolled = await finished(applied.body.data.result.job_id);
    expect(rolled, JSON.stringify(rolled)).toMatchObject({ status: 'succeeded', result: { revision: 4, pins: { web: v1 } } });
    await runs(v1);
    const spec = (await execa('docker', ['service', 'inspect', `${name}_web`, '--format', '{{.Spec.TaskTemplate.ContainerSpec.Image}}'])).stdout.trim();
    expect(spec).toBe(v1);
    const details = await agent.api('GET', `/deployments/${name}`);
    expect(details.body.data.compose_content).toBe(file('one'));

    // A redeploy resolves the tags again: `one` is v2.
    const again = await agent.api('POST', `/deployments/${name}/redeploy`, {});
    expect(again.status, again.text).toBe(202);
    expect(await finished(again.body.data.job_id)).toMatchObject({ status: 'succeeded', result: { revision: 5 } });
    await runs(v2);
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  }, 300_000);

  it('rolls the whole stack back when a redeploy job fails: the job says so, the stack runs the pinned image again', async () => {
    const name = uniqueName('swjf');
    const tag = `${REPO}:hc`;
    const image = async (version: string, healthy: boolean) => {
      const dockerfile = `FROM agent-test/busybox:latest\nRUN mkdir -p /www && echo ${version}-${runId} > /www/index.html${healthy ? ' && touch /www/ok' : ''}\nLABEL agent.test=1\n`;
      await execa('docker', ['build', '-q', '-t', tag, '-'], { input: dockerfile });
      const { stdout } = await execa('docker', ['image', 'inspect', '-f', '{{.Id}}', tag]);
      built.push(stdout.trim());
      return stdout.trim();
    };
    const file = busyboxStack({ web: { image: tag, command: ['httpd', '-f', '-p', '80', '-h', '/www'], healthcheck: ['CMD', 'test', '-f', '/www/ok'] } });
    const good = await image('good', true);
    const created = await agent.api('POST', '/deployments', { body: { name, compose_content: file, runtime: 'swarm', auto_start: true } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ start_error: null, status: 'running', revision: 1 });

    // The tag now names an image that fails its health check: Swarm's own rollback runs the tag again (no better),
    // the agent's runs the image revision 1 ran, by id.
    await image('bad', false);
    const redeploy = await agent.api('POST', `/deployments/${name}/redeploy`, { body: { reason: 'bad build' } });
    expect(redeploy.status, redeploy.text).toBe(202);
    const job = await finished(redeploy.body.data.job_id);
    expect(job.status, JSON.stringify(job)).toBe('failed');
    expect(job.error).toMatch(/The whole stack was rolled back to revision 1 \(revision 3\) and converged/);
    expect(job.result).toMatchObject({ revision: 2, rolled_back_to: 1, rollback_revision: 3 });
    const found = await until(
      () => taskImages(name, 'web'),
      (ids) => ids.length === 1 && ids[0] === good,
      30_000,
      300,
    );
    expect(found).toEqual([good]);
    const revisions = await agent.api('GET', `/deployments/${name}/revisions`);
    expect(revisions.body.data.slice(0, 2).map((r: { rev: number; action: string; status: string }) => [r.rev, r.action, r.status])).toEqual([
      [3, 'rollback', 'succeeded'],
      [2, 'redeploy', 'failed'],
    ]);
    expect(revisions.body.data[0]).toMatchObject({ rollback_of: 1, pins: { web: good } });
    const details = await until(
      () => agent.api('GET', `/deployments/${name}`),
      (r) => r.body.data?.status === 'running',
      30_000,
      300,
    );
    expect(details.body.data).toMatchObject({ status: 'running', pins: { web: good } });
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  }, 300_000);

  it("creates a stack's secrets from its .env, rotates them under a new name, and never shows or writes a value", async () => {
    const name = uniqueName('swsec');
    const first = `first-${runId}-Zq9`;
    const second = `second-${runId}-Xw4`;
    const file = busyboxStack({ web: { secrets: ['api_key'] } }, 'secrets:\n  api_key:\n    x-agent-env: API_KEY\n');
    const secrets = async () =>
      (await execa('docker', ['secret', 'ls', '--filter', `label=com.docker.stack.namespace=${name}`, '--format', '{{.Name}}'])).stdout
        .split('\n')
        .filter(Boolean);
    /** What the running task reads at /run/secrets/api_key (waits for the task of the newest secret). */
    const inTask = async (expected: string) => {
      const read = async () => {
        const { stdout } = await execa('docker', ['ps', '-q', '--filter', `label=com.docker.compose.project=${name}`]);
        const ids = stdout.split('\n').filter(Boolean);
        if (ids.length !== 1) return '';
        return (await execa('docker', ['exec', ids[0]!, 'cat', '/run/secrets/api_key'], { reject: false })).stdout;
      };
      return until(read, (v) => v === expected, 30_000, 300);
    };

    const env = (value: string) => [
      { key: 'API_KEY', value },
      { key: 'MODE', value: 'a' },
    ];
    const created = await agent.api('POST', '/deployments', {
      body: { name, compose_content: file, env_vars: env(first), runtime: 'swarm', auto_start: true },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.start_error).toBeNull();
    expect(created.text).not.toContain(first);
    expect(await inTask(first)).toBe(first);
    const [one] = await secrets();
    expect(one).toMatch(new RegExp(`^${name}_api_key_[0-9a-f]{12}$`));
    expect(await secrets()).toEqual([one]);
    // The stack names it as an external secret of that name: the value is in no spec.
    const spec = (await execa('docker', ['service', 'inspect', `${name}_web`])).stdout;
    expect(spec).toContain(one);
    expect(spec).not.toContain(first);

    // Rotation: a new value is a new secret; the service is updated; the old secret goes once the stack converged.
    const plan = await agent.api('PUT', `/deployments/${name}`, { query: { plan: true }, body: { env_vars: env(second) } });
    expect(plan.status, plan.text).toBe(201);
    expect(plan.text).not.toContain(second);
    expect(plan.text).not.toContain(first);
    const rotated = await agent.api('POST', `/plans/${plan.body.data.id}/apply`);
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.text).not.toContain(second);
    expect(await inTask(second)).toBe(second);
    const [two] = await secrets();
    expect(two).toMatch(new RegExp(`^${name}_api_key_[0-9a-f]{12}$`));
    expect(two).not.toBe(one);
    expect(await secrets()).toEqual([two]);

    // Nothing the agent answers or keeps in clear holds a value: revisions, details, its logs, its data (but the
    // deployment's own .env, which is where the values come from, and the sealed journal).
    for (const path of [`/deployments/${name}`, `/deployments/${name}/revisions`, `/deployments/${name}/revisions/1`, `/deployments/${name}/revisions/2`]) {
      const res = await agent.api('GET', path);
      expect(res.status, res.text).toBe(200);
      expect(res.text).not.toContain(first);
      expect(res.text).not.toContain(second);
    }
    expect(agent.output()).not.toContain(first);
    expect(agent.output()).not.toContain(second);
    const grep = await execa('grep', ['-rlF', '-e', first, '-e', second, agent.dataDir], { reject: false });
    const holders = grep.stdout.split('\n').filter((f) => f && !f.endsWith(`/${name}/.env`));
    expect(holders).toEqual([]);

    // Stopping removes the stack's secrets with it; a start creates them again from the .env.
    expect((await agent.api('POST', `/deployments/${name}/stop`)).status).toBe(200);
    expect(await until(secrets, (l) => l.length === 0, 30_000, 300)).toEqual([]);
    expect((await agent.api('POST', `/deployments/${name}/start`)).status).toBe(200);
    expect(await inTask(second)).toBe(second);
    expect(await secrets()).toEqual([two]);
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
    expect(await until(secrets, (l) => l.length === 0, 30_000, 300)).toEqual([]);
  }, 240_000);

  it('keeps the scale set through the API across deploys of the same file, until the file says other replicas', async () => {
    const name = uniqueName('swsc');
    // MODE comes from the .env: an update of the .env alone deploys the same file.
    const file = (replicas: number) => busyboxStack({ web: { environment: { MODE: '${MODE}' }, replicas } });
    const replicas = async () =>
      Number((await execa('docker', ['service', 'inspect', `${name}_web`, '--format', '{{.Spec.Mode.Replicated.Replicas}}'])).stdout.trim());
    const env = (mode: string) => [{ key: 'MODE', value: mode }];
    const created = await agent.api('POST', '/deployments', {
      body: { name, compose_content: file(1), env_vars: env('a'), runtime: 'swarm', auto_start: true },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.start_error).toBeNull();
    expect(await replicas()).toBe(1);

    const scaled = await agent.api('POST', `/deployments/${name}/scale`, { body: { service: 'web', replicas: 3 } });
    expect(scaled.status, scaled.text).toBe(200);
    expect(await replicas()).toBe(3);

    // An update of the .env deploys the same file: the scale holds; so does a redeploy.
    const updated = await agent.api('PUT', `/deployments/${name}`, { body: { env_vars: env('b') } });
    expect(updated.status, updated.text).toBe(200);
    expect(await replicas()).toBe(3);
    const redeploy = await agent.api('POST', `/deployments/${name}/redeploy`, {});
    expect(redeploy.status, redeploy.text).toBe(202);
    expect(await finished(redeploy.body.data.job_id)).toMatchObject({ status: 'succeeded' });
    expect(await replicas()).toBe(3);
    const details = await agent.api('GET', `/deployments/${name}`);
    expect(details.body.data.services[0].replicas).toEqual({ running: 3, desired: 3 });

    // The file says other replicas: it decides again, and the kept scale is dropped (an update of the .env keeps 2).
    const resized = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: file(2) } });
    expect(resized.status, resized.text).toBe(200);
    expect(await replicas()).toBe(2);
    const again = await agent.api('PUT', `/deployments/${name}`, { body: { env_vars: env('c') } });
    expect(again.status, again.text).toBe(200);
    expect(await replicas()).toBe(2);
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  }, 240_000);

  it('refuses a secret from a variable the .env lacks, with two sources, or from a file outside the folder', async () => {
    const name = uniqueName('swsx');
    const file = (secret: string) => `services:
  web:
    image: agent-test/busybox:latest
    secrets: [key]
    labels:
      agent.test: "1"
secrets:
  key:
${secret}`;
    const cases: [string, string, number, string][] = [
      ['    x-agent-env: MISSING\n', 'MISSING', 400, 'INVALID_COMPOSE'],
      ['    x-agent-env: KEY\n    file: ./key.txt\n', 'file', 400, 'INVALID_COMPOSE'],
      ['    file: ../../outside.txt\n', 'outside', 400, 'HOST_SAFETY'],
    ];
    for (const [secret, named, status, code] of cases) {
      const res = await agent.api('POST', '/deployments', {
        body: { name, compose_content: file(secret), env_vars: [{ key: 'KEY', value: 'v' }], runtime: 'swarm', auto_start: true },
      });
      expect(res.status, res.text).toBe(status);
      expect(res.body.code, res.text).toBe(code);
      expect(res.text).toContain(named);
    }
    expect((await agent.api('GET', `/deployments/${name}`)).status).toBe(404);
  });
});

describe('a swarm of two nodes (a manager and a worker, each a dockerd in its own network namespace)', () => {
  let nodes: TwoNodes | undefined;
  let agent: TestAgent;

  beforeAll(async () => {
    nodes = await startTwoNodes();
    agent = await startAgent({ plugins: ['access', 'docker', 'deployments', 'cluster'], config: { docker: { host: nodes.manager } } });
  });

  afterAll(async () => {
    await agent?.stop();
    await nodes?.stop();
  });

  it('places tasks on the node a label names, and moves them off a node that is drained', async () => {
    const { manager, worker, workerId } = nodes!;
    const listed = await agent.api('GET', '/cluster/nodes');
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.map((n: { role: string }) => n.role).sort()).toEqual(['manager', 'worker']);
    const labelled = await agent.api('PATCH', `/cluster/nodes/${workerId}`, { body: { labels: { zone: 'b' } } });
    expect(labelled.status, labelled.text).toBe(200);

    const file = (placement?: string[]) => busyboxStack({ web: { replicas: 2, placement } });
    const placed = uniqueName('swpl');
    const created = await agent.api('POST', '/deployments', {
      body: { name: placed, compose_content: file(['node.labels.zone == b']), runtime: 'swarm', auto_start: true },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ start_error: null, status: 'running' });
    expect(created.body.data.services[0].replicas).toEqual({ running: 2, desired: 2 });
    expect([await tasksOn(worker, placed), await tasksOn(manager, placed)]).toEqual([2, 0]);

    // Spread over both nodes, then the worker drained: its task runs on the manager, the deployment stays running.
    const spread = uniqueName('swdr');
    const second = await agent.api('POST', '/deployments', { body: { name: spread, compose_content: file(), runtime: 'swarm', auto_start: true } });
    expect(second.status, second.text).toBe(201);
    expect([await tasksOn(worker, spread), await tasksOn(manager, spread)]).toEqual([1, 1]);
    const drained = await agent.api('PATCH', `/cluster/nodes/${workerId}`, { body: { availability: 'drain' } });
    expect(drained.status, drained.text).toBe(200);
    const moved = await until(
      async () => [await tasksOn(worker, spread), await tasksOn(manager, spread)],
      (n) => n[0] === 0 && n[1] === 2,
      60_000,
      500,
    );
    expect(moved).toEqual([0, 2]);
    const details = await until(
      () => agent.api('GET', `/deployments/${spread}`),
      (r) => r.body.data?.services?.[0]?.replicas?.running === 2,
      30_000,
      300,
    );
    expect(details.body.data).toMatchObject({ status: 'running' });
    // The placed service has nowhere to run now: its tasks wait, and the deployment says so.
    const pending = await until(
      () => agent.api('GET', `/deployments/${placed}`),
      (r) => r.body.data?.services?.[0]?.replicas?.running === 0,
      60_000,
      500,
    );
    expect(pending.body.data.services[0].replicas).toEqual({ running: 0, desired: 2 });
    for (const name of [placed, spread]) expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  }, 240_000);
});
