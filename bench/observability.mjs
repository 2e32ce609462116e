// `npm run bench -- observability`: the observability app's collector CPU use with 50 running containers at a
// 5 s sample interval (goal < 5% of one core), and the p99 latency of a 24 h timeseries query for 10 containers
// through the agent (goal < 50 ms).
import { execFile, execFileSync } from 'node:child_process';
import Database from 'better-sqlite3';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT, agentApi, fmt, percentile, sleep, startAgent } from './_lib.mjs';

const run = promisify(execFile);
const { SeriesStore } = await import(join(ROOT, 'plugins/observability/dist/app/series-store.js'));

const CONTAINERS = Number(process.env.BENCH_CONTAINERS ?? 50);
const MEASURE_S = Number(process.env.BENCH_SECONDS ?? 60);
const QUERIES = Number(process.env.BENCH_QUERIES ?? 300);
const tag = `bench${Date.now().toString(36)}`;
// Clock ticks per second of /proc/<pid>/stat times.
const TICK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** utime + stime of a process, in milliseconds. */
const cpuMs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / TICK;
};

async function appPid(api) {
  for (let i = 0; i < 100; i++) {
    const app = (await api.request('GET', '/plugins/observability')).body.data?.app;
    if (app?.status === 'running' && app.pid) return app.pid;
    await sleep(200);
  }
  throw new Error('the observability app did not start');
}

/** A GET of the observability app's own API, through the agent. */
const get = (api, path) => api('GET', `/plugin/observability${path}`, undefined, 200);

async function dockerdPid() {
  try {
    const { stdout } = await run('pidof', ['dockerd']);
    return Number(stdout.trim().split(/\s+/)[0]) || null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------- 1. collector CPU with 50 containers
async function collectorCpu() {
  const names = Array.from({ length: CONTAINERS }, (_, i) => `${tag}-c${i}`);
  console.log(`> starting ${CONTAINERS} containers (agent-test/busybox, idle)`);
  try {
    for (let i = 0; i < names.length; i += 10) {
      await Promise.all(
        names
          .slice(i, i + 10)
          .map((name, j) =>
            run('docker', [
              'run',
              '-d',
              '--name',
              name,
              '--label',
              'agent.test=1',
              '--label',
              `agent.bench=${tag}`,
              '--label',
              `com.docker.compose.project=${tag}d${(i + j) % 5}`,
              '--label',
              'com.docker.compose.service=app',
              'agent-test/busybox:latest',
              'sh',
              '-c',
              "trap 'exit 0' TERM; while :; do sleep 5; done",
            ]),
          ),
      );
    }
    const agent = await startAgent({
      plugins: ['observability'],
      config: { observability: { sample_interval: 5, container_labels: { 'agent.bench': tag }, health: { enabled: false } } },
    });
    try {
      const api = await agentApi(agent);
      const pid = await appPid(api);
      // Wait until every container has a full reading (two rounds), then measure whole rounds.
      for (let i = 0; i < 60; i++) {
        const latest = (await get(api, '/metrics/latest')).data.flatMap((g) => g.containers);
        if (latest.length === CONTAINERS && latest.every((c) => c.metrics['container.cpu.usage'] !== undefined)) break;
        await sleep(1000);
      }
      const dpid = await dockerdPid();
      const [app0, agent0, d0, t0] = [cpuMs(pid), cpuMs(agent.pid), dpid ? cpuMs(dpid) : 0, Date.now()];
      await sleep(MEASURE_S * 1000);
      const [app1, agent1, d1, t1] = [cpuMs(pid), cpuMs(agent.pid), dpid ? cpuMs(dpid) : 0, Date.now()];
      const wall = t1 - t0;
      const appPct = ((app1 - app0) / wall) * 100;
      console.log(`\ncollector (observability app process), ${CONTAINERS} containers, 5 s interval, ${fmt(wall / 1000, 0)} s measured:`);
      console.log(
        `  app CPU            ${fmt(appPct, 2)} % of one core   (goal < 5 %: ${appPct < 5 ? 'met' : 'NOT met'}, ratio ${fmt(appPct / 5, 2)} of the budget)`,
      );
      console.log(`  app RSS            ${fmt(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024)} MiB`);
      console.log(`  agent core CPU     ${fmt(((agent1 - agent0) / wall) * 100, 2)} % (idle proxy)`);
      if (dpid) console.log(`  dockerd CPU        ${fmt(((d1 - d0) / wall) * 100, 2)} % (whole engine, includes other load on this host)`);
      return appPct;
    } finally {
      await agent.stop();
    }
  } finally {
    for (let i = 0; i < names.length; i += 25) await run('docker', ['rm', '-f', ...names.slice(i, i + 25)]).catch(() => undefined);
  }
}

// ---------------------------------------------------------------- 2. 24 h timeseries query for 10 containers
function seed(appDir) {
  mkdirSync(appDir, { recursive: true });
  const store = new SeriesStore(join(appDir, 'series.sqlite'));
  store.close();
  // Fill it directly as a week of collection leaves it: 7 days of 1- and 5-minute rollups and 6 h of 5 s raw
  // samples, for 10 containers x 5 metrics.
  const db = new Database(join(appDir, 'series.sqlite'));
  const now = Math.floor(Date.now() / 1000);
  const minute = Math.floor(now / 60) * 60;
  const metrics = ['container.cpu.usage', 'container.memory.usage', 'container.memory.limit', 'container.network.io.rx', 'container.network.io.tx'];
  const insSeries = db.prepare('INSERT INTO series (container, deployment, metric) VALUES (?, ?, ?)');
  const insRaw = db.prepare('INSERT INTO samples (series, ts, value) VALUES (?, ?, ?)');
  const insRoll = db.prepare('INSERT INTO rollups (series, ts, avg, min, max, n) VALUES (?, ?, ?, ?, ?, 12)');
  const insRoll5 = db.prepare('INSERT INTO rollups5 (series, ts, avg, min, max, n) VALUES (?, ?, ?, ?, ?, 60)');
  const five = Math.floor(minute / 300) * 300;
  let rows = 0;
  db.transaction(() => {
    for (let c = 0; c < 10; c++) {
      for (const m of metrics) {
        const id = Number(insSeries.run(`shop-web-${c}`, 'shop', m).lastInsertRowid);
        for (let t = minute - 7 * 86400; t < minute; t += 60) {
          const v = Math.random();
          insRoll.run(id, t, v, v * 0.9, v * 1.1);
          rows++;
        }
        for (let t = five - 7 * 86400; t < five; t += 300) {
          const v = Math.random();
          insRoll5.run(id, t, v, v * 0.9, v * 1.1);
          rows++;
        }
        for (let t = now - 6 * 3600; t <= now; t += 5) {
          insRaw.run(id, t, Math.random());
          rows++;
        }
      }
    }
    db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('rolled_until', ?)").run(String(minute));
    db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('rolled5_until', ?)").run(String(five));
  })();
  db.close();
  return rows;
}

async function timeseriesLatency() {
  const work = mkdtempSync(join(tmpdir(), 'obs-bench-'));
  const dataDir = join(work, 'data');
  const rows = seed(join(dataDir, 'plugins/observability/app'));
  console.log(`\n> seeded ${rows.toLocaleString('en')} rows (10 containers x 5 metrics: 7 days of 1- and 5-minute rollups, 6 h of raw samples)`);
  // An empty label filter the engine never matches: only the seeded history is queried.
  const agent = await startAgent({
    plugins: ['observability'],
    dataDir,
    config: { observability: { container_labels: { 'agent.bench.none': tag }, health: { enabled: false } } },
  });
  try {
    const api = await agentApi(agent);
    const pid = await appPid(api);
    const path = '/metrics/timeseries?deployment=shop&since=24h';
    const first = await get(api, path);
    const points = first.data.series.reduce((n, s) => n + s.values.filter((v) => v !== null).length, 0);
    for (let i = 0; i < 20; i++) await get(api, path);
    const times = [];
    const [app0, core0, self0] = [cpuMs(pid), cpuMs(agent.pid), process.cpuUsage()];
    for (let i = 0; i < QUERIES; i++) {
      const t = process.hrtime.bigint();
      await get(api, path);
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    const self = process.cpuUsage(self0);
    const cpuPer = {
      app: (cpuMs(pid) - app0) / QUERIES,
      core: (cpuMs(agent.pid) - core0) / QUERIES,
      client: (self.user + self.system) / 1000 / QUERIES,
    };
    times.sort((a, b) => a - b);
    const p99 = percentile(times, 99);
    // The same path with a tiny answer: what the proxy hop (authentication, signed principal, forwarding) costs.
    const small = [];
    for (let i = 0; i < QUERIES; i++) {
      const t = process.hrtime.bigint();
      await get(api, '/alerts/rules');
      small.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    small.sort((a, b) => a - b);
    const bytes = JSON.stringify(first).length;
    console.log(
      `\n24 h timeseries of one deployment (10 containers, ${first.data.series.length} series, ${points} points, step ${first.data.step} s), ${QUERIES} sequential requests through the agent:`,
    );
    console.log(`  p50 ${fmt(percentile(times, 50), 2)} ms   p90 ${fmt(percentile(times, 90), 2)} ms   p99 ${fmt(p99, 2)} ms   max ${fmt(times.at(-1), 2)} ms`);
    console.log(`  goal p99 < 50 ms: ${p99 < 50 ? 'met' : 'NOT met'} (ratio ${fmt(p99 / 50, 2)} of the budget); answer ${fmt(bytes / 1024, 0)} KiB`);
    console.log(`  baseline, a tiny answer on the same path (alerts/rules): p50 ${fmt(percentile(small, 50), 2)} ms   p99 ${fmt(percentile(small, 99), 2)} ms`);
    console.log(
      `  CPU time per request (independent of the load): app ${fmt(cpuPer.app, 2)} ms, agent core (proxy) ${fmt(cpuPer.core, 2)} ms, client parse ${fmt(cpuPer.client, 2)} ms`,
    );
    const loadavg = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    console.log(`  host load average during the run: ${loadavg} (2 cores)`);
    return p99;
  } finally {
    await agent.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

const cpu = await collectorCpu();
const p99 = await timeseriesLatency();
console.log(`\nsummary: collector ${fmt(cpu, 2)} % of one core (goal < 5), timeseries p99 ${fmt(p99, 2)} ms (goal < 50)`);
