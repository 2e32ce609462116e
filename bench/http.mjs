// HTTP benchmark: requests/s of an authenticated light GET on the agent (all built-in plugins enabled) against a
// bare koa hello-world on the same machine, in one run; cold start to ready; idle RSS.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { ROOT, fmt, sleep, startAgent } from './_lib.mjs';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = 32;

async function load(url, headers) {
  // warm-up, then the measured run
  await autocannon({ url, headers, connections: CONNECTIONS, duration: 2 });
  const r = await autocannon({ url, headers, connections: CONNECTIONS, duration: DURATION });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p99: r.latency.p99 };
}

async function bareKoa() {
  const child = spawn(process.execPath, [join(ROOT, 'bench/koa-hello.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(String(d).trim())));
  return { url, stop: () => new Promise((r) => { child.once('exit', r); child.kill(); }) };
}

console.log(`# http benchmark (${DURATION} s per run, ${CONNECTIONS} connections, node ${process.version})`);

// Cold start: first start (creates secrets and the admin) and restarts on existing data.
const first = await startAgent();
const firstMs = first.readyMs;
await first.stop({ keepData: true });
const restarts = [];
for (let i = 0; i < 3; i++) {
  const a = await startAgent({ dataDir: first.dataDir });
  restarts.push(a.readyMs);
  await a.stop({ keepData: true });
}
restarts.sort((a, b) => a - b);

const agent = await startAgent();
await sleep(5000);
const idleRss = agent.rssMb();
const token = await agent.token();
const agentRun = await load(`${agent.url}/api/auth/validate`, { authorization: `Bearer ${token}` });
const loadedRss = agent.rssMb();
await agent.stop();

const koa = await bareKoa();
const koaRun = await load(koa.url, {});
await koa.stop();

const ratio = agentRun.rps / koaRun.rps;
console.log(`agent   GET /api/auth/validate (JWT): ${fmt(agentRun.rps, 0)} req/s, p99 ${agentRun.p99} ms`);
console.log(`bare koa hello-world:               ${fmt(koaRun.rps, 0)} req/s, p99 ${koaRun.p99} ms`);
console.log(`ratio agent/koa: ${fmt(ratio, 2)} (goal >= 0.70) ${ratio >= 0.7 ? 'OK' : 'BELOW GOAL'}`);
console.log(`cold start to ready: first start ${fmt(firstMs, 0)} ms, restart median ${fmt(restarts[1], 0)} ms (goal < 1500 ms) ${restarts[1] < 1500 ? 'OK' : 'BELOW GOAL'}`);
console.log(`idle RSS: ${fmt(idleRss)} MB (goal < 90 MB) ${idleRss < 90 ? 'OK' : 'BELOW GOAL'}; after load ${fmt(loadedRss)} MB`);
