/**
 * The observability app keeps to the caller's deployments (issue #14): two tenants, each a scoped operator user and
 * a key limited to its deployment, against each other's metrics, health, alert rules and events; the global routes
 * refused to them; restart actions re-checked against the rule's creator when they fire; a deleted deployment's
 * rules, states and history gone for a new deployment of the same name. The real agent and app, real compose
 * deployments of busybox containers and a container of no deployment.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobal, createTenant, createUser, principalsOf, type Tenant } from '../../backups/test/helpers/tenants.js';
import { docker, poll, removeContainers, runContainer } from './containers.js';

const run = randomBytes(4).toString('hex');
const A = `obta${run}`;
const B = `obtb${run}`;
const OUTSIDER = `obt-outsider-${run}`;
const IDLE = 'while :; do sleep 1; done';
const compose = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "trap 'exit 0' TERM; ${IDLE}"]
    labels:
      agent.test: "1"
      agent.obs.run: "${run}"
`;

let agent: TestAgent;
let alice: Tenant;
let bob: Tenant;
let globalOperator: string;
const containerOf: Record<string, string> = {};
const obs = (method: string, path: string, opts: Parameters<TestAgent['api']>[2] = {}) => agent.api(method, `/plugin/observability${path}`, opts);
const rule = (fields: Record<string, unknown>) => ({ metric: 'container.memory.usage', comparison: 'above', threshold: 1e15, for_seconds: 600, ...fields });

async function createDeployment(name: string, token?: string): Promise<string> {
  const res = await agent.api('POST', '/deployments', { ...(token ? { token } : {}), body: { name, compose_content: compose, auto_start: true } });
  expect(res.status, res.text).toBe(201);
  return docker('ps', '--filter', `label=com.docker.compose.project=${name}`, '--format', '{{.Names}}');
}

/** Readings of every container, as an admin sees them. */
const readings = async () =>
  ((await obs('GET', '/metrics/latest')).body.data as any[]).flatMap((g) => g.containers.map((c: any) => ({ ...c, deployment: g.deployment })));

beforeAll(async () => {
  await removeContainers([OUTSIDER]);
  await runContainer({ name: OUTSIDER, labels: { 'agent.obs.run': run }, script: IDLE });
  agent = await startAgent({
    plugins: ['access', 'docker', 'deployments', 'observability'],
    config: { observability: { sample_interval: 1, container_labels: { 'agent.obs.run': run }, health: { cooldown: 2, max_retries: 2 } } },
  });
  containerOf[A] = await createDeployment(A);
  containerOf[B] = await createDeployment(B);
  [alice, bob] = await Promise.all([createTenant(agent, 'alice', A), createTenant(agent, 'bob', B)]);
  globalOperator = await createGlobal(agent, 'gop', 'operator');
  await poll(
    async () => {
      const names = (await readings()).filter((r) => r.metrics['container.memory.usage'] !== undefined).map((r) => r.container);
      return [containerOf[A], containerOf[B], OUTSIDER].every((n) => names.includes(n));
    },
    'metrics of both deployments and of the outsider',
    60_000,
  );
}, 180_000);

afterAll(async () => {
  for (const name of [A, B]) await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } }).catch(() => undefined);
  await agent?.stop();
  await removeContainers([OUTSIDER]);
});

describe("metrics and health keep to the caller's deployments", () => {
  it('shows a tenant its containers only, and refuses it the global routes', async () => {
    for (const [who, token] of principalsOf(alice)) {
      const latest = await obs('GET', '/metrics/latest', { token });
      expect(latest.status, who).toBe(200);
      expect(
        latest.body.data.map((g: any) => g.deployment),
        who,
      ).toEqual([A]);
      expect(latest.text, who).not.toContain(B);
      expect(latest.text, who).not.toContain(OUTSIDER);
      expect((await obs('GET', '/metrics/latest', { token, query: { deployment: B } })).status, who).toBe(404);
      expect((await obs('GET', '/metrics/timeseries', { token, query: { deployment: B } })).status, who).toBe(404);
      expect((await obs('GET', '/metrics/timeseries', { token, query: { deployment: A, since: '5m' } })).status, who).toBe(200);
      for (const container of [containerOf[B], OUTSIDER]) {
        const series = await obs('GET', '/metrics/series', { token, query: { container, metric: 'container.memory.usage' } });
        expect(series.status, `${who} ${container}`).toBe(404);
      }
      expect((await obs('GET', '/metrics/series', { token, query: { container: containerOf[A], metric: 'container.memory.usage' } })).status, who).toBe(200);
      const health = await obs('GET', '/health', { token });
      expect(
        health.body.data.map((h: any) => h.container),
        who,
      ).toEqual([containerOf[A]]);
      expect((await obs('GET', '/health', { token, query: { deployment: B } })).status, who).toBe(404);
      expect((await obs('GET', '/health/events', { token, query: { deployment: B } })).status, who).toBe(404);
      // Host metrics, the exposition of every container and the settings are global.
      for (const [method, path, body] of [
        ['GET', '/metrics/host'],
        ['GET', '/metrics/prometheus'],
        ['GET', '/config'],
        ['PUT', '/config', { sample_interval: 60 }],
      ] as [string, string, unknown?][]) {
        const res = await obs(method, path, { token, body });
        expect(res.status, `${who} ${method} ${path}`).toBe(403);
        if (method === 'GET') expect(res.body.code, `${who} ${path}`).toBe('GLOBAL_SCOPE_REQUIRED');
      }
      // The app's agent-side routes are global too.
      expect((await agent.api('GET', '/observability/deployment-deletions', { token })).status, who).toBe(403);
    }
    // A global operator sees every container, the host and the exposition.
    const all = await obs('GET', '/metrics/latest', { token: globalOperator });
    expect(all.body.data.map((g: any) => g.deployment)).toEqual(expect.arrayContaining([A, B, null]));
    expect((await obs('GET', '/metrics/host', { token: globalOperator })).status).toBe(200);
    const prom = await obs('GET', '/metrics/prometheus', { token: globalOperator });
    expect(prom.text).toContain(containerOf[B]);
    expect(prom.text).toContain(OUTSIDER);
    expect((await obs('GET', '/config', { token: globalOperator })).status).toBe(200);
    expect((await obs('PUT', '/config', { token: globalOperator, body: { sample_interval: 60 } })).status).toBe(403);
    expect((await agent.api('POST', '/observability/authorize-action', { token: globalOperator, body: { principal: 'user:1', deployment: A } })).status).toBe(
      403,
    );
  });
});

describe("alert rules keep to the caller's deployments", () => {
  it("shows and replaces only the tenant's rules; others' and global ones are untouched and unseen", async () => {
    const put = await obs('PUT', '/alerts/rules', {
      body: [
        rule({ id: 'rule-a', name: 'rule-a', deployment: A }),
        rule({ id: 'rule-b', name: 'secret-rule-b', deployment: B }),
        rule({ id: 'rule-all', name: 'every-container', deployment: null }),
        { id: 'rule-host', name: 'host-cpu', metric: 'system.cpu.utilization', comparison: 'above', threshold: 2, for_seconds: 600 },
      ],
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data.every((r: any) => r.created_by === 'user:1')).toBe(true);
    for (const [who, token] of principalsOf(alice)) {
      const rules = await obs('GET', '/alerts/rules', { token });
      expect(
        rules.body.data.map((r: any) => r.id),
        who,
      ).toEqual(['rule-a']);
      // Another deployment: 404; no deployment (every container, or the host): global.
      const forB = await obs('PUT', '/alerts/rules', { token, body: [rule({ name: 'x', deployment: B })] });
      expect(forB.status, who).toBe(404);
      for (const body of [[rule({ name: 'x' })], [{ name: 'x', metric: 'system.cpu.utilization', comparison: 'above', threshold: 1, for_seconds: 0 }]]) {
        const res = await obs('PUT', '/alerts/rules', { token, body });
        expect([res.status, res.body.code], who).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
      }
    }
    // Sending another tenant's rule id changes nothing of it: the rule gets an id of its own.
    const sneaky = await obs('PUT', '/alerts/rules', { token: alice.key, body: [rule({ id: 'rule-b', name: 'mine', deployment: A, threshold: 1e14 })] });
    expect(sneaky.status, sneaky.text).toBe(200);
    expect(sneaky.text).not.toContain('secret-rule-b');
    expect(sneaky.body.data).toHaveLength(1);
    expect(sneaky.body.data[0]).toMatchObject({ name: 'mine', deployment: A, created_by: `api_key:${alice.keyId}` });
    expect(sneaky.body.data[0].id).not.toBe('rule-b');
    const seen = (await obs('GET', '/alerts/rules')).body.data;
    expect(seen.find((r: any) => r.id === 'rule-b')).toMatchObject({ name: 'secret-rule-b', deployment: B, threshold: 1e15, created_by: 'user:1' });
    expect(seen.map((r: any) => r.id).sort()).toEqual(['rule-all', 'rule-b', 'rule-host', sneaky.body.data[0].id].sort());
    // The tenant's own rule sent back unchanged keeps its creator; an empty array removes only the tenant's rules.
    const again = await obs('PUT', '/alerts/rules', { token: alice.user, body: sneaky.body.data });
    expect(again.body.data[0].created_by).toBe(`api_key:${alice.keyId}`);
    expect((await obs('PUT', '/alerts/rules', { token: alice.user, body: [] })).body.data).toEqual([]);
    expect((await obs('GET', '/alerts/rules')).body.data.map((r: any) => r.id).sort()).toEqual(['rule-all', 'rule-b', 'rule-host']);
    expect((await obs('GET', '/alerts/rules', { token: bob.user })).body.data.map((r: any) => r.id)).toEqual(['rule-b']);
  });

  it('shows a tenant firing alerts and events of its deployment only', async () => {
    // Rules of B and of every container that fire at once (memory above 0).
    expect(
      (
        await obs('PUT', '/alerts/rules', {
          body: [
            rule({ id: 'fire-b', name: 'fire-b', deployment: B, threshold: 0, for_seconds: 0 }),
            rule({ id: 'fire-all', name: 'fire-all', threshold: 0, for_seconds: 0 }),
          ],
        })
      ).status,
    ).toBe(200);
    await poll(async () => {
      const firing = (await obs('GET', '/alerts/firing')).body.data.map((f: any) => `${f.rule_id}:${f.container}`);
      return [`fire-b:${containerOf[B]}`, `fire-all:${containerOf[A]}`, `fire-all:${OUTSIDER}`].every((k) => firing.includes(k));
    }, 'both rules to fire');
    await poll(async () => (await obs('GET', '/alerts/firing', { token: bob.user })).body.data.length > 0, 'bob to see fire-b');
    for (const [who, token] of [...principalsOf(alice), ...principalsOf(bob)]) {
      for (const path of ['/alerts/firing', '/alerts/events']) {
        const res = await obs('GET', path, { token });
        expect(res.status, `${who} ${path}`).toBe(200);
        // Nothing of the other tenant, of no deployment, nor of the rule of every container (global), even on its
        // own container: alice sees nothing, bob the rule of B on B's container only.
        const seen = res.body.data.map((e: any) => `${e.rule_id}:${e.deployment}:${e.container}`);
        expect([...new Set(seen)], `${who} ${path}`).toEqual(token === alice.user || token === alice.key ? [] : [`fire-b:${B}:${containerOf[B]}`]);
        expect(res.text, `${who} ${path}`).not.toContain('fire-all');
      }
    }
    const bobRule = await obs('PUT', '/alerts/rules', {
      token: bob.user,
      body: [
        rule({ id: 'fire-b', name: 'fire-b', deployment: B, threshold: 0, for_seconds: 0 }),
        rule({ id: 'bob-fire', name: 'bob-fire', deployment: B, threshold: 0, for_seconds: 0 }),
      ],
    });
    expect(bobRule.status, bobRule.text).toBe(200);
    await poll(async () => (await obs('GET', '/alerts/firing', { token: bob.key })).body.data.some((f: any) => f.rule_id === 'bob-fire'), "bob's rule to fire");
    const events = (await obs('GET', '/alerts/events', { token: bob.key })).body.data;
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((e: any) => e.deployment === B && ['fire-b', 'bob-fire'].includes(e.rule_id))).toBe(true);
    expect((await obs('GET', '/alerts/firing', { token: alice.user })).body.data).toEqual([]);
    expect((await obs('PUT', '/alerts/rules', { body: [] })).status).toBe(200);
  });
});

describe("alert actions re-check the rule's creator when they fire", () => {
  it('does not restart for a creator who lost write access, and says why in the alert event', async () => {
    const dave = await createTenant(agent, 'dave', A);
    const started = await docker('inspect', '-f', '{{.State.StartedAt}}', containerOf[A]);
    const put = await obs('PUT', '/alerts/rules', {
      token: dave.user,
      body: [rule({ id: 'dave-restart', name: 'dave-restart', deployment: A, threshold: 0, for_seconds: 4, action: 'restart' })],
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data[0].created_by).toBe(`user:${dave.userId}`);
    // Pending now; by the time it fires, dave no longer has access to A.
    expect((await agent.api('DELETE', `/users/${dave.userId}/deployments/${A}`)).status).toBe(200);
    const fired = await poll(
      async () => {
        const res = await obs('GET', '/alerts/events', { query: { rule: 'dave-restart' } });
        return res.body.data.find((e: any) => e.state === 'firing');
      },
      'the rule to fire',
      30_000,
    );
    expect(fired.message).toContain('restart not run');
    expect(fired.message).toContain(`no longer has write access to deployment '${A}'`);
    await new Promise((r) => setTimeout(r, 2000));
    expect(await docker('inspect', '-f', '{{.State.StartedAt}}', containerOf[A])).toBe(started);
    const restarts = (await obs('GET', '/health/events', { query: { deployment: A } })).body.data.filter((e: any) => e.action === 'restarted');
    expect(restarts).toEqual([]);
    expect(
      (await obs('PUT', '/alerts/rules', { body: (await obs('GET', '/alerts/rules')).body.data.filter((r: any) => r.id !== 'dave-restart') })).status,
    ).toBe(200);
  });

  it('restarts for a scoped creator who still has write access', async () => {
    const started = await docker('inspect', '-f', '{{.State.StartedAt}}', containerOf[A]);
    const put = await obs('PUT', '/alerts/rules', {
      token: alice.key,
      body: [rule({ id: 'alice-restart', name: 'alice-restart', deployment: A, threshold: 0, for_seconds: 0, action: 'restart' })],
    });
    expect(put.status, put.text).toBe(200);
    await poll(async () => (await docker('inspect', '-f', '{{.State.StartedAt}}', containerOf[A])) !== started, 'the container to be restarted', 30_000);
    const fired = (await obs('GET', '/alerts/events', { token: alice.user, query: { rule: 'alice-restart' } })).body.data.find(
      (e: any) => e.state === 'firing',
    );
    expect(fired.message).toContain('restarting the container');
    expect((await obs('PUT', '/alerts/rules', { token: alice.user, body: [] })).status).toBe(200);
  });
});

describe('a deleted deployment', () => {
  it('loses its rules, states and history; its events stay under the retired name; a new one of the same name starts empty', async () => {
    const put = await obs('PUT', '/alerts/rules', {
      token: bob.user,
      body: [rule({ id: 'b-mem', name: 'b-mem', deployment: B, threshold: 0, for_seconds: 0 })],
    });
    expect(put.status, put.text).toBe(200);
    await poll(
      async () => (await obs('GET', '/alerts/events', { query: { deployment: B } })).body.data.some((e: any) => e.rule_id === 'b-mem'),
      'b-mem to fire',
    );
    const eventsBefore = (await obs('GET', '/alerts/events', { query: { deployment: B, limit: 1000 } })).body.data.map((e: any) => e.id);
    // 5 minutes at one-second steps: the old container's history (it ran for well over ten seconds).
    const seriesOf = (token: string) =>
      obs('GET', '/metrics/series', { token, query: { container: containerOf[B], metric: 'container.memory.usage', since: '5m' } });
    expect((await seriesOf(bob.user)).body.data.timestamps.length).toBeGreaterThan(10);
    expect((await agent.api('DELETE', `/deployments/${B}`, { query: { remove_files: true } })).status).toBe(200);
    const deletions = await agent.api('GET', '/observability/deployment-deletions');
    const retiredAs = deletions.body.data.items.find((d: any) => d.name === B).retired_as as string;
    expect(retiredAs).toMatch(new RegExp(`^${B}~\\d{14}$`));
    await poll(async () => !(await obs('GET', '/alerts/rules')).body.data.some((r: any) => r.deployment === B), 'the rules of B to go', 15_000);
    const retired = await poll(async () => {
      const res = await obs('GET', '/alerts/events', { query: { deployment: retiredAs, limit: 1000 } });
      return res.body.data.length >= eventsBefore.length ? res.body.data : undefined;
    }, 'the events of B under its retired name');
    expect(retired.map((e: any) => e.id)).toEqual(expect.arrayContaining(eventsBefore));

    // Someone else creates B again: no rules, alerts, events, health history or metric history of the old one.
    const carol = await createUser(agent, `carol-${run}`, 'operator');
    const fresh = await createDeployment(B, carol.token);
    expect(fresh).toBe(containerOf[B]); // the same container name: the old history must not follow it
    for (const token of [carol.token, bob.user, bob.key]) {
      expect((await obs('GET', '/alerts/rules', { token })).body.data).toEqual([]);
      expect((await obs('GET', '/alerts/firing', { token })).body.data).toEqual([]);
      expect((await obs('GET', '/alerts/events', { token })).body.data).toEqual([]);
      expect((await obs('GET', '/health/events', { token })).body.data).toEqual([]);
      expect((await obs('GET', '/alerts/events', { token, query: { deployment: retiredAs } })).status).toBe(404);
    }
    // The new container continues the series of that name, without the old container's samples.
    const history = await poll(async () => {
      const res = await seriesOf(carol.token);
      return res.status === 200 && res.body.data.timestamps.length >= 2 ? res.body.data : undefined;
    }, 'samples of the new container');
    const deletedAt = Date.parse(deletions.body.data.items.find((d: any) => d.name === B).deleted_at);
    expect(
      history.timestamps.every((t: number) => t >= deletedAt - 2000),
      JSON.stringify(history.timestamps),
    ).toBe(true);
  });
});
