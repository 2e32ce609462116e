import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { request, startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { startHttpSink, type HttpSink } from '../../notifications/test/sinks.js';
import { docker, poll, removeContainers, runContainer } from './containers.js';

const FIXTURE = join(import.meta.dirname, '../../notifications/test/fixture');
const run = randomBytes(4).toString('hex');
const DEP_A = `obsa${run}`;
const DEP_B = `obsb${run}`;
const DEP_C = `obsc${run}`;
const WEB = `obs-web-${run}`;
const BURNER = `obs-burner-${run}`;
const OUTSIDER = `obs-outsider-${run}`;
const DEP_D = `obsd${run}`;
const PLAIN = [WEB, BURNER, OUTSIDER];
const IDLE = 'while :; do sleep 1; done';

/**
 * Real compose deployments for what the agent restarts: the health watcher and restart actions only touch
 * containers of this agent's deployments (other agents testing on the same engine leave them alone too).
 */
const service = (script: string, healthcheck: string[] | null) => `
    image: agent-test/busybox:latest
    command: ["sh", "-c", "trap 'exit 0' TERM; ${script}"]
    labels:
      agent.test: "1"
      agent.obs.run: "${run}"
${
  healthcheck
    ? `    healthcheck:
      test: ${JSON.stringify(healthcheck)}
      interval: 1s
      timeout: 5s
      retries: 1
`
    : ''
}`;
// api: unhealthy on its first run, healthy once restarted.
const COMPOSE_C = `services:
  api:${service(`if [ -f /tmp/started ]; then touch /tmp/healthy; fi; touch /tmp/started; ${IDLE}`, ['CMD', 'test', '-f', '/tmp/healthy'])}`;
// db: never healthy (the watcher gives up); worker: restarted by an alert rule.
const COMPOSE_D = `services:
  db:${service(IDLE, ['CMD', 'false'])}
  worker:${service(IDLE, null)}`;

describe('observability app', () => {
  let agent: TestAgent;
  let sink: HttpSink;
  let SICK = '';
  let DOOMED = '';
  let VICTIM = '';
  const obs = (method: string, path: string, opts: Parameters<TestAgent['api']>[2] = {}) => agent.api(method, `/plugin/observability${path}`, opts);

  beforeAll(async () => {
    sink = await startHttpSink();
    await removeContainers(PLAIN);
    await Promise.all([
      runContainer({ name: WEB, deployment: DEP_A, service: 'web', labels: { 'agent.obs.run': run }, script: IDLE }),
      runContainer({
        name: BURNER,
        deployment: DEP_B,
        service: 'worker',
        labels: { 'agent.obs.run': run },
        script: `while [ ! -f /tmp/stop ]; do :; done; ${IDLE}`,
      }),
      // Same run, no deployment label: outside any deployment.
      runContainer({ name: OUTSIDER, labels: { 'agent.obs.run': run }, script: IDLE }),
    ]);
    agent = await startAgent({
      plugins: ['docker', 'deployments', 'notifications', 'observability', FIXTURE],
      config: {
        observability: {
          sample_interval: 1,
          container_labels: { 'agent.obs.run': run },
          health: { cooldown: 2, max_retries: 2 },
        },
      },
    });
    // Targets first: the deployments below turn unhealthy (and recover) right after they start.
    await agent.api('PUT', '/notifications/targets', {
      body: [
        { id: 'ops-hook', name: 'ops-hook', url: `generic+http://127.0.0.1:${new URL(sink.url).port}/alerts`, events: ['health.recovered', 'health.gave_up'] },
      ],
    });
    for (const [name, compose] of [
      [DEP_C, COMPOSE_C],
      [DEP_D, COMPOSE_D],
    ] as const) {
      const created = await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } });
      expect(created.status, created.text).toBe(201);
      expect(created.body.data.start_error).toBeNull();
    }
    // -a: the health watcher may be restarting the unhealthy api container at this very moment.
    const nameOf = async (deployment: string, svc: string) =>
      docker(
        'ps',
        '-a',
        '--filter',
        `label=com.docker.compose.project=${deployment}`,
        '--filter',
        `label=com.docker.compose.service=${svc}`,
        '--format',
        '{{.Names}}',
      );
    [SICK, DOOMED, VICTIM] = await Promise.all([nameOf(DEP_C, 'api'), nameOf(DEP_D, 'db'), nameOf(DEP_D, 'worker')]);
    expect(SICK && DOOMED && VICTIM).toBeTruthy();
  });

  afterAll(async () => {
    for (const name of [DEP_C, DEP_D]) await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await removeContainers([...PLAIN, SICK, DOOMED, VICTIM].filter(Boolean));
    await sink?.close();
  });

  const latestOf = async (token?: string) => (await obs('GET', '/metrics/latest', token ? { token } : {})).body.data as any[];
  const reading = (groups: any[], container: string) => groups.flatMap((g) => g.containers).find((c: any) => c.container === container);

  it('collects metrics of running containers and of the host', async () => {
    const web = await poll(async () => {
      const r = reading(await latestOf(), WEB);
      return r?.metrics['container.cpu.usage'] !== undefined ? r : undefined;
    }, 'metrics of the web container');
    expect(web.metrics).toMatchObject({
      'container.cpu.usage': expect.any(Number),
      'container.memory.usage': expect.any(Number),
      'container.memory.limit': expect.any(Number),
      'container.network.io.rx': expect.any(Number),
      'container.network.io.tx': expect.any(Number),
    });
    expect(web.metrics['container.memory.usage']).toBeGreaterThan(0);
    expect(web.metrics['container.memory.limit']).toBeGreaterThan(web.metrics['container.memory.usage']);
    const groups = await latestOf();
    expect(groups.find((g) => g.deployment === DEP_A).containers.map((c: any) => c.container)).toEqual([WEB]);
    expect(groups.find((g) => g.deployment === null).containers.map((c: any) => c.container)).toEqual([OUTSIDER]);

    const host = await poll(async () => {
      const res = await obs('GET', '/metrics/host', { query: { since: '5m' } });
      const data = res.body.data;
      return data?.latest['system.cpu.utilization'] !== undefined && data.series.some((x: any) => x.metric === 'system.cpu.utilization') ? data : undefined;
    }, 'host metrics');
    for (const m of ['system.cpu.utilization', 'system.memory.utilization', 'system.disk.utilization']) {
      expect(host.latest[m]).toBeGreaterThanOrEqual(0);
      expect(host.latest[m]).toBeLessThanOrEqual(1);
    }
    expect(host.latest['system.network.io.rx']).toBeGreaterThanOrEqual(0);
    expect(host.series.map((s: any) => s.metric)).toEqual(expect.arrayContaining(['system.cpu.utilization', 'system.memory.utilization']));

    const ts = await poll(async () => {
      const res = await obs('GET', '/metrics/timeseries', { query: { deployment: DEP_A, since: '15m' } });
      const cpu = res.body.data?.series.find((s: any) => s.metric === 'container.cpu.usage');
      return cpu?.values.filter((v: unknown) => v !== null).length >= 2 ? res.body.data : undefined;
    }, 'two points of history');
    expect(ts.step).toBeLessThan(60);
    expect(ts.series.every((s: any) => s.container === WEB)).toBe(true);
    const series = await obs('GET', '/metrics/series', { query: { deployment: DEP_A, container: WEB, metric: 'container.memory.usage', since: '1h' } });
    expect(series.status).toBe(200);
    expect(series.body.data.series).toHaveLength(1);
    const one = series.body.data;
    expect(one.timestamps.length).toBeGreaterThan(0);
    expect(one.series[0].values).toHaveLength(one.timestamps.length);
    expect(one.series[0].values.at(-1)).toBeGreaterThan(0);
    expect([...one.timestamps].sort()).toEqual(one.timestamps);
    expect((await obs('GET', '/metrics/series', { query: { container: 'nope', metric: 'container.memory.usage' } })).status).toBe(404);
    expect((await obs('GET', '/metrics/series', { query: { container: WEB, metric: 'container.bogus' } })).status).toBe(400);
    expect((await obs('GET', '/metrics/timeseries', { query: { deployment: DEP_A, since: 'yesterday' } })).status).toBe(400);
  });

  it('serves a valid Prometheus text exposition', async () => {
    const res = await obs('GET', '/metrics/prometheus');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const families = parsePrometheusTextFormat(res.text);
    const byName = Object.fromEntries(families.map((f: any) => [f.name, f]));
    expect(byName.container_cpu_usage.type).toBe('GAUGE');
    const web = byName.container_memory_usage_bytes.metrics.find((m: any) => m.labels.container === WEB);
    expect(web.labels).toEqual({ container: WEB, deployment: DEP_A, service: 'web' });
    expect(Number(web.value)).toBeGreaterThan(0);
    expect(Number(byName.system_memory_utilization_ratio.metrics[0].value)).toBeGreaterThan(0);
    // Every sample line is `name{labels} value timestamp` with a known family.
    for (const line of res.text.split('\n').filter((l) => l && !l.startsWith('#'))) {
      expect(line).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9.e+-]+( \d+)?$/);
    }
  });

  it('fires an alert for a CPU-burning container, notifies the webhook, and resolves once it stops', async () => {
    const put = await obs('PUT', '/alerts/rules', {
      // A busy loop gets well over 0.05 CPU even on a loaded 2-core machine; the idle containers stay far below.
      body: [
        { name: 'cpu-burn', deployment: DEP_B, metric: 'container.cpu.usage', comparison: 'above', threshold: 0.05, for_seconds: 2, targets: ['ops-hook'] },
      ],
    });
    expect(put.status, put.text).toBe(200);
    const rule = put.body.data[0];
    expect(rule).toMatchObject({ id: expect.any(String), enabled: true, action: '', targets: ['ops-hook'] });

    const firing = await poll(
      async () => {
        const res = await obs('GET', '/alerts/firing');
        return res.body.data.find((a: any) => a.rule_id === rule.id && a.state === 'firing');
      },
      'the alert to fire',
      40_000,
    );
    expect(firing).toMatchObject({ container: BURNER, deployment: DEP_B, metric: 'container.cpu.usage' });
    expect(firing.value).toBeGreaterThan(0.05);
    const fired = await sink.waitFor((r) => r.path === '/alerts' && r.body.event === 'alert.fired', 'the firing notification', 20_000);
    expect(fired.body).toMatchObject({ severity: 'warning', title: 'Alert firing: cpu-burn', deployment: DEP_B, message: expect.stringContaining(BURNER) });

    await docker('exec', BURNER, 'touch', '/tmp/stop');
    await poll(
      async () => {
        const res = await obs('GET', '/alerts/events', { query: { rule: rule.id } });
        return res.body.data.find((e: any) => e.state === 'resolved');
      },
      'the alert to resolve',
      40_000,
    );
    const resolved = await sink.waitFor((r) => r.path === '/alerts' && r.body.event === 'alert.resolved', 'the resolved notification');
    expect(resolved.body.title).toBe('Alert resolved: cpu-burn');
    const events = (await obs('GET', '/alerts/events', { query: { rule: rule.id } })).body.data.map((e: any) => e.state);
    expect(events).toEqual(['resolved', 'firing', 'pending']);
    expect((await obs('GET', '/alerts/firing')).body.data.filter((a: any) => a.rule_id === rule.id)).toEqual([]);
  });

  it('restarts an unhealthy container and lists the recovery', async () => {
    const recovered = await poll(
      async () => {
        const res = await obs('GET', '/health/events', { query: { deployment: DEP_C } });
        return res.body.data.find((e: any) => e.action === 'recovered' && e.container === SICK);
      },
      'the recovery of the unhealthy container',
      60_000,
      500,
    );
    // One restart is enough; a loaded machine may time out a healthcheck and cost another.
    expect(recovered.attempt).toBeGreaterThanOrEqual(1);
    const all = (await obs('GET', '/health/events', { query: { deployment: DEP_C } })).body.data.map((e: any) => e.action);
    expect(all[all.indexOf('recovered') + 1]).toBe('restarted');
    const health = (await obs('GET', '/health')).body.data;
    expect(health.find((h: any) => h.container === SICK)).toMatchObject({ status: 'healthy', deployment: DEP_C });
    expect(health.find((h: any) => h.container === WEB)).toMatchObject({ status: 'none' });
    const note = await sink.waitFor((r) => r.body?.event === 'health.recovered', 'the recovery notification');
    expect(note.body).toMatchObject({ title: `Container recovered: ${SICK}`, deployment: DEP_C });
    // The restart went through the agent's API (the docker plugin's route), as the app's system principal.
    const audit = (await agent.api('GET', '/test-fixture/audit', { query: { action: 'containers.restart' } })).body.data;
    expect(audit).toContainEqual(expect.objectContaining({ actor_id: 'system:observability', success: 1 }));
  });

  it('gives up on a container that stays unhealthy, with an event and a notification', async () => {
    const gaveUp = await poll(
      async () => {
        const res = await obs('GET', '/health/events', { query: { deployment: DEP_D } });
        return res.body.data.find((e: any) => e.action === 'gave_up' && e.container === DOOMED);
      },
      'the watcher to give up',
      90_000,
      500,
    );
    expect(gaveUp.attempt).toBe(2);
    const actions = (await obs('GET', '/health/events', { query: { deployment: DEP_D } })).body.data
      .filter((e: any) => e.container === DOOMED)
      .map((e: any) => `${e.action}:${e.attempt}`);
    expect(actions).toEqual(['gave_up:2', 'restarted:2', 'restarted:1']);
    const note = await sink.waitFor((r) => r.body?.event === 'health.gave_up', 'the give-up notification');
    expect(note.body).toMatchObject({ severity: 'critical', deployment: DEP_D, message: expect.stringContaining(DOOMED) });
    const health = (await obs('GET', '/health', { query: { deployment: DEP_D } })).body.data.find((h: any) => h.container === DOOMED);
    expect(health).toMatchObject({ status: 'unhealthy', restarts_by_watcher: 2, gave_up: true });
  });

  it('restarts the container once when a rule with action restart fires', async () => {
    const started = await docker('inspect', '-f', '{{.State.StartedAt}}', VICTIM);
    const put = await obs('PUT', '/alerts/rules', {
      body: [
        {
          id: 'victim-mem',
          name: 'victim-mem',
          deployment: DEP_D,
          metric: 'container.memory.usage',
          comparison: 'above',
          threshold: 0,
          for_seconds: 0,
          action: 'restart',
        },
      ],
    });
    expect(put.status, put.text).toBe(200);
    await poll(async () => (await docker('inspect', '-f', '{{.State.StartedAt}}', VICTIM)) !== started, 'the victim to be restarted', 30_000);
    const restarts = await poll(async () => {
      const res = await obs('GET', '/health/events', { query: { deployment: DEP_D } });
      const found = res.body.data.filter((e: any) => e.container === VICTIM && e.action === 'restarted');
      return found.length ? found : undefined;
    }, 'the restart to be recorded');
    expect(restarts[0].message).toContain("alert rule 'victim-mem' fired");
    // Still breached after the restart: the alert stays firing and the container is not restarted again.
    await new Promise((r) => setTimeout(r, 3000));
    const firing = (await obs('GET', '/alerts/firing')).body.data.filter((a: any) => a.rule_id === 'victim-mem');
    expect(firing.map((a: any) => `${a.container}:${a.state}`)).toContain(`${VICTIM}:firing`);
    expect(
      (await obs('GET', '/health/events', { query: { deployment: DEP_D } })).body.data.filter((e: any) => e.container === VICTIM && e.action === 'restarted'),
    ).toHaveLength(1);
    expect((await obs('PUT', '/alerts/rules', { body: [] })).status).toBe(200);
  });

  it('validates alert rules', async () => {
    const bad = async (rule: Record<string, unknown>) =>
      obs('PUT', '/alerts/rules', { body: [{ name: 'r', metric: 'container.cpu.usage', comparison: 'above', threshold: 1, for_seconds: 0, ...rule }] });
    expect((await bad({ metric: 'container.cpu.bogus' })).status).toBe(400);
    expect((await bad({ comparison: 'equal' })).status).toBe(400);
    expect((await bad({ for_seconds: -1 })).status).toBe(400);
    expect((await bad({ action: 'reboot' })).status).toBe(400);
    expect((await bad({ extra: true })).status).toBe(400);
    const host = await bad({ metric: 'system.cpu.utilization', deployment: DEP_A });
    expect(host.status).toBe(400);
    expect(host.body.error).toContain('body[0].deployment');
  });

  it('shows a principal only the metrics, health and rules of its deployments', async () => {
    const admin = agent.token;
    // Rules for A and B (admin), then a viewer of A and an operator of A.
    const rules = await obs('PUT', '/alerts/rules', {
      body: [
        { id: 'mem-a', name: 'mem-a', deployment: DEP_A, metric: 'container.memory.usage', comparison: 'above', threshold: 1e12, for_seconds: 60 },
        { id: 'mem-b', name: 'mem-b', deployment: DEP_B, metric: 'container.memory.usage', comparison: 'above', threshold: 1e12, for_seconds: 60 },
        { id: 'host-cpu', name: 'host-cpu', metric: 'system.cpu.utilization', comparison: 'above', threshold: 0.99, for_seconds: 600 },
      ],
    });
    expect(rules.status).toBe(200);
    for (const [username, role, level] of [
      ['obsviewer', 'viewer', 'read'],
      ['obsoperator', 'operator', 'write'],
    ] as const) {
      const created = await agent.api('POST', '/test-fixture/users', {
        body: { username: `${username}${run}`, password: 'Viewer-Pass-123', role, deployments: { [DEP_A]: level } },
      });
      expect(created.status, created.text).toBe(201);
    }
    const viewer = await agent.login(`obsviewer${run}`, 'Viewer-Pass-123');
    const operator = await agent.login(`obsoperator${run}`, 'Viewer-Pass-123');

    // Scoped (the default for every role but admin): its deployment only; containers of no deployment are global.
    const groups = await latestOf(viewer);
    expect(groups.map((g) => g.deployment)).toEqual([DEP_A]);
    expect(groups.flatMap((g) => g.containers.map((c: any) => c.container))).not.toContain(BURNER);
    expect(groups.flatMap((g) => g.containers.map((c: any) => c.container))).not.toContain(OUTSIDER);
    expect((await obs('GET', '/metrics/timeseries', { token: viewer, query: { deployment: DEP_B } })).status).toBe(404);
    expect((await obs('GET', '/metrics/timeseries', { token: viewer, query: { deployment: DEP_A } })).status).toBe(200);
    expect((await obs('GET', '/metrics/series', { token: viewer, query: { container: BURNER, metric: 'container.cpu.usage' } })).status).toBe(404);
    // The exposition carries host metrics and every container: global.
    const prom = await obs('GET', '/metrics/prometheus', { token: viewer });
    expect([prom.status, prom.body.code]).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
    const health = (await obs('GET', '/health', { token: viewer })).body.data.map((h: any) => h.container);
    expect(health).toContain(WEB);
    expect(health).not.toContain(SICK);
    expect((await obs('GET', '/health/events', { token: viewer })).body.data).toEqual([]);
    expect((await obs('GET', '/alerts/rules', { token: viewer })).body.data.map((r: any) => r.id)).toEqual(['mem-a']);
    expect((await obs('GET', '/alerts/events', { token: viewer })).body.data.filter((e: any) => e.deployment === DEP_B)).toEqual([]);
    expect((await obs('PUT', '/alerts/rules', { token: viewer, body: [] })).status).toBe(403);
    expect((await obs('GET', '/config', { token: viewer })).status).toBe(403);

    // The operator replaces the rules it can change; B's and the host rule stay.
    const forB = await obs('PUT', '/alerts/rules', {
      token: operator,
      body: [{ name: 'x', deployment: DEP_B, metric: 'container.cpu.usage', comparison: 'above', threshold: 1, for_seconds: 0 }],
    });
    expect(forB.status).toBe(404);
    expect(forB.text).not.toContain('mem-b');
    const global = await obs('PUT', '/alerts/rules', {
      token: operator,
      body: [{ name: 'x', metric: 'container.cpu.usage', comparison: 'above', threshold: 1, for_seconds: 0 }],
    });
    expect([global.status, global.body.code]).toEqual([403, 'GLOBAL_SCOPE_REQUIRED']);
    const mine = await obs('PUT', '/alerts/rules', {
      token: operator,
      body: [
        { id: 'cpu-a', name: 'cpu-a', deployment: DEP_A, metric: 'container.cpu.usage', comparison: 'below', threshold: 5, for_seconds: 30, action: 'restart' },
      ],
    });
    expect(mine.status, mine.text).toBe(200);
    expect(mine.body.data.map((r: any) => r.id)).toEqual(['cpu-a']);
    const all = (await obs('GET', '/alerts/rules', { token: admin })).body.data.map((r: any) => r.id).sort();
    expect(all).toEqual(['cpu-a', 'host-cpu', 'mem-b']);
  });

  it('keeps its state when the app process dies and is restarted', async () => {
    const before = await agent.api('GET', '/plugins/observability');
    const pid = before.body.data.app.pid as number;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid, 'SIGKILL');
    await poll(
      async () => {
        const res = await agent.api('GET', '/plugins/observability');
        return res.body.data.app.status === 'running' && res.body.data.app.pid !== pid;
      },
      'the app to be restarted',
      30_000,
    );
    const rules = await poll(async () => {
      const res = await obs('GET', '/alerts/rules');
      return res.status === 200 ? res.body.data : undefined;
    }, 'the restarted app to answer');
    expect(rules.map((r: any) => r.id).sort()).toEqual(['cpu-a', 'host-cpu', 'mem-b']);
    const events = await obs('GET', '/health/events', { query: { deployment: DEP_C } });
    expect(events.body.data.some((e: any) => e.action === 'recovered')).toBe(true);
    const history = await obs('GET', '/metrics/timeseries', { query: { deployment: DEP_A, since: '1h' } });
    expect(history.body.data.series.length).toBeGreaterThan(0);
  });

  it('reads and changes its settings, and refuses unauthenticated callers', async () => {
    const cfg = await obs('GET', '/config');
    expect(cfg.status).toBe(200);
    expect(cfg.body.data).toMatchObject({
      sample_interval: 1,
      raw_retention: 21600,
      rollup_retention: 604800,
      health: { cooldown: 2, max_retries: 2, enabled: true, scope: 'deployments' },
    });
    const put = await obs('PUT', '/config', { body: { health: { max_retries: 5 }, alerts: { events_max: 500 } } });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data.health).toMatchObject({ max_retries: 5, cooldown: 2 });
    expect((await obs('PUT', '/config', { body: { sample_interval: 0 } })).status).toBe(400);
    expect((await obs('PUT', '/config', { body: { raw_retention: 90 * 86400 } })).status).toBe(400);
    expect((await obs('PUT', '/config', { body: { bogus: 1 } })).status).toBe(400);
    expect((await request(agent.url, 'GET', '/plugin/observability/metrics/latest')).status).toBe(401);
  });
});
