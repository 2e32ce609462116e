/**
 * The collector against the real engine while containers come and go under it: short-lived containers (`--rm`,
 * living a fraction of a second to a second and a half) are listed by one round and have stopped, or are removed,
 * by the time their stats call is answered. A one-shot stats call waits for the engine's next sample (up to a
 * second), so a container that stops meanwhile gets an empty body, one that stopped just before gets zeroed stats,
 * one removed a 404. None of it may be an error of the app: no error line, no stack, no restart of the app, and the
 * metrics of the containers that keep running go on.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { docker, IMAGE, poll, removeContainers, runContainer } from './containers.js';

const run = randomBytes(4).toString('hex');
const STEADY = `obs-steady-${run}`;
const LABEL = 'agent.obs.churn';
const CHURN_SECONDS = 20;

describe('observability app: containers that stop between the list and their stats', () => {
  let agent: TestAgent;
  const obs = (path: string) => agent.api('GET', `/plugin/observability${path}`);
  const appPid = async () => (await agent.api('GET', '/plugins/observability')).body.data?.app?.pid as number | undefined;
  const latest = async () => ((await obs('/metrics/latest')).body.data as any[]).flatMap((g) => g.containers);

  beforeAll(async () => {
    await runContainer({ name: STEADY, labels: { [LABEL]: run }, script: 'while :; do sleep 1; done' });
    agent = await startAgent({
      plugins: ['observability'],
      config: { observability: { sample_interval: 1, container_labels: { [LABEL]: run }, health: { enabled: false } } },
    });
  });

  afterAll(async () => {
    await agent?.stop();
    const left = await docker('ps', '-aq', '--filter', `label=${LABEL}=${run}`).catch(() => '');
    await removeContainers([STEADY, ...left.split('\n').filter(Boolean)]);
  });

  it('goes on without an error line or a stack while containers exit and are removed under it', async () => {
    // The steady container has a full reading (CPU is a rate: two rounds) before the churn starts.
    await poll(
      async () => (await latest()).find((c) => c.container === STEADY && c.metrics['container.cpu.usage'] !== undefined),
      'a reading of the steady container',
    );
    const pid = await appPid();
    expect(pid).toBeGreaterThan(0);
    const logStart = agent.output().length;

    // Three lanes starting containers back to back for CHURN_SECONDS; each lives 0.2–1.6 s and is removed on exit.
    const started: string[] = [];
    const seen = new Set<string>();
    const until = Date.now() + CHURN_SECONDS * 1000;
    const lane = async (n: number) => {
      for (let i = 0; Date.now() < until; i++) {
        const name = `obs-churn-${run}-${n}-${i}`;
        const life = (0.2 + ((i * 7 + n * 3) % 15) / 10).toFixed(1);
        started.push(name);
        await docker('run', '-d', '--rm', '--name', name, '--label', `agent.test=1`, '--label', `${LABEL}=${run}`, IMAGE, 'sleep', life);
      }
    };
    // Meanwhile, what the collector lists: the churned containers must have been in its rounds for this to test anything.
    const watch = async () => {
      while (Date.now() < until) {
        const health = (await obs('/health')).body.data as { container: string }[];
        for (const c of health) if (c.container !== STEADY) seen.add(c.container);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const churnStart = Date.now();
    await Promise.all([lane(0), lane(1), lane(2), watch()]);
    expect(started.length).toBeGreaterThan(10);
    expect(seen.size).toBeGreaterThan(3);

    // Metrics go on: the steady container is read again after the churn, by the same app process.
    const churnEnd = Date.now();
    const steady = await poll(async () => {
      const r = (await latest()).find((c) => c.container === STEADY);
      return r && Date.parse(r.updated) > churnEnd && r.metrics['container.cpu.usage'] !== undefined ? r : undefined;
    }, 'a reading of the steady container after the churn');
    expect(steady.metrics).toMatchObject({ 'container.memory.usage': expect.any(Number), 'container.network.io.rx': expect.any(Number) });
    expect(await appPid()).toBe(pid);
    // No reading of a container that is gone stays behind once the last ones have exited.
    await poll(async () => {
      const names = (await latest()).map((c) => c.container);
      return names.length === 1 && names[0] === STEADY;
    }, 'the readings of the churned containers dropped');
    // And they went on during the churn: a round every second or so (a one-shot stats call waits up to a second
    // for the engine's next sample), each recording the steady container. The answer's columns are the seconds
    // that have a sample.
    const since = new Date(churnStart).toISOString();
    const series = (await obs(`/metrics/series?container=${STEADY}&metric=container.cpu.usage&since=${encodeURIComponent(since)}`)).body.data;
    expect(series.step).toBe(1);
    const during = series.timestamps.filter((t: number, i: number) => t >= churnStart && t < churnEnd && series.series[0].values[i] !== null);
    expect(during.length).toBeGreaterThanOrEqual(Math.floor((churnEnd - churnStart) / 3000));

    // The app's lines while it happened: none at error level, no stack, no crash output, no restart.
    const lines = agent
      .output()
      .slice(logStart)
      .split('\n')
      .filter((l) => l.includes('"app":"observability"') || /app exited/.test(l));
    expect(lines.filter((l) => /"level":50|"level":"error"/.test(l))).toEqual([]);
    expect(lines.filter((l) => /\\n\s+at |collection round failed|app output|app exited|TypeError/.test(l))).toEqual([]);
  }, 120_000);
});
