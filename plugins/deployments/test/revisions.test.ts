/**
 * Revisions and rollback against the real engine: every change (create, update, redeploy, rollback) records a
 * revision with the image each service ran (id; registry digest when there is one), who and why, the `.env` sealed
 * and redacted on read, a diff against the deployment now; retention; tenancy (another deployment's scoped key gets
 * 404); a deleted deployment's revisions kept under its retired name. Rollback after a bad update runs the image the
 * revision ran, pinned by id, although the tag now points at another image (two images built locally under one
 * tag); a pinned image that is gone is 409 IMAGE_MISSING; the plan shows the diff and the pins.
 */
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createTenant } from '../../docker/test/tenants.js';
import { startRegistry, type TestRegistry } from '../../credentials/test/registry.js';
import { cleanupDocker, runId, uniqueName, until } from './helpers.js';

/** A tag of this run: two images built under it in turn (`v1`, then `v2`), each answering its own version. */
const TAG = `agent-test/rev-${runId}:app`;
const built: string[] = [];

async function buildImage(version: string, tag = TAG): Promise<string> {
  const dockerfile = `FROM agent-test/busybox:latest\nRUN mkdir -p /www && echo ${version}-${runId} > /www/index.html\nLABEL agent.test=1\n`;
  await execa('docker', ['build', '-q', '-t', tag, '-'], { input: dockerfile });
  const { stdout } = await execa('docker', ['image', 'inspect', '-f', '{{.Id}}', tag]);
  built.push(stdout.trim());
  return stdout.trim();
}

const app = (image = TAG, extra = '') => `services:
  web:
    image: ${image}
    command: ["httpd", "-f", "-p", "80", "-h", "/www"]
    ports:
      - "127.0.0.1::80"
    stop_signal: SIGKILL
    labels:
      agent.test: "1"${extra}
`;

describe('revisions and rollback', () => {
  let agent: TestAgent;
  const names: string[] = [];
  const name = (what: string) => {
    const n = uniqueName(what);
    names.push(n);
    return n;
  };

  /** What the web service answers on its published port. */
  const answer = async (deployment: string): Promise<string> => {
    const details = await agent.api('GET', `/deployments/${deployment}`);
    const port = details.body.data.ports.find((p: any) => p.service === 'web' && p.host_port)?.host_port;
    if (!port) return '';
    for (let i = 0; i < 40; i++) {
      try {
        return (await (await fetch(`http://127.0.0.1:${port}/`)).text()).trim();
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    return '';
  };

  /** Waits for a job to end and returns its record. */
  const finished = async (id: string) =>
    (
      await until(
        () => agent.api('GET', `/jobs/${id}`),
        (r) => !['pending', 'running'].includes(r.body.data?.status),
        120_000,
        200,
      )
    ).body.data;

  const containerImage = async (deployment: string, service = 'web') => {
    const { stdout } = await execa('docker', [
      'ps',
      '--filter',
      `label=com.docker.compose.project=${deployment}`,
      '--filter',
      `label=com.docker.compose.service=${service}`,
      '--format',
      '{{.ID}}',
    ]);
    const id = stdout.split('\n')[0]!;
    return (await execa('docker', ['inspect', '-f', '{{.Image}}', id])).stdout.trim();
  };

  beforeAll(async () => {
    await buildImage('v1');
    agent = await startAgent({ plugins: ['docker', 'deployments', 'jobs', 'access', 'system'] });
  });

  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
    await execa('docker', ['rmi', '-f', TAG, ...new Set(built)], { reject: false });
  });

  it('records create, update, redeploy and rollback with images, who and why; paginated; env redacted; diff against now', async () => {
    const n = name('revs');
    const v1 = (await execa('docker', ['image', 'inspect', '-f', '{{.Id}}', TAG])).stdout.trim();
    const created = await agent.api('POST', '/deployments', {
      body: {
        name: n,
        compose_content: app(),
        env_vars: [
          { key: 'API_TOKEN', value: 's3cret-1' },
          { key: 'MODE', value: 'a' },
        ],
        auto_start: true,
        reason: 'first',
      },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ revision: 1, start_error: null });
    expect(await answer(n)).toBe(`v1-${runId}`);

    // An update of the .env: recreated, revision 2, with its reason.
    const updated = await agent.api('PUT', `/deployments/${n}`, {
      body: {
        env_vars: [
          { key: 'API_TOKEN', value: 's3cret-2' },
          { key: 'EXTRA', value: 'x' },
        ],
        reason: 'rotate token',
      },
    });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body.data).toMatchObject({ revision: 2, recreated: true, backup_id: null });

    // A redeploy (a job), revision 3.
    const redeploy = await agent.api('POST', `/deployments/${n}/redeploy`, { body: { reason: 'routine' } });
    expect(redeploy.status, redeploy.text).toBe(202);
    expect(redeploy.body.data).toMatchObject({ job_id: expect.stringMatching(/^job_/), deployment: n, strategy: 'recreate' });
    const job = await finished(redeploy.body.data.job_id);
    expect(job, JSON.stringify(job)).toMatchObject({
      status: 'succeeded',
      kind: 'deployment.redeploy',
      deployment: n,
      result: { revision: 3, services: ['web'] },
    });

    const list = await agent.api('GET', `/deployments/${n}/revisions`, { query: { limit: 2 } });
    expect(list.status, list.text).toBe(200);
    expect(list.body.meta).toEqual({ total: 3, limit: 2, offset: 0 });
    expect(list.body.data.map((r: any) => [r.rev, r.action, r.status])).toEqual([
      [3, 'redeploy', 'succeeded'],
      [2, 'update', 'succeeded'],
    ]);
    const older = await agent.api('GET', `/deployments/${n}/revisions`, { query: { limit: 2, offset: 2 } });
    expect(older.body.data).toHaveLength(1);
    const first = older.body.data[0];
    expect(first).toMatchObject({ rev: 1, action: 'create', status: 'succeeded', reason: 'first', created_by: expect.stringMatching(/^user:/), ran: true });
    // A local image: its id (no registry digest).
    expect(first.images).toEqual({ web: { image: TAG, id: v1, digest: null } });
    expect(list.body.data[0]).toMatchObject({ reason: 'routine', job_id: job.id, strategy: 'recreate', images: { web: { id: v1 } } });
    expect(list.body.data[1]).toMatchObject({ reason: 'rotate token' });

    // One revision: its files, the .env redacted, the model, and what differs from now.
    const rev1 = await agent.api('GET', `/deployments/${n}/revisions/1`);
    expect(rev1.status, rev1.text).toBe(200);
    expect(rev1.text).not.toContain('s3cret');
    expect(rev1.body.data.env).toEqual([
      { key: 'API_TOKEN', value: '********', secret: true },
      { key: 'MODE', value: 'a', secret: false },
    ]);
    expect(rev1.body.data.compose_content).toBe(app());
    expect(rev1.body.data.model.services.web.image).toBe(TAG);
    expect(rev1.body.data.diff).toMatchObject({
      against: 'current',
      compose: '',
      env: { added: ['MODE'], changed: ['API_TOKEN'], removed: ['EXTRA'] },
      images: [{ service: 'web', current: { image: TAG, id: v1 }, revision: { id: v1 }, changed: false }],
    });
    expect((await agent.api('GET', `/deployments/${n}/revisions/99`)).body.code).toBe('REVISION_NOT_FOUND');

    // The audit log has the requests and the job's end.
    const audit = await agent.api('GET', '/audit/events', { query: { deployment: n, limit: 50 } });
    const actions = audit.body.data.map((e: any) => e.action);
    for (const a of ['deployments.create', 'deployments.update', 'deployments.redeploy', 'deployment.redeploy.finished']) expect(actions).toContain(a);
  });

  it('rolls back a bad update to the image the revision ran, although the tag now names another image', async () => {
    const n = name('roll');
    const v1 = (await execa('docker', ['image', 'inspect', '-f', '{{.Id}}', TAG])).stdout.trim();
    expect((await agent.api('POST', '/deployments', { body: { name: n, compose_content: app(), auto_start: true } })).status).toBe(201);
    expect(await answer(n)).toBe(`v1-${runId}`);

    // A new image under the same tag, and an update that runs it (a bad one: it answers v2).
    const v2 = await buildImage('v2');
    expect(v2).not.toBe(v1);
    const bad = await agent.api('PUT', `/deployments/${n}`, { body: { compose_content: app(TAG, '\n    environment:\n      BAD: "1"'), reason: 'v2' } });
    expect(bad.status, bad.text).toBe(200);
    expect(await answer(n)).toBe(`v2-${runId}`);
    expect(await containerImage(n)).toBe(v2);

    // The plan shows the compose diff, the .env and the image it pins, and that volumes stay.
    const plan = await agent.api('POST', `/deployments/${n}/rollback`, { query: { plan: 'true' }, body: { revision: 1, reason: 'v2 is bad' } });
    expect(plan.status, plan.text).toBe(201);
    const changes = plan.body.data.changes;
    expect(changes.find((c: any) => c.type === 'file' && c.id === 'docker-compose.yml').diff).toContain('-      BAD: "1"');
    expect(changes.find((c: any) => c.type === 'image' && c.id === 'web')).toMatchObject({
      actions: ['update'],
      before: { id: v2 },
      after: { pinned: v1, id: v1 },
    });
    expect(changes.find((c: any) => c.type === 'volumes')).toMatchObject({ actions: ['no-op'], after: { touched: false } });

    const rolled = await agent.api('POST', `/deployments/${n}/rollback`, { body: { revision: 1, reason: 'v2 is bad' } });
    expect(rolled.status, rolled.text).toBe(202);
    expect(rolled.body.data).toMatchObject({
      revision: 1,
      pins: { web: v1 },
      unpinned: [],
      volumes: { touched: false, note: expect.stringContaining('not rolled back'), backup_before_revision: null },
    });
    const job = await finished(rolled.body.data.job_id);
    expect(job, JSON.stringify(job)).toMatchObject({ status: 'succeeded', kind: 'deployment.rollback', result: { revision: 3, pins: { web: v1 } } });
    // v1 runs, and the tag still names v2.
    expect(await answer(n)).toBe(`v1-${runId}`);
    expect(await containerImage(n)).toBe(v1);
    expect((await execa('docker', ['image', 'inspect', '-f', '{{.Id}}', TAG])).stdout.trim()).toBe(v2);

    const details = await agent.api('GET', `/deployments/${n}`);
    expect(details.body.data.compose_content).toBe(app());
    expect(details.body.data.pins).toEqual({ web: v1 });
    const rev3 = (await agent.api('GET', `/deployments/${n}/revisions/3`)).body.data;
    expect(rev3).toMatchObject({
      action: 'rollback',
      rollback_of: 1,
      status: 'succeeded',
      reason: 'v2 is bad',
      pins: { web: v1 },
      images: { web: { id: v1 } },
    });

    // The pin holds across a restart (a start runs the files with the pinned images) ...
    expect((await agent.api('POST', `/deployments/${n}/restart`)).status).toBe(200);
    expect(await containerImage(n)).toBe(v1);
    // ... until a redeploy resolves the tag again.
    const redeploy = await agent.api('POST', `/deployments/${n}/redeploy`, { body: {} });
    expect((await finished(redeploy.body.data.job_id)).status).toBe('succeeded');
    expect(await containerImage(n)).toBe(v2);
    expect((await agent.api('GET', `/deployments/${n}`)).body.data.pins).toEqual({});
  });

  it('refuses a rollback whose image is gone (409 IMAGE_MISSING naming it), an unknown revision and a failed one', async () => {
    const n = name('gone');
    const tag = `agent-test/rev-${runId}:gone`;
    const gone = await buildImage('gone', tag);
    expect((await agent.api('POST', '/deployments', { body: { name: n, compose_content: app(tag), auto_start: true } })).status).toBe(201);
    expect((await agent.api('PUT', `/deployments/${n}`, { body: { compose_content: app(TAG) } })).status).toBe(200);
    await execa('docker', ['rmi', '-f', tag]);
    await until(
      () => execa('docker', ['image', 'inspect', gone], { reject: false }),
      (r) => r.exitCode !== 0,
    );

    for (const query of [{ plan: 'true' }, {}]) {
      const refused = await agent.api('POST', `/deployments/${n}/rollback`, { query, body: { revision: 1 } });
      expect(refused.status, refused.text).toBe(409);
      expect(refused.body).toMatchObject({ code: 'IMAGE_MISSING', service: 'web', image: gone });
      expect(refused.body.error).toContain(gone);
    }
    expect((await agent.api('POST', `/deployments/${n}/rollback`, { body: { revision: 9 } })).body.code).toBe('REVISION_NOT_FOUND');
    // A change that failed is a revision too, and not one to go back to.
    const failing = await agent.api('PUT', `/deployments/${n}`, { body: { compose_content: app('agent-test/none-of-this-run:missing') } });
    expect(failing.status).toBe(502);
    const revs = (await agent.api('GET', `/deployments/${n}/revisions`)).body.data;
    expect(revs[0]).toMatchObject({ rev: 3, action: 'update', status: 'failed', error: expect.any(String) });
    const refused = await agent.api('POST', `/deployments/${n}/rollback`, { body: { revision: 3 } });
    expect(refused.body).toMatchObject({ code: 'REVISION_NOT_RESTORABLE' });
    // start-first without the edge plugin: every service is recreated, and the plan says why.
    const startFirst = await agent.api('POST', `/deployments/${n}/redeploy`, { query: { plan: 'true' }, body: { strategy: 'start-first' } });
    expect(startFirst.status, startFirst.text).toBe(201);
    expect(startFirst.body.data.changes).toContainEqual({
      type: 'fallback',
      id: 'web',
      actions: ['update'],
      after: { strategy: 'recreate', why: 'the proxy (edge plugin) is not enabled on this agent' },
    });
    expect((await agent.api('POST', `/deployments/${n}/redeploy`, { body: { services: ['nope'] } })).status).toBe(400);
    // No backups plugin here: a change that asks for a backup does not run without one.
    for (const [method, path, body] of [
      ['PUT', `/deployments/${n}`, { env_vars: [], backup: true }],
      ['POST', `/deployments/${n}/redeploy`, { backup: true }],
    ] as const) {
      const refused = await agent.api(method, path, { body });
      expect(refused.status, path).toBe(503);
      expect(refused.body.code).toBe('BACKUPS_UNAVAILABLE');
    }
  });

  it('keeps the newest revisions (setting), and a deleted deployment keeps them under its retired name', async () => {
    expect((await agent.api('PUT', '/settings', { body: { deployments: { revisions_keep: 3 } } })).status).toBe(200);
    try {
      const n = name('keep');
      expect((await agent.api('POST', '/deployments', { body: { name: n, compose_content: app() } })).status).toBe(201);
      for (let i = 0; i < 4; i++)
        expect((await agent.api('PUT', `/deployments/${n}`, { body: { env_vars: [{ key: 'N', value: String(i) }] } })).status).toBe(200);
      const list = await agent.api('GET', `/deployments/${n}/revisions`);
      expect(list.body.meta.total).toBe(3);
      expect(list.body.data.map((r: any) => r.rev)).toEqual([5, 4, 3]);
      // A stopped deployment's change did not run: no images.
      expect(list.body.data[0]).toMatchObject({ ran: false, images: {} });

      const deleted = await agent.api('DELETE', `/deployments/${n}`);
      expect(deleted.status).toBe(200);
      expect((await agent.api('GET', `/deployments/${n}/revisions`)).status).toBe(404);
      // The retired name `<name>~<yyyymmddhhmmss>`, as the plugin logs it.
      const out = agent.output();
      const m = new RegExp(`"retired_as":"(${n}~[0-9]{14})"`).exec(out);
      expect(m, 'retired name logged').not.toBeNull();
      const kept = await agent.api('GET', `/deployments/${encodeURIComponent(m![1]!)}/revisions`);
      expect(kept.status, kept.text).toBe(200);
      expect(kept.body.data.map((r: any) => r.rev)).toEqual([5, 4, 3]);
      const one = await agent.api('GET', `/deployments/${encodeURIComponent(m![1]!)}/revisions/5`);
      expect(one.body.data).toMatchObject({ deployment: m![1], rev: 5, diff: null });
      // A new deployment of the name starts its own history.
      expect((await agent.api('POST', '/deployments', { body: { name: n, compose_content: app() } })).body.data.revision).toBe(1);
    } finally {
      await agent.api('PUT', '/settings', { body: { deployments: { revisions_keep: 20 } } });
    }
  });

  it("is a deployment's: a key scoped to another deployment gets 404, one scoped to it reads them", async () => {
    const mine = name('tenant-a');
    const other = name('tenant-b');
    for (const n of [mine, other]) expect((await agent.api('POST', '/deployments', { body: { name: n, compose_content: app() } })).status).toBe(201);
    const tenant = await createTenant(agent, `rev${runId}`, [other]);
    const token = tenant.key;
    for (const path of [`/deployments/${mine}/revisions`, `/deployments/${mine}/revisions/1`]) {
      const res = await agent.api('GET', path, { token });
      expect(res.status, path).toBe(404);
    }
    for (const [method, path, body] of [
      ['POST', `/deployments/${mine}/redeploy`, {}],
      ['POST', `/deployments/${mine}/rollback`, { revision: 1 }],
      ['POST', `/deployments/${mine}/hook`, undefined],
      ['GET', `/deployments/${mine}/hook`, undefined],
    ] as const)
      expect((await agent.api(method, path, { token, body })).status, path).toBe(404);
    expect((await agent.api('GET', `/deployments/${other}/revisions`, { token })).status).toBe(200);
    // A retired name is a global principal's only.
    expect((await agent.api('GET', `/deployments/${other}~20200101000000/revisions`, { token })).status).toBe(404);
  });
});

describe('a backup before a change (backup: true)', () => {
  let agent: TestAgent;
  const n = uniqueName('backup-first');

  beforeAll(async () => {
    // The backups plugin uses the deployments service and the deployments plugin the backups service, both optional:
    // the two load together.
    agent = await startAgent({ plugins: ['docker', 'deployments', 'jobs', 'backups'] });
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker(n);
  });

  it('takes the backup first and links it from the revision; a rollback to a later revision names it', async () => {
    const plugins = (await agent.api('GET', '/plugins')).body.data;
    expect(plugins.filter((p: any) => ['deployments', 'backups'].includes(p.name)).map((p: any) => p.status)).toEqual(['running', 'running']);
    const compose = app('agent-test/busybox:latest').replace('command: ["httpd", "-f", "-p", "80", "-h", "/www"]', 'command: ["sh", "-c", "sleep 3600"]');
    expect((await agent.api('POST', '/deployments', { body: { name: n, compose_content: compose, auto_start: true } })).status).toBe(201);
    const updated = await agent.api('PUT', `/deployments/${n}`, { body: { env_vars: [{ key: 'A', value: '1' }], backup: true, reason: 'with a backup' } });
    expect(updated.status, updated.text).toBe(200);
    const backupId = updated.body.data.backup_id;
    expect(backupId).toEqual(expect.any(String));
    expect((await agent.api('GET', `/backups/${backupId}`)).body.data).toMatchObject({ id: backupId, deployment: n });
    expect((await agent.api('GET', `/deployments/${n}/revisions/2`)).body.data).toMatchObject({ backup_id: backupId, reason: 'with a backup' });

    // A redeploy with a backup: the job takes it first.
    const redeploy = await agent.api('POST', `/deployments/${n}/redeploy`, { body: { backup: true } });
    expect(redeploy.status, redeploy.text).toBe(202);
    const job = await until(
      () => agent.api('GET', `/jobs/${redeploy.body.data.job_id}`),
      (r) => !['pending', 'running'].includes(r.body.data?.status),
      120_000,
      200,
    );
    expect(job.body.data, job.text).toMatchObject({ status: 'succeeded', result: { revision: 3, backup_id: expect.any(String) } });
    expect(job.body.data.result.backup_id).not.toBe(backupId);

    const rollback = await agent.api('POST', `/deployments/${n}/rollback`, { body: { revision: 2 } });
    expect(rollback.status, rollback.text).toBe(202);
    expect(rollback.body.data.volumes).toEqual({ touched: false, note: expect.any(String), backup_before_revision: backupId });
  });
});

describe('a rollback of images from a registry', () => {
  let agent: TestAgent;
  let registry: TestRegistry;
  const n = uniqueName('digest');

  beforeAll(async () => {
    registry = await startRegistry();
    await registry.docker(['login', registry.host, '-u', registry.username, '-p', registry.password]);
    agent = await startAgent({ plugins: ['docker', 'deployments', 'jobs'] });
  }, 120_000);
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker(n);
    await registry?.stop();
    if (registry) await execa('docker', ['rmi', '-f', `${registry.host}/agent-test/rev-${runId}:app`, ...new Set(built)], { reject: false });
  });

  /** Builds `version`, pushes it under one tag of the registry and pulls it back: the engine knows its digest. */
  const publish = async (version: string) => {
    const ref = `${registry.host}/agent-test/rev-${runId}:app`;
    await buildImage(version, ref);
    await registry.docker(['push', ref]);
    const digests = (await execa('docker', ['image', 'inspect', '-f', '{{json .RepoDigests}}', ref])).stdout;
    return { ref, id: built[built.length - 1]!, digest: (JSON.parse(digests) as string[]).find((d) => d.startsWith(`${registry.host}/`))! };
  };

  it('records the registry digest and pins it (repo@sha256:…) when going back', async () => {
    const v1 = await publish('r1');
    expect(v1.digest).toMatch(/@sha256:[0-9a-f]{64}$/);
    expect((await agent.api('POST', '/deployments', { body: { name: n, compose_content: app(v1.ref), auto_start: true } })).status).toBe(201);
    const rev1 = (await agent.api('GET', `/deployments/${n}/revisions/1`)).body.data;
    expect(rev1.images.web).toMatchObject({ image: v1.ref, digest: v1.digest });

    const v2 = await publish('r2');
    expect(v2.digest).not.toBe(v1.digest);
    const redeploy = await agent.api('POST', `/deployments/${n}/redeploy`, { body: { reason: 'new build' } });
    const done = await until(
      () => agent.api('GET', `/jobs/${redeploy.body.data.job_id}`),
      (r) => !['pending', 'running'].includes(r.body.data?.status),
      120_000,
      200,
    );
    expect(done.body.data.status).toBe('succeeded');
    expect((await agent.api('GET', `/deployments/${n}/revisions/2`)).body.data.images.web).toMatchObject({ digest: v2.digest });

    const plan = await agent.api('POST', `/deployments/${n}/rollback`, { query: { plan: 'true' }, body: { revision: 1 } });
    expect(plan.body.data.changes.find((c: any) => c.type === 'image')).toMatchObject({ after: { pinned: v1.digest } });
    const rolled = await agent.api('POST', `/deployments/${n}/rollback`, { body: { revision: 1 } });
    expect(rolled.status, rolled.text).toBe(202);
    expect(rolled.body.data.pins).toEqual({ web: v1.digest });
    const job = await until(
      () => agent.api('GET', `/jobs/${rolled.body.data.job_id}`),
      (r) => !['pending', 'running'].includes(r.body.data?.status),
      120_000,
      200,
    );
    expect(job.body.data, job.text).toMatchObject({ status: 'succeeded' });
    // The container was created from the digest reference: the image v1 was, whatever the tag names now.
    const { stdout: id } = await execa('docker', ['ps', '-q', '--filter', `label=com.docker.compose.project=${n}`]);
    const [configured, image] = (await execa('docker', ['inspect', '-f', '{{.Config.Image}} {{.Image}}', id.trim()])).stdout.trim().split(' ');
    expect(configured).toBe(v1.digest);
    expect(image).toBe(v1.id);
    expect((await agent.api('GET', `/deployments/${n}/revisions/3`)).body.data.images.web).toMatchObject({ image: v1.digest, digest: v1.digest });
  });
});
