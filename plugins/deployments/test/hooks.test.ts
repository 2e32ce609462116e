/**
 * Deploy hooks for CI against the real agent and engine: a signed call answers 202 and runs a redeploy (a job, a
 * revision by `system:hook`, audited); a bad signature, an old timestamp and a replayed delivery id are refused
 * (401/409 with their codes) and audited; no hook (or no deployment) is 404 without telling which; the secret is
 * shown once, never by GET, sealed at rest, and rotation ends the old one; a creator that lost access makes the
 * hook answer 403; calls beyond the rate are 429 with Retry-After; the p99 of signed calls' answers over a few
 * hundred calls (`HOOK_CALLS`, 100 by default; goal < 200 ms).
 */
import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createTenant } from '../../docker/test/tenants.js';
import { cleanupDocker, uniqueName, until } from './helpers.js';

const CALLS = Number(process.env.HOOK_CALLS ?? 100);

const compose = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "sleep 3600"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

const sign = (secret: string, timestamp: string, delivery: string, body: string) =>
  `sha256=${createHmac('sha256', secret).update(`${timestamp}.${delivery}.${body}`).digest('hex')}`;

describe('deploy hooks', () => {
  let agent: TestAgent;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments', 'jobs', 'access', 'system'] });
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
  });

  /** A call of the hook, as CI sends it (no bearer token). */
  const call = (
    name: string,
    secret: string,
    options: { body?: string; timestamp?: number; delivery?: string; signature?: string; headers?: Record<string, string> } = {},
  ) => {
    const body = options.body ?? '';
    const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
    const delivery = options.delivery ?? randomUUID();
    return request(agent.url, 'POST', `/hooks/deployments/${name}/redeploy`, {
      token: null,
      raw: body,
      headers: {
        'content-type': 'application/json',
        'X-Agent-Timestamp': timestamp,
        'X-Agent-Delivery': delivery,
        'X-Agent-Signature': options.signature ?? sign(secret, timestamp, delivery, body),
        ...(options.headers ?? {}),
      },
    });
  };
  const finished = (id: string) =>
    until(
      () => agent.api('GET', `/jobs/${id}`),
      (r) => !['pending', 'running'].includes(r.body.data?.status),
      120_000,
      100,
    );
  const deployment = async (what: string) => {
    const name = uniqueName(what);
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } })).status).toBe(201);
    return name;
  };

  it('runs a redeploy for a signed call, refuses bad signatures, old timestamps and replays, and shows the secret once', async () => {
    const name = await deployment('hook');
    // No hook yet: 404, the same as for no deployment at all.
    const none = await call(name, 'whatever');
    const missing = await call(uniqueName('nothing-here'), 'whatever');
    expect([none.status, missing.status]).toEqual([404, 404]);
    expect(none.body).toEqual(missing.body);
    expect((await agent.api('GET', `/deployments/${name}/hook`)).body.data).toMatchObject({ enabled: false, url: `/api/hooks/deployments/${name}/redeploy` });

    const created = await agent.api('POST', `/deployments/${name}/hook`);
    expect(created.status, created.text).toBe(201);
    const secret = created.body.data.secret as string;
    expect(secret).toMatch(/^hks_[A-Za-z0-9_-]{43}$/);
    expect(created.body.data).toMatchObject({
      enabled: true,
      headers: { timestamp: 'X-Agent-Timestamp', delivery: 'X-Agent-Delivery', signature: 'X-Agent-Signature' },
    });
    const state = await agent.api('GET', `/deployments/${name}/hook`);
    expect(state.body.data).toMatchObject({ enabled: true, created_by: expect.stringMatching(/^user:/) });
    expect(state.text).not.toContain(secret);
    // Sealed at rest: the journal does not hold it in clear.
    const journal = readFileSync(join(agent.dataDir, 'plugins', 'deployments', 'journal.sqlite'));
    expect(journal.includes(Buffer.from(secret))).toBe(false);

    const body = JSON.stringify({ reason: 'ci build 42' });
    const delivery = randomUUID();
    const ok = await call(name, secret, { body, delivery });
    expect(ok.status, ok.text).toBe(202);
    expect(ok.body.data).toMatchObject({ job_id: expect.stringMatching(/^job_/), deployment: name, strategy: 'recreate', delivery });
    const job = await finished(ok.body.data.job_id);
    expect(job.body.data).toMatchObject({ status: 'succeeded', kind: 'deployment.redeploy', created_by: 'system:hook' });
    const revision = (await agent.api('GET', `/deployments/${name}/revisions`)).body.data[0];
    expect(revision).toMatchObject({ action: 'redeploy', status: 'succeeded', reason: 'ci build 42', created_by: 'system:hook', job_id: ok.body.data.job_id });

    // Replayed: the same call again.
    const replay = await call(name, secret, { body, delivery });
    expect(replay.status).toBe(409);
    expect(replay.body.code).toBe('HOOK_DELIVERY_REPLAYED');
    // A signature of another body, of another secret, malformed, or missing.
    for (const bad of [
      { signature: sign(secret, String(Math.floor(Date.now() / 1000)), 'x', '{"pull":true}') },
      { signature: sign('hks_other', String(Math.floor(Date.now() / 1000)), 'y', '') },
      { signature: 'sha256=zz' },
      { signature: '' },
    ]) {
      const refused = await call(name, secret, { ...bad, body: '' });
      expect(refused.status, JSON.stringify(bad)).toBe(401);
      expect(refused.body.code).toBe('HOOK_SIGNATURE_INVALID');
    }
    // Signed, but too old (or from the future).
    for (const skew of [-301, 400]) {
      const stale = await call(name, secret, { timestamp: Math.floor(Date.now() / 1000) + skew });
      expect(stale.status).toBe(401);
      expect(stale.body.code).toBe('HOOK_TIMESTAMP_STALE');
    }
    // A signed body the hook does not know is refused (the hook redeploys with strategy recreate only).
    expect((await call(name, secret, { body: '{"strategy":"start-first"}' })).body.code).toBe('VALIDATION_FAILED');
    // An admin's bearer token is no way in: the call is judged by its signature alone.
    const bearer = await request(agent.url, 'POST', `/hooks/deployments/${name}/redeploy`, { token: agent.token, raw: '' });
    expect(bearer.status).toBe(401);
    expect(bearer.body.code).toBe('HOOK_SIGNATURE_INVALID');

    // Audited: the call that started the redeploy and the refused ones, as system:hook naming the deployment.
    const audit = await agent.api('GET', '/audit/events', { query: { deployment: name, action: 'deployments.hookRedeploy', limit: 50 } });
    expect(audit.status, audit.text).toBe(200);
    const events = audit.body.data;
    expect(events.find((e: any) => e.success)).toMatchObject({ actor_type: 'system', actor_id: 'system:hook', deployment: name, status: 202 });
    expect(events.filter((e: any) => !e.success).map((e: any) => e.status)).toEqual(expect.arrayContaining([401, 409]));
    expect(JSON.stringify(events)).not.toContain(secret);

    // Rotated: the old secret stops working; disabled: 404.
    const rotated = await agent.api('POST', `/deployments/${name}/hook`);
    expect(rotated.body.data.secret).not.toBe(secret);
    expect((await call(name, secret)).body.code).toBe('HOOK_SIGNATURE_INVALID');
    const second = await call(name, rotated.body.data.secret);
    expect(second.status, second.text).toBe(202);
    await finished(second.body.data.job_id);
    expect((await agent.api('DELETE', `/deployments/${name}/hook`)).body.data.enabled).toBe(false);
    expect((await call(name, rotated.body.data.secret)).status).toBe(404);
  });

  it('runs with its creator’s rights of now: a creator that lost access makes the hook answer 403', async () => {
    const name = await deployment('hook-owner');
    const tenant = await createTenant(agent, `hk${uniqueName('').slice(1, 8)}`, [name], 'write');
    // A write grant is not enough to create a hook: an admin of the deployment's decision.
    expect((await agent.api('POST', `/deployments/${name}/hook`, { token: tenant.user })).status).toBe(403);
    const me = (await agent.api('GET', '/users/me', { token: tenant.user })).body.data;
    expect((await agent.api('PUT', `/users/${me.id}/deployments/${name}`, { body: { access_level: 'admin' } })).status).toBeLessThan(300);
    const created = await agent.api('POST', `/deployments/${name}/hook`, { token: tenant.user });
    expect(created.status, created.text).toBe(201);
    const secret = created.body.data.secret;
    const ok = await call(name, secret);
    expect(ok.status, ok.text).toBe(202);
    await finished(ok.body.data.job_id);
    // The grant goes: the hook no longer redeploys.
    expect((await agent.api('DELETE', `/users/${me.id}/deployments/${name}`)).status).toBeLessThan(300);
    const refused = await call(name, secret);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('HOOK_CREATOR_LACKS_ACCESS');
  });

  it('rate limits calls (429 with Retry-After), and answers signed calls fast (p99)', async () => {
    expect((await agent.api('PUT', '/settings', { body: { deployments: { hook_rate_limit: 3 } } })).status).toBe(200);
    const limited = await deployment('hook-rate');
    const secret = (await agent.api('POST', `/deployments/${limited}/hook`)).body.data.secret;
    const answers: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await call(limited, secret);
      answers.push(res.status);
      if (res.status === 429) {
        expect(res.body.code).toBe('RATE_LIMITED');
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      }
    }
    // Three signed calls pass the limit (the second and third find the first redeploy running: 409), the fourth is 429.
    expect(answers[0]).toBe(202);
    expect(answers[3]).toBe(429);
    // Refused calls have their own budget: beyond it, 429 too.
    const bad: number[] = [];
    for (let i = 0; i < 4; i++) bad.push((await call(limited, secret, { signature: `sha256=${'0'.repeat(64)}` })).status);
    expect(bad).toEqual([401, 401, 401, 429]);

    // Signed calls as CI sends them, one after the other, each once the redeploy the previous one started ended
    // (a call while one runs is 409 JOB_IN_PROGRESS, and the agent's own compose processes would compete with it
    // for the machine's two cores): what a call costs the agent, from its arrival to its 202.
    expect((await agent.api('PUT', '/settings', { body: { deployments: { hook_rate_limit: 10_000 } } })).status).toBe(200);
    const name = await deployment('hook-p99');
    const hook = (await agent.api('POST', `/deployments/${name}/hook`)).body.data.secret;
    const times: number[] = [];
    while (times.length < CALLS) {
      const started = performance.now();
      const res = await call(name, hook);
      times.push(performance.now() - started);
      expect(res.status, res.text).toBe(202);
      await finished(res.body.data.job_id);
    }
    times.sort((a, b) => a - b);
    const p = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!;
    console.log(
      `hook answers (202, signed): ${times.length} calls, p50 ${p(0.5).toFixed(1)} ms, p99 ${p(0.99).toFixed(1)} ms, max ${times[times.length - 1]!.toFixed(1)} ms`,
    );
    // The < 200 ms p99 goal is a figure measured on a quiet machine (README), not a timed assertion: a suite that
    // runs files side by side on two cores moves it. What must hold under any load is that the 202 does not wait
    // for the redeploy it starts (a recreate takes seconds), so the bound here is well under one.
    expect(p(0.99)).toBeLessThan(1000);
  }, 1_800_000);
});
