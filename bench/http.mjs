// HTTP benchmark: requests/s of an authenticated light GET on the agent (all built-in plugins enabled) against a
// bare app of the same stack (koa, @koa/router, koa-body) answering the same JSON on the same machine, in one run
// (and, for scale, a koa app doing the least this answer takes: bench/koa-baseline.mjs); cold start to ready; idle
// RSS; and the total memory of the agent with every child process (the observability app) idle, BENCH_IDLE_SECONDS
// (300) after start with 5 running deployments.
//
// On a 2-core machine the load generator competes with the server for CPU, so the server under test is pinned to
// core 0 and autocannon to core 1 (taskset), and the agent's own CPU time per request is reported next to the
// requests/s: it is the figure least disturbed by whatever else runs on the machine.
import { execFileSync, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { NODE_FLAGS, ROOT, agentApi, fmt, median, removeProjectContainers, scratchEdge, sleep, startAgent } from './_lib.mjs';

const DURATION = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = 32;
const PIN =
  cpus().length >= 2 &&
  (() => {
    try {
      execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
const pin = (pid, core) => PIN && execFileSync('taskset', ['-a', '-p', '-c', String(core), String(pid)], { stdio: 'ignore' });
const cpuMs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
};

async function load(pid, url, headers) {
  await autocannon({ url, headers, connections: CONNECTIONS, duration: 2 });
  const before = cpuMs(pid);
  const r = await autocannon({ url, headers, connections: CONNECTIONS, duration: DURATION });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p99: r.latency.p99, usPerRequest: ((cpuMs(pid) - before) * 1000) / r.requests.total };
}

async function bareKoa(body, mode = 'text', env = {}) {
  const child = spawn(process.execPath, [...NODE_FLAGS, join(ROOT, 'bench/koa-baseline.mjs'), body, mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  const url = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(String(d).trim())));
  return {
    url,
    pid: child.pid,
    stop: () =>
      new Promise((r) => {
        child.once('exit', r);
        child.kill();
      }),
  };
}

console.log(
  `# http benchmark (${DURATION} s per run, ${CONNECTIONS} connections, node ${process.version}${PIN ? ', server on core 0, load generator on core 1' : ''})`,
);
const scratch = (await import('node:fs')).mkdtempSync(join((await import('node:os')).tmpdir(), 'bench-edge-'));

// Cold start: the first start (creates secrets and the admin) and restarts on existing data, all plugins.
const first = await startAgent({ config: scratchEdge(scratch) });
const firstMs = first.readyMs;
await first.stop({ keepData: true });
const restarts = [];
for (let i = 0; i < 5; i++) {
  const a = await startAgent({ dataDir: first.dataDir, config: scratchEdge(scratch) });
  restarts.push(a.readyMs);
  await a.stop({ keepData: true });
}
restarts.sort((a, b) => a - b);
// From here on the load generator (this process) stays on core 1; agents started below inherit it until pinned.
pin(process.pid, 1);
const core = await startAgent({ plugins: [] });
await sleep(5000);
const coreRss = core.rssMb();
await core.stop();

const agent = await startAgent({ config: scratchEdge(scratch) });
pin(agent.pid, 0);
await sleep(5000);
const idleRss = agent.rssMb();
const idleTree = agent.treeRssMb();
const { request, token } = await agentApi(agent);
const answer = (await request('GET', '/auth/validate')).text;
const koa = await bareKoa(answer);
pin(koa.pid, 0);
// The same JSON from an object koa serializes on each request, as a koa app usually answers (the agent serializes
// its answer on each request too): shown next to the main baseline, which sends the answer's text as it is.
const koaObject = await bareKoa(answer, 'object');
pin(koaObject.pid, 0);
// The least a koa app must do to give this answer (token looked up, answer built and serialized per request): how
// much of the gap is the job itself rather than the agent's way of doing it.
const koaJob = await bareKoa(answer, 'job', { BENCH_TOKEN: token });
pin(koaJob.pid, 0);
// Rounds alternate agent and koa (both up, one loaded at a time), so a drift of the machine's speed during the
// run weighs on both sides; the ratio is the median of the rounds' ratios.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const rounds = [];
for (let i = 0; i < ROUNDS; i++) {
  const a = await load(agent.pid, `${agent.url}/api/auth/validate`, { authorization: `Bearer ${token}` });
  const k = await load(koa.pid, koa.url, {});
  const o = await load(koaObject.pid, koaObject.url, {});
  const j = await load(koaJob.pid, koaJob.url, { authorization: `Bearer ${token}` });
  rounds.push({
    a,
    k,
    o,
    j,
    ratio: a.rps / k.rps,
    cpuRatio: k.usPerRequest / a.usPerRequest,
    objectCpuRatio: o.usPerRequest / a.usPerRequest,
    jobCpuRatio: j.usPerRequest / a.usPerRequest,
    jobOfKoa: k.usPerRequest / j.usPerRequest,
  });
  console.log(
    `round ${i + 1}: agent ${fmt(a.rps, 0)} req/s ${fmt(a.usPerRequest)} µs, koa ${fmt(k.rps, 0)} req/s ${fmt(k.usPerRequest)} µs, koa from an object ${fmt(o.usPerRequest)} µs, koa doing the job ${fmt(j.usPerRequest)} µs`,
  );
}
const loadedRss = agent.rssMb();
await agent.stop();
await koa.stop();
await koaObject.stop();
await koaJob.stop();

// Memory as a host sees it: the agent and every process it started, idle, some minutes after a start with
// deployments running (their containers belong to the engine, not to the agent).
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 300);
const DEPLOYMENTS = 5;
const RUN = `bh${process.pid.toString(36)}`;
let steady = null;
{
  const seed = await startAgent({ config: scratchEdge(scratch) });
  const seedApi = await agentApi(seed);
  const names = Array.from({ length: DEPLOYMENTS }, (_, i) => `${RUN}-${i}`);
  const compose =
    'services:\n  web:\n    image: agent-test/busybox:latest\n    command: ["httpd", "-f", "-p", "8080", "-h", "/tmp"]\n    stop_signal: SIGKILL\n    labels:\n      agent.test: "1"\n';
  try {
    for (const name of names) await seedApi('POST', '/deployments', { name, compose_content: compose, auto_start: true }, 201);
    // Restart on the same data: the figure is "5 minutes after start", with the deployments already running.
    await seed.stop({ keepData: true });
    const idle = await startAgent({ dataDir: seed.dataDir, config: scratchEdge(scratch) });
    pin(idle.pid, 0);
    console.log(`waiting ${IDLE_SECONDS} s with ${DEPLOYMENTS} running deployments before measuring memory…`);
    await sleep(IDLE_SECONDS * 1000);
    steady = idle.treeRssMb();
    const { request: idleRequest } = await agentApi(idle);
    for (const name of names) await idleRequest('DELETE', `/deployments/${name}?remove_files=true`);
    await idle.stop();
  } finally {
    // Leave no containers behind even when the run failed half-way.
    for (const name of names) removeProjectContainers(name);
  }
}

const mean = (xs) => xs.reduce((x, y) => x + y, 0) / xs.length;
const agentRun = { rps: mean(rounds.map((r) => r.a.rps)), p99: median(rounds.map((r) => r.a.p99)), usPerRequest: mean(rounds.map((r) => r.a.usPerRequest)) };
const koaRun = { rps: mean(rounds.map((r) => r.k.rps)), p99: median(rounds.map((r) => r.k.p99)), usPerRequest: mean(rounds.map((r) => r.k.usPerRequest)) };
const ratio = median(rounds.map((r) => r.ratio));
const cpuRatio = median(rounds.map((r) => r.cpuRatio));
const objectRun = { rps: mean(rounds.map((r) => r.o.rps)), usPerRequest: mean(rounds.map((r) => r.o.usPerRequest)) };
const objectCpuRatio = median(rounds.map((r) => r.objectCpuRatio));
const jobRun = { rps: mean(rounds.map((r) => r.j.rps)), usPerRequest: mean(rounds.map((r) => r.j.usPerRequest)) };
const jobCpuRatio = median(rounds.map((r) => r.jobCpuRatio));
const jobOfKoa = median(rounds.map((r) => r.jobOfKoa));
const ok = (good) => (good ? 'OK' : 'BELOW GOAL');
console.log(`agent GET /api/auth/validate (JWT): ${fmt(agentRun.rps, 0)} req/s, p99 ${agentRun.p99} ms, ${fmt(agentRun.usPerRequest)} µs CPU/request`);
console.log(`koa + @koa/router + koa-body, same JSON: ${fmt(koaRun.rps, 0)} req/s, p99 ${koaRun.p99} ms, ${fmt(koaRun.usPerRequest)} µs CPU/request`);
console.log(
  `ratio agent/koa (median of ${ROUNDS} alternating rounds): ${fmt(ratio, 2)} in requests/s, ${fmt(cpuRatio, 2)} in CPU per request (goal >= 0.70) ${ok(cpuRatio >= 0.7)}`,
);
console.log(
  `koa serializing the same JSON from an object: ${fmt(objectRun.rps, 0)} req/s, ${fmt(objectRun.usPerRequest)} µs CPU/request; ratio agent/it ${fmt(objectCpuRatio, 2)} in CPU per request`,
);
console.log(
  `koa doing the job (token looked up, answer built and serialized per request): ${fmt(jobRun.rps, 0)} req/s, ${fmt(jobRun.usPerRequest)} µs CPU/request; ratio of it to the baseline ${fmt(jobOfKoa, 2)}, ratio agent/it ${fmt(jobCpuRatio, 2)} in CPU per request`,
);
console.log(
  `cold start to ready (all plugins): first start ${fmt(firstMs, 0)} ms, restart median ${fmt(restarts[2], 0)} ms (goal < 1000 ms) ${ok(restarts[2] < 1000 && firstMs < 1000)}`,
);
console.log(`idle RSS: ${fmt(idleRss)} MB with all plugins, ${fmt(coreRss)} MB core only (goal < 90 MB) ${ok(idleRss < 90)}; after load ${fmt(loadedRss)} MB`);
console.log(
  `idle total 5 s after start, agent + ${idleTree.processes - 1} child process(es): ${fmt(idleTree.total)} MB (agent ${fmt(idleTree.main)} MB, children ${fmt(idleTree.children)} MB)`,
);
console.log(
  `idle total ${IDLE_SECONDS} s after start with ${DEPLOYMENTS} running deployments, agent + ${steady.processes - 1} child process(es): ${fmt(steady.total)} MB (agent ${fmt(steady.main)} MB, children ${fmt(steady.children)} MB) (goal < 150 MB) ${ok(steady.total < 150)}`,
);
