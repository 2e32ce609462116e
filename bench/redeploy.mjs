// Redeploy benchmark (issue 27): a web service behind a domain of the agent's own nginx, redeployed while a client
// sends requests through nginx at a steady rate (open loop: requests go out on schedule whatever the answers do),
// `recreate` against `start-first`. For each it prints, the median over the rounds:
//   - failed requests (an error or a status other than 200) and the downtime (ms from the first failed request sent
//     to the last one; 0 without failures);
//   - p99 latency before the redeploy and while it runs (request to job end), and what the switch added;
//   - the time from the redeploy request to the new version serving (the first answer of the new version after
//     which only it answers), and the job's duration.
//
// Run it on a quiet machine, as root, with the test environment up (dockerd, nginx, agent-test/busybox):
//   bash test/env/up.sh
//   npm run bench -- redeploy                        # builds, then 500 req/s, 3 rounds of each strategy
//   node bench/redeploy.mjs                          # the same without the build
//   BENCH_RATE=500 BENCH_ROUNDS=5 BENCH_ONLY=start-first node bench/redeploy.mjs
// Requests use a fresh connection each (`BENCH_KEEPALIVE=1`: a keep-alive pool instead, where a request racing an
// old nginx worker closing its idle connection at the reload may fail on the client side). The application is the
// node image of test/helpers/node-web.mjs (built locally, no registry), with a healthcheck every second (so "new
// version serving" includes up to 1 s of healthcheck interval); the drain timeout is 5 s.
import { Agent } from 'node:http';
import { loadavg } from 'node:os';
import { execFileSync } from 'node:child_process';
import { agentApi, fmt, freePort, median, nginxGet, pacedLoad, percentile, sleep, startAgent } from './_lib.mjs';
import { nodeWebCompose, nodeWebImage } from '../test/helpers/node-web.mjs';

const RATE = Number(process.env.BENCH_RATE ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ONLY = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : null;
const STRATEGIES = ['recreate', 'start-first'].filter((s) => !ONLY || ONLY.has(s));
const id = Math.random().toString(16).slice(2, 8);
const TAG = `agent-test/bench-redeploy-${id}:app`;
const NAME = `bench${id}-redeploy`;
const HOST = `${NAME}.bench.test`;
const keepAlive = process.env.BENCH_KEEPALIVE === '1' ? new Agent({ keepAlive: true, maxSockets: 256 }) : false;

async function waitJob(api, jobId) {
  for (;;) {
    const job = (await api('GET', `/jobs/${jobId}`)).data;
    if (!['pending', 'running'].includes(job.status)) return job;
    await sleep(50);
  }
}

async function round(api, port, strategy, n) {
  const version = `${strategy}-${n}-${id}`;
  await nodeWebImage(TAG, version);
  const stop = pacedLoad({ port, host: HOST, rate: RATE, keepAlive });
  await sleep(2000);
  const requested = performance.now();
  const started = (await api('POST', `/deployments/${NAME}/redeploy`, { strategy })).data;
  const job = await waitJob(api, started.job_id);
  const ended = performance.now();
  if (job.status !== 'succeeded') throw new Error(`${strategy} job ${job.status}: ${job.error}`);
  await sleep(2000);
  const answers = await stop();
  const failed = answers.filter((a) => !a.ok);
  const before = answers.filter((a) => a.sent < requested && a.ok).map((a) => a.ms);
  const during = answers.filter((a) => a.sent >= requested && a.sent <= ended && a.ok).map((a) => a.ms);
  const p99 = (xs) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      99,
    );
  // The first answer of the new version after which no other version answered.
  let firstNew = null;
  for (let i = answers.length - 1; i >= 0 && answers[i].body === version; i--) firstNew = answers[i];
  return {
    requests: answers.length,
    failed: failed.length,
    downtimeMs: failed.length ? failed[failed.length - 1].sent - failed[0].sent : 0,
    p99Before: p99(before),
    p99During: p99(during),
    toNewMs: firstNew ? firstNew.sent - requested : NaN,
    jobMs: ended - requested,
    fallbacks: started.fallbacks ?? [],
  };
}

const httpPort = await freePort();
const agent = await startAgent({
  plugins: ['docker', 'deployments', 'jobs', 'edge', 'system'],
  config: { proxy: { http_port: httpPort, https_port: await freePort(), listen_address: '127.0.0.1' } },
});
const api = await agentApi(agent);
try {
  await nodeWebImage(TAG, `first-${id}`);
  await api('PUT', '/settings', { deployments: { redeploy_drain_timeout: 5 } });
  await api('POST', '/deployments', { name: NAME, compose_content: nodeWebCompose(TAG), auto_start: true });
  await api('POST', `/deployments/${NAME}/domains`, { service: 'web', domain: HOST, container_port: 80 });
  for (let i = 0; i < 200 && !(await nginxGet(httpPort, HOST, keepAlive)).ok; i++) await sleep(100);

  console.log(
    `redeploy through the agent's nginx at ${RATE} req/s, ${ROUNDS} round(s) per strategy, load average ${loadavg()
      .map((l) => fmt(l, 2))
      .join(' ')}`,
  );
  const results = {};
  for (const strategy of STRATEGIES) {
    results[strategy] = [];
    for (let n = 0; n < ROUNDS; n++) {
      const r = await round(api, httpPort, strategy, n);
      results[strategy].push(r);
      console.log(
        `  ${strategy} #${n + 1}: ${r.requests} requests, ${r.failed} failed, downtime ${fmt(r.downtimeMs, 0)} ms, p99 ${fmt(r.p99Before)} → ${fmt(r.p99During)} ms, new version after ${fmt(r.toNewMs, 0)} ms (job ${fmt(r.jobMs, 0)} ms)${r.fallbacks.length ? `, fallbacks ${JSON.stringify(r.fallbacks)}` : ''}`,
      );
    }
  }
  console.log('\nmedian over the rounds');
  console.log('strategy     failed  downtime ms  p99 before ms  p99 during ms  p99 added ms  to new version ms  job ms');
  for (const [strategy, rs] of Object.entries(results)) {
    const m = (k) => median(rs.map((r) => r[k]));
    console.log(
      `${strategy.padEnd(12)} ${String(m('failed')).padStart(6)}  ${fmt(m('downtimeMs'), 0).padStart(11)}  ${fmt(m('p99Before')).padStart(13)}  ${fmt(m('p99During')).padStart(13)}  ${fmt(m('p99During') - m('p99Before')).padStart(12)}  ${fmt(m('toNewMs'), 0).padStart(17)}  ${fmt(m('jobMs'), 0).padStart(6)}`,
    );
  }
  console.log('goals (issue 27): start-first 0 failed, p99 added < 100 ms, new version after container start + health check + < 1 s');
} finally {
  await api('DELETE', `/deployments/${NAME}?remove_files=true`).catch(() => undefined);
  await agent.stop();
  execFileSync('docker', ['rmi', '-f', TAG], { stdio: 'ignore' });
}
