// Log followers benchmark, against the real engine:
// (a) 200 websocket followers of one deployment whose container logs ~100 lines/s: CPU of the agent (and of dockerd)
//     over the window, line latency (engine timestamp → arrival on the socket) p50/p99/max, RSS, time until all ready;
// (b) a deployment with a big json-file log (BENCH_LOG_BYTES, default 1 GiB) that then logs ~100 lines/s: 50 followers
//     with tail=1 ("the others") are measured while 200 more join at once with tail=0 (the whole history).
// BENCH_BASE=<folder of another built worktree> runs the same parts against that build too (side by side, same
// deployments: the agents share a deployments folder, one after the other).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { AGENT_ENTRY } from '../scripts/lib.mjs';
import { agentApi, fmt, percentile, sleep, startAgent } from './_lib.mjs';

const FOLLOWERS = Number(process.env.BENCH_FOLLOWERS ?? 200);
const OTHERS = Number(process.env.BENCH_OTHERS ?? 50);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? 20_000);
const LOG_BYTES = Number(process.env.BENCH_LOG_BYTES ?? 1024 ** 3);
const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : null;
const want = (part) => !only || only.has(part);
const builds = [
  ...(process.env.BENCH_BASE ? [{ label: 'base', entry: join(process.env.BENCH_BASE, 'core', 'dist', 'agent.mjs') }] : []),
  { label: 'this', entry: AGENT_ENTRY },
];
const prefix = `bench${Math.random().toString(16).slice(2, 8)}`;
const TICKS = 'while true; do for i in 0 1 2 3 4 5 6 7 8 9; do echo tick; done; sleep 0.1; done';
const service = (command) =>
  [
    'services:',
    '  log:',
    '    image: agent-test/busybox:latest',
    `    command: ["sh", "-c", "${command}"]`,
    '    stop_signal: SIGKILL',
    '    labels:',
    '      agent.test: "1"',
    '',
  ].join('\n');

const CLK_TCK = 100;
function cpuTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return NaN;
  }
}
const dockerdPid = (() => {
  const r = spawnSync('pidof', ['dockerd'], { encoding: 'utf8' });
  return r.status === 0 ? Number(r.stdout.trim().split(' ')[0]) : null;
})();

function cleanupDocker() {
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project`, '--filter', `name=${prefix}`], { encoding: 'utf8' }).trim();
  if (ids) spawnSync('docker', ['rm', '-f', ...ids.split('\n')], { stdio: 'ignore' });
  const nets = execFileSync('docker', ['network', 'ls', '-q', '--filter', `name=${prefix}`], { encoding: 'utf8' }).trim();
  if (nets) spawnSync('docker', ['network', 'rm', ...nets.split('\n')], { stdio: 'ignore' });
}

/** Opens one follower; `ready` resolves at `{"type":"ready"}` (or null after 15 s). */
function follower(agent, token, deployment, query, onLine) {
  const ws = new WebSocket(`${agent.url.replace('http', 'ws')}/api/deployments/${deployment}/logs/stream?${query}`);
  const f = { ws, readyAt: null, closeCode: null, lines: 0 };
  const opened = Date.now();
  f.ready = new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), 15_000);
    ws.on('open', () => ws.send(token));
    ws.on('error', () => undefined);
    ws.on('close', (code) => {
      f.closeCode = code;
      clearTimeout(timer);
      resolve(null);
    });
    ws.on('message', (data) => {
      const m = JSON.parse(String(data));
      if (m.type === 'ready') {
        f.readyAt = Date.now() - opened;
        clearTimeout(timer);
        resolve(f.readyAt);
      } else if (m.type === 'line') {
        f.lines++;
        onLine(m, Date.now());
      }
    });
  });
  return f;
}

const closeAll = async (list) => {
  for (const f of list) f.ws.terminate();
  await sleep(500);
};

/** CPU % of one core of `pid` between two samples. */
const cpuMeter = (pid) => {
  const t0 = cpuTicks(pid);
  const w0 = Date.now();
  return () => (100 * (cpuTicks(pid) - t0)) / CLK_TCK / ((Date.now() - w0) / 1000);
};

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p99: percentile(s, 99), max: s.at(-1) ?? NaN, n: s.length };
};

/**
 * The tail=0 followers run in a child process (`follow.mjs flood <url> <token> <deployment>`): parsing their
 * histories must not delay, in this process, the arrival of the lines measured for the others.
 */
async function flood(url, token, deployment) {
  const t0 = Date.now();
  const caughtUp = new Map();
  const heavy = Array.from({ length: FOLLOWERS }, (_, i) =>
    follower({ url }, token, deployment, 'tail=0', (m) => {
      if (m.text === 'tick' && !caughtUp.has(i)) caughtUp.set(i, Date.now() - t0);
    }),
  );
  const ready = await Promise.all(heavy.map((f) => f.ready));
  await sleep(Math.max(0, WINDOW_MS - (Date.now() - t0)));
  const out = {
    ready: ready.filter((r) => r !== null).length,
    caughtUp: caughtUp.size,
    caughtUpP99: stats([...caughtUp.values()]).p99,
    lines: heavy.reduce((n, f) => n + f.lines, 0) / FOLLOWERS,
  };
  for (const f of heavy) f.ws.terminate();
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
}
if (process.argv[2] === 'flood') await flood(process.argv[3], process.argv[4], process.argv[5]);

console.log(`# log followers benchmark (node ${process.version}; ${FOLLOWERS} followers, ${WINDOW_MS / 1000} s windows)`);
const deploymentsDir = mkdtempSync(join(tmpdir(), 'bench-follow-'));
const config = { deployments: { path: deploymentsDir } };
const tick = `${prefix}-tick`;
const big = `${prefix}-big`;
const results = [];

try {
  // The deployments are created once, through the first agent; the others discover them in the shared folder.
  {
    const agent = await startAgent({ plugins: ['docker', 'deployments'], config, entry: builds[0].entry });
    const api = await agentApi(agent);
    if (want('a')) await api('POST', '/deployments', { name: tick, auto_start: true, compose_content: service(TICKS) });
    if (want('b')) {
      const line = 'x'.repeat(100);
      const fill = `yes '${line}' | head -c ${Math.floor(LOG_BYTES * 0.62)}; echo last-line; ${TICKS}`;
      await api('POST', '/deployments', { name: big, auto_start: true, compose_content: service(fill) });
      const cid = (await api('GET', `/deployments/${big}`)).data.containers[0].id;
      const logPath = execFileSync('docker', ['inspect', '--format', '{{.LogPath}}', cid], { encoding: 'utf8' }).trim();
      const t = Date.now();
      for (;;) {
        const logs = await api('GET', `/deployments/${big}/logs?tail=20`);
        if (logs.data.some((l) => l.text === 'tick')) break;
        if (Date.now() - t > 900_000) throw new Error('the big log was not written in 15 minutes');
        await sleep(2000);
      }
      console.log(`big log: ${fmt(statSync(logPath).size / 1024 ** 3, 2)} GiB of json-file log written in ${fmt((Date.now() - t) / 1000, 0)} s`);
    }
    await agent.stop();
  }

  for (const build of builds) {
    const agent = await startAgent({ plugins: ['docker', 'deployments'], config, entry: build.entry });
    const token = await agent.token();
    const row = { label: build.label };
    results.push(row);
    try {
      if (want('a')) {
        const latencies = [];
        let measuring = false;
        const t0 = Date.now();
        const list = Array.from({ length: FOLLOWERS }, () =>
          follower(agent, token, tick, 'tail=10', (m, now) => {
            if (measuring && m.time) latencies.push(now - Date.parse(m.time));
          }),
        );
        const ready = await Promise.all(list.map((f) => f.ready));
        row.aReady = ready.filter((r) => r !== null).length;
        row.aAllReadyMs = Date.now() - t0;
        await sleep(2000);
        measuring = true;
        const lines0 = list.reduce((n, f) => n + f.lines, 0);
        const cpu = cpuMeter(agent.pid);
        const dcpu = dockerdPid ? cpuMeter(dockerdPid) : () => NaN;
        const ccpu = cpuMeter(process.pid);
        await sleep(WINDOW_MS);
        row.aClientCpu = ccpu();
        row.aCpu = cpu();
        row.aDockerdCpu = dcpu();
        measuring = false;
        row.aRate = (list.reduce((n, f) => n + f.lines, 0) - lines0) / FOLLOWERS / (WINDOW_MS / 1000);
        row.aLat = stats(latencies);
        row.aRss = agent.rssMb();
        await closeAll(list);
        await sleep(1000);
      }
      if (want('b')) {
        let others = [];
        let measuring = false;
        const otherList = Array.from({ length: OTHERS }, () =>
          follower(agent, token, big, 'tail=1', (m, now) => {
            if (measuring && m.time && m.text === 'tick') others.push(now - Date.parse(m.time));
          }),
        );
        await Promise.all(otherList.map((f) => f.ready));
        await sleep(2000);
        // The same followers without the flood first: what the engine and the machine add on their own.
        measuring = true;
        await sleep(WINDOW_MS / 2);
        row.bQuietLat = stats(others);
        others = [];
        const cpu = cpuMeter(agent.pid);
        const dcpu = dockerdPid ? cpuMeter(dockerdPid) : () => NaN;
        measuring = true;
        const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'flood', agent.url, token, big], { stdio: ['ignore', 'pipe', 'inherit'] });
        let output = '';
        child.stdout.on('data', (c) => (output += c));
        const rssPeak = { mb: 0 };
        const sampler = setInterval(() => (rssPeak.mb = Math.max(rssPeak.mb, agent.rssMb())), 250);
        await new Promise((resolve) => child.once('exit', resolve));
        clearInterval(sampler);
        row.bCpu = cpu();
        row.bDockerdCpu = dcpu();
        measuring = false;
        const flooded = JSON.parse(output);
        row.bReady = flooded.ready;
        row.bCaughtUp = flooded.caughtUp;
        row.bCaughtUpP99 = flooded.caughtUpP99;
        row.bHistoryLines = flooded.lines;
        row.bLat = stats(others);
        row.bOthersClosed = otherList.filter((f) => f.closeCode !== null).length;
        row.bRss = rssPeak.mb;
        await closeAll(otherList);
        await sleep(2000);
      }
    } finally {
      await agent.stop();
    }
  }

  const lat = (s) => `p50 ${fmt(s.p50, 0)} ms, p99 ${fmt(s.p99, 0)} ms, max ${fmt(s.max, 0)} ms (${s.n} lines)`;
  for (const r of results) {
    console.log(`\n## ${r.label}`);
    if (r.aLat) {
      console.log(
        `(a) ${FOLLOWERS} followers, ${fmt(r.aRate, 0)} lines/s each: ready ${r.aReady}/${FOLLOWERS} (all in ${r.aAllReadyMs} ms); ` +
          `agent CPU ${fmt(r.aCpu, 1)} % of a core (goal < 30), dockerd ${fmt(r.aDockerdCpu, 1)} %; ` +
          `latency ${lat(r.aLat)} (goal p99 < 100 ms); RSS ${fmt(r.aRss, 1)} MB; this benchmark's own CPU ${fmt(r.aClientCpu, 1)} %`,
      );
    }
    if (r.bLat) {
      console.log(
        `(b) ${OTHERS} followers (tail=1) while ${FOLLOWERS} join with tail=0 on the big log: others' latency ${lat(r.bLat)} (goal p99 < 100 ms; ` +
          `before the ${FOLLOWERS} joined: ${lat(r.bQuietLat)}), ` +
          `${r.bOthersClosed} of them closed; ` +
          `tail=0 followers ready in 15 s: ${r.bReady}/${FOLLOWERS}, ` +
          `got their history and a live line within ${WINDOW_MS / 1000} s: ${r.bCaughtUp}/${FOLLOWERS} ` +
          `(p99 ${r.bCaughtUp ? `${fmt(r.bCaughtUpP99, 0)} ms` : 'n/a'}), ` +
          `${fmt(r.bHistoryLines, 0)} lines each on average; agent CPU ${fmt(r.bCpu, 1)} %, dockerd ${fmt(r.bDockerdCpu, 1)} %; peak RSS ${fmt(r.bRss, 1)} MB`,
      );
    }
  }
} finally {
  cleanupDocker();
  rmSync(deploymentsDir, { recursive: true, force: true });
}
