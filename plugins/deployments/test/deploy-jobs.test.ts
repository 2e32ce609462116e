/**
 * Deploy jobs you can stop, against the real engine and compose: redeploys cancelled at random moments of their
 * life (`CANCEL_ROUNDS`, 20 by default; the issue's figure is 100) each end in a final state within 5 s of the
 * cancel, with no compose process of the deployment left running, a revision that is not left `pending`, and a
 * record of what was left; the deployment redeploys normally afterwards. A redeploy whose agent is killed (kill -9)
 * is `interrupted` after the restart, its revision too.
 */
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName, until } from './helpers.js';

const ROUNDS = Number(process.env.CANCEL_ROUNDS ?? 20);

const compose = `services:
${['a', 'b', 'c']
  .map(
    (s) => `  ${s}:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "sleep 3600"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"`,
  )
  .join('\n')}
`;

/** Compose processes working on a project (`-p <name>`). */
async function composeProcesses(project: string): Promise<string[]> {
  const r = await execa('pgrep', ['-af', `docker-compose .*-p ${project}( |$)`], { reject: false });
  return r.stdout.split('\n').filter(Boolean);
}

describe('deploy jobs', () => {
  let agent: TestAgent;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments', 'jobs'], keep: true });
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
  });

  const job = async (id: string) => (await agent.api('GET', `/jobs/${id}`)).body.data;
  const finished = async (id: string) =>
    until(
      () => job(id),
      (j) => !['pending', 'running'].includes(j?.status),
      120_000,
      200,
    );

  it(`cancels redeploys at random moments (${ROUNDS} rounds): every job ends, no compose process is left, the record says what was left`, async () => {
    const name = uniqueName('cancel');
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } })).status).toBe(201);
    // How long a redeploy takes here (the shorter of two), to spread the cancels over its whole life.
    let duration = Infinity;
    for (let i = 0; i < 2; i++) {
      const t0 = Date.now();
      const first = await agent.api('POST', `/deployments/${name}/redeploy`, { body: {} });
      expect(first.status, first.text).toBe(202);
      expect((await finished(first.body.data.job_id)).status).toBe('succeeded');
      duration = Math.min(duration, Date.now() - t0);
    }

    const outcomes: Record<string, number> = {};
    let stuck = 0;
    let orphans = 0;
    let slowest = 0;
    let changed = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const started = await agent.api('POST', `/deployments/${name}/redeploy`, { body: { reason: `round ${round}` } });
      expect(started.status, started.text).toBe(202);
      const id = started.body.data.job_id;
      await new Promise((r) => setTimeout(r, Math.random() * duration));
      const asked = Date.now();
      const cancel = await agent.api('POST', `/jobs/${id}/cancel`);
      const took = Date.now() - asked;
      slowest = Math.max(slowest, took);
      // A job that ended before the cancel reached it is 409 JOB_ENDED: it ended all the same.
      expect([200, 409], cancel.text).toContain(cancel.status);
      const record = await job(id);
      if (['pending', 'running'].includes(record.status)) stuck++;
      outcomes[record.status] = (outcomes[record.status] ?? 0) + 1;
      if (cancel.status === 200) {
        expect(took, `cancel answered in ${took} ms`).toBeLessThan(5500);
        expect(record.status).toBe('cancelled');
        // What was left: nothing changed (stopped before the run), or the revision and each service's container,
        // its state and whether this job replaced it.
        expect(record.result).toMatchObject({ deployment: name, changed: expect.any(Boolean) });
        if (record.result.changed) {
          expect(record.result.revision).toEqual(expect.any(Number));
          expect(record.result.left.map((s: any) => s.service).sort()).toEqual(['a', 'b', 'c']);
          for (const s of record.result.left) expect(s).toMatchObject({ state: expect.any(String), recreated: expect.any(Boolean) });
          changed++;
        }
      }
      const left = await composeProcesses(name);
      if (left.length) orphans++;
      expect(left, `round ${round}: compose processes left`).toEqual([]);
    }
    console.log(
      `redeploy cancel rounds: ${ROUNDS}, outcomes ${JSON.stringify(outcomes)} (${changed} cancelled while compose ran), stuck jobs ${stuck}, orphan compose processes ${orphans}, slowest cancel answer ${slowest} ms, a redeploy ${duration} ms`,
    );
    expect(stuck).toBe(0);
    expect(orphans).toBe(0);

    // No revision is left pending, and the deployment redeploys normally after all that.
    const revisions = await agent.api('GET', `/deployments/${name}/revisions`, { query: { limit: 200 } });
    expect(revisions.body.data.filter((r: any) => r.status === 'pending')).toEqual([]);
    const cancelled = revisions.body.data.find((r: any) => r.status === 'cancelled');
    if (outcomes.cancelled) expect(cancelled).toMatchObject({ action: 'redeploy', error: expect.stringContaining('cancelled') });
    const again = await agent.api('POST', `/deployments/${name}/redeploy`, { body: {} });
    expect((await finished(again.body.data.job_id)).status).toBe('succeeded');
    const info = await until(
      () => agent.api('GET', `/deployments/${name}`),
      (r) => r.body.data.status === 'running',
    );
    expect(info.body.data.status).toBe('running');
  }, 1_800_000);

  it('refuses a second deploy job of the same deployment while one runs (409 JOB_IN_PROGRESS with its id)', async () => {
    const name = uniqueName('lane');
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } })).status).toBe(201);
    const first = await agent.api('POST', `/deployments/${name}/redeploy`, { body: {} });
    const second = await agent.api('POST', `/deployments/${name}/redeploy`, { body: {} });
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ code: 'JOB_IN_PROGRESS', job_id: first.body.data.job_id });
    expect((await finished(first.body.data.job_id)).status).toBe('succeeded');
  });

  it('leaves a redeploy whose agent was killed (kill -9) interrupted after the restart, its revision too', async () => {
    const name = uniqueName('killed');
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } })).status).toBe(201);
    const started = await agent.api('POST', `/deployments/${name}/redeploy`, { body: { reason: 'about to crash' } });
    const id = started.body.data.job_id;
    // Killed while compose works on it.
    await until(
      () => composeProcesses(name),
      (p) => p.length > 0,
      30_000,
      20,
    );
    const { dataDir } = agent;
    await agent.kill();
    // What the killed agent's compose was doing ends on its own (it was not a job's program).
    await until(
      () => composeProcesses(name),
      (p) => p.length === 0,
      60_000,
      200,
    );
    agent = await startAgent({ plugins: ['docker', 'deployments', 'jobs'], dataDir, keep: true });
    const record = await job(id);
    expect(record).toMatchObject({ status: 'interrupted', error_code: 'INTERRUPTED', deployment: name, kind: 'deployment.redeploy' });
    const revisions = (await agent.api('GET', `/deployments/${name}/revisions`)).body.data;
    expect(revisions[0]).toMatchObject({ action: 'redeploy', status: 'interrupted', reason: 'about to crash', job_id: id });
    // And the deployment is usable: a redeploy runs.
    const again = await agent.api('POST', `/deployments/${name}/redeploy`, { body: {} });
    expect((await finished(again.body.data.job_id)).status).toBe('succeeded');
  });
});
