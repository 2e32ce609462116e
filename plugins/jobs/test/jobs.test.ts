/**
 * Jobs against the real agent, with real processes: output and progress while a job runs and in its record, the
 * live stream without gaps, cancel that kills the process within 5 s, a timeout, lanes, a failure, tenancy, and a
 * job whose agent was killed (kill -9): `interrupted` after the restart, its process ended.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const FIXTURE = join(import.meta.dirname, 'fixtures', 'job-probe');
let marker = 100000 + (process.pid % 800000);
const nextMarker = () => ++marker;

/** Pids of `sleep <n>.<marker>` processes. */
function sleeping(m: number): number[] {
  try {
    return execFileSync('pgrep', ['-f', `sleep [0-9]+\\.${String(m).padStart(6, '0')}$`], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

async function until<T>(fn: () => Promise<T> | T, ok: (v: T) => boolean, ms = 15000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Follows a job's websocket to its end: every message, and the close code. */
function follow(agent: TestAgent, id: string): Promise<{ messages: any[]; code: number }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${agent.url.replace('http', 'ws')}/api/jobs/${id}/stream`);
    const messages: any[] = [];
    ws.on('open', () => ws.send(agent.token));
    ws.on('message', (data) => messages.push(JSON.parse(String(data))));
    ws.on('close', (code) => resolve({ messages, code }));
    ws.on('error', reject);
  });
}

describe('jobs', () => {
  let agent: TestAgent;

  beforeAll(async () => {
    // Kept: the last test kills this agent and starts another on its data.
    agent = await startAgent({ plugins: ['jobs', FIXTURE], keep: true });
  });
  afterAll(async () => {
    await agent?.stop();
  });

  const start = async (body: Record<string, unknown>) => {
    const res = await agent.api('POST', '/probe/jobs', { body });
    expect(res.status, res.text).toBe(202);
    return res.body.data.job_id as string;
  };
  const job = async (id: string) => (await agent.api('GET', `/jobs/${id}`)).body.data;

  it('records output and progress, and streams them live without a gap or a line twice', async () => {
    const id = await start({ lines: 600 });
    const streamed = await follow(agent, id);
    expect(streamed.code).toBe(1000);
    // The kernel's `ready` first, then the job.
    expect(streamed.messages[0]).toEqual({ type: 'ready' });
    expect(streamed.messages[1]).toMatchObject({ type: 'job', job: { id, kind: 'probe.run' } });
    const lines = streamed.messages.filter((m) => m.type === 'line').map((m) => m.text);
    expect(lines).toEqual(Array.from({ length: 600 }, (_, i) => `line ${i + 1}`));
    const end = streamed.messages[streamed.messages.length - 1];
    expect(end).toMatchObject({ type: 'end', job: { status: 'succeeded', result: { printed: 600 } } });
    const record = await job(id);
    expect(record).toMatchObject({ status: 'succeeded', progress: { percent: 100, step: 'done' }, error: null });
    expect(record.output).toHaveLength(600);
    const listed = await agent.api('GET', '/jobs', { query: { kind: 'probe.run' } });
    expect(listed.body.data.map((j: any) => j.id)).toContain(id);
    expect(listed.body.meta.total).toBeGreaterThanOrEqual(1);
  });

  it('cancel kills the process within 5 s and records who cancelled', async () => {
    const m = nextMarker();
    const id = await start({ sleep: 300, marker: m });
    await until(
      () => sleeping(m),
      (p) => p.length === 1,
    );
    expect(sleeping(m)).toHaveLength(1);
    const asked = Date.now();
    const res = await agent.api('POST', `/jobs/${id}/cancel`);
    expect(res.status, res.text).toBe(200);
    expect(Date.now() - asked).toBeLessThan(5000);
    expect(res.body.data).toMatchObject({ status: 'cancelled', error_code: 'JOB_CANCELLED', cancelled_by: expect.stringMatching(/^user:/) });
    expect(
      await until(
        () => sleeping(m),
        (p) => p.length === 0,
        5000,
      ),
    ).toEqual([]);
    const again = await agent.api('POST', `/jobs/${id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('JOB_ENDED');
  });

  it('stops a job at its timeout, a failure is recorded, a busy lane refuses a second job', async () => {
    const m = nextMarker();
    const slow = await start({ sleep: 300, marker: m, timeout: 1 });
    const timedOut = await until(
      () => job(slow),
      (j) => j.status !== 'running' && j.status !== 'pending',
      10000,
    );
    expect(timedOut).toMatchObject({ status: 'failed', error_code: 'JOB_TIMEOUT' });
    expect(
      await until(
        () => sleeping(m),
        (p) => p.length === 0,
        5000,
      ),
    ).toEqual([]);

    const failing = await start({ fail: true });
    expect(
      await until(
        () => job(failing),
        (j) => j.status === 'failed',
      ),
    ).toMatchObject({ error: 'the probe failed as asked', error_code: 'JOB_FAILED' });

    const m2 = nextMarker();
    const first = await start({ sleep: 300, marker: m2, lane: 'x' });
    const second = await agent.api('POST', '/probe/jobs', { body: { lane: 'x' } });
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ code: 'JOB_IN_PROGRESS', job_id: first });
    await agent.api('POST', `/jobs/${first}/cancel`);
  });

  it('keeps a scoped principal to its deployments: global jobs are not its', async () => {
    const id = await start({ lines: 1 });
    const user = await agent.api('POST', '/users', {
      body: { username: `jobviewer${process.pid % 1000}`, email: 'j@example.org', password: 'Viewer-Pass-12', role: 'viewer' },
    });
    expect(user.status, user.text).toBe(201);
    const key = await agent.api('POST', '/apikeys', { body: { name: 'scoped', role: 'viewer', deployments: ['someone'] } });
    expect(key.status, key.text).toBe(201);
    const token = key.body.data.key as string;
    const one = await agent.api('GET', `/jobs/${id}`, { token });
    expect([403, 404]).toContain(one.status);
    const list = await agent.api('GET', '/jobs', { token });
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([]);
    const cancel = await agent.api('POST', `/jobs/${id}/cancel`, { token });
    expect([403, 404]).toContain(cancel.status);
  });

  it('a job whose agent was killed is interrupted after the restart, and its process ended', async () => {
    const m = nextMarker();
    const id = await start({ sleep: 300, marker: m });
    await until(
      () => sleeping(m),
      (p) => p.length === 1,
    );
    const dataDir = agent.dataDir;
    await agent.kill();
    // The process outlived the agent (nothing kills a child when its parent gets SIGKILL)…
    expect(sleeping(m)).toHaveLength(1);
    agent = await startAgent({ plugins: ['jobs', FIXTURE], dataDir });
    // …and the next agent ends it, and says what became of the job.
    expect(
      await until(
        () => sleeping(m),
        (p) => p.length === 0,
        5000,
      ),
    ).toEqual([]);
    expect(await job(id)).toMatchObject({ status: 'interrupted', error_code: 'INTERRUPTED' });
  });
});
