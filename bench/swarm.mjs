// Swarm deployments benchmark (issue 29), against the engine's swarm (test/env initialises a single-node one):
// (a) create of a 3-service stack through the agent (POST /api/deployments, runtime swarm: it answers once every
//     replica runs) vs raw `docker stack deploy` of the same file, polled every 100 ms until every replica runs; the
//     ratio (goal <= 1.10);
// (b) an update that changes the routed service (a rolling update, start-first), through the agent (PUT: it answers
//     once the stack converged, the engine's update completed) vs raw `docker stack deploy` polled until every update
//     completed and every replica runs: the time to converge;
// (c) failed requests (an error or a status other than 200) through the agent's nginx while (b) runs through the
//     agent, at BENCH_RATE req/s (open loop, a fresh connection per request; goal 0).
// Rounds alternate agent and raw to share the machine's noise; medians are printed.
//
// Run it on a quiet machine, as root, with the test environment up (dockerd in a swarm, nginx, agent-test/busybox):
//   bash test/env/up.sh
//   npm run bench -- swarm                 # builds, then 3 rounds at 500 req/s
//   BENCH_ROUNDS=5 BENCH_RATE=500 BENCH_REPLICAS=2 node bench/swarm.mjs
import { execFileSync, spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { agentApi, fmt, freePort, median, nginxGet, pacedLoad, sleep, startAgent } from './_lib.mjs';
import { nodeWebBase } from '../test/helpers/node-web.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RATE = Number(process.env.BENCH_RATE ?? 500);
/** Replicas of the routed service (BENCH_REPLICAS=1: a single task, which Swarm stops as soon as its successor runs). */
const REPLICAS = Number(process.env.BENCH_REPLICAS ?? 2);
const id = Math.random().toString(16).slice(2, 8);
const prefix = `bench${id}`;
const WEB_IMAGE = await nodeWebBase();

/**
 * Three services: `web` (REPLICAS replicas, the one a domain routes to: the node application of
 * test/helpers/node-web.mjs, built on this host, with a health check every second; on SIGTERM it stops accepting and
 * finishes the requests in progress) and two workers. The update settings are the agent's defaults written out, so
 * that the raw deploy updates the same way.
 */
const stackFile = (marker) => `version: "3.9"
services:
  web:
    image: ${WEB_IMAGE}
    command: ["sh", "-c", "echo ${marker} > /version && exec ${process.execPath} /app.js"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1/health"]
      interval: 1s
      timeout: 2s
      retries: 2
    labels:
      agent.test: "1"
    deploy:
      replicas: ${REPLICAS}
      labels:
        agent.test: "1"
      update_config: {order: start-first, failure_action: rollback, monitor: 10s, parallelism: 1, delay: 3s}
      rollback_config: {order: start-first, monitor: 10s, parallelism: 1, delay: 3s}
${['b', 'c']
  .map(
    (s) => `  ${s}:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "echo ${marker}-${s}; exec sleep 3600"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
    deploy:
      replicas: 1
      labels:
        agent.test: "1"
      update_config: {order: start-first, failure_action: rollback, monitor: 10s, parallelism: 1, delay: 3s}
`,
  )
  .join('')}`;

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const docker = (args, input) => execFileSync('docker', args, { encoding: 'utf8', input, stdio: [input ? 'pipe' : 'ignore', 'pipe', 'pipe'] });

/** The services of a stack: replicas running/desired and the state of their update. */
function stackState(stack) {
  const ids = docker(['service', 'ls', '-q', '--filter', `label=com.docker.stack.namespace=${stack}`])
    .trim()
    .split('\n')
    .filter(Boolean);
  if (!ids.length) return [];
  const replicas = new Map(
    docker(['service', 'ls', '--filter', `label=com.docker.stack.namespace=${stack}`, '--format', '{{.ID}} {{.Replicas}}'])
      .trim()
      .split('\n')
      .map((l) => [l.split(' ')[0], l.split(' ')[1]]),
  );
  const updates = docker(['service', 'inspect', ...ids, '--format', '{{.ID}} {{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}'])
    .trim()
    .split('\n');
  return updates.map((l) => {
    const [sid, update = ''] = l.split(' ');
    const [running, desired] = (replicas.get(sid.slice(0, 12)) ?? '0/1').split('/').map(Number);
    return { running, desired, update };
  });
}

/** Polls (100 ms) until every service of the stack runs all its replicas, and with `updated` its update completed. */
async function converged(stack, count, updated) {
  for (;;) {
    const s = stackState(stack);
    if (s.length === count && s.every((x) => x.running === x.desired && (!updated || x.update === 'completed'))) return;
    if (s.some((x) => /rollback|paused/.test(x.update))) throw new Error(`raw stack ${stack}: ${JSON.stringify(s)}`);
    await sleep(100);
  }
}

async function removeRaw(stack) {
  spawnSync('docker', ['stack', 'rm', stack], { stdio: 'ignore' });
  for (let i = 0; i < 300; i++) {
    const left = docker(['network', 'ls', '-q', '--filter', `label=com.docker.stack.namespace=${stack}`]).trim();
    if (!left) return;
    await sleep(200);
    // A network whose tasks were still shutting down is refused at the first try.
    if (i % 10 === 9) spawnSync('docker', ['stack', 'rm', stack], { stdio: 'ignore' });
  }
}

console.log(
  `# swarm benchmark (node ${process.version}, ${ROUNDS} rounds, ${RATE} req/s, ${REPLICAS} replica(s) of the routed service, load average ${loadavg()
    .map((l) => fmt(l, 2))
    .join(' ')})`,
);
if (docker(['info', '--format', '{{.Swarm.ControlAvailable}}']).trim() !== 'true') throw new Error('the engine manages no swarm: run bash test/env/up.sh');
const httpPort = await freePort();
const agent = await startAgent({
  plugins: ['docker', 'deployments', 'edge'],
  config: { proxy: { http_port: httpPort, https_port: await freePort(), listen_address: '127.0.0.1' } },
});
const api = await agentApi(agent);

const times = { agentCreate: [], rawCreate: [], agentUpdate: [], rawUpdate: [] };
const traffic = [];
const made = [];
try {
  for (let i = 0; i < ROUNDS; i++) {
    // Agent: create (answers once every replica runs), a domain, an update under load, delete.
    const name = `${prefix}-api${i}`;
    const host = `${name}.bench.test`;
    made.push(name);
    let t = process.hrtime.bigint();
    const created = await api('POST', '/deployments', { name, compose_content: stackFile(`v1-${i}`), runtime: 'swarm', auto_start: true });
    times.agentCreate.push(ms(t));
    if (created.data.start_error || created.data.status !== 'running') throw new Error(`deployment ${name}: ${JSON.stringify(created.data)}`);
    await api('POST', `/deployments/${name}/domains`, { service: 'web', domain: host, container_port: 80 });
    for (let n = 0; n < 100 && !(await nginxGet(httpPort, host)).ok; n++) await sleep(100);
    const stop = pacedLoad({ port: httpPort, host, rate: RATE });
    await sleep(1000);
    t = process.hrtime.bigint();
    await api('PUT', `/deployments/${name}`, { compose_content: stackFile(`v2-${i}`) });
    times.agentUpdate.push(ms(t));
    await sleep(1000);
    const answers = await stop();
    const r = { sent: answers.length, failed: answers.filter((a) => !a.ok).length };
    traffic.push(r);
    await api('DELETE', `/deployments/${name}?remove_files=true`);

    // Raw: the same file, the same points.
    const raw = `${prefix}-raw${i}`;
    made.push(raw);
    t = process.hrtime.bigint();
    docker(['stack', 'deploy', '-c', '-', raw], stackFile(`v1-${i}`));
    await converged(raw, 3, false);
    times.rawCreate.push(ms(t));
    t = process.hrtime.bigint();
    docker(['stack', 'deploy', '-c', '-', raw], stackFile(`v2-${i}`));
    // The engine marks the update as started within a moment of the deploy: wait for it, then for its end.
    for (let n = 0; n < 50 && !stackState(raw).some((s) => s.update === 'updating'); n++) await sleep(50);
    await converged(raw, 3, true);
    times.rawUpdate.push(ms(t));
    await removeRaw(raw);
    console.log(
      `  round ${i + 1}: create ${fmt(times.agentCreate[i], 0)} vs ${fmt(times.rawCreate[i], 0)} ms, update ${fmt(times.agentUpdate[i], 0)} vs ${fmt(times.rawUpdate[i], 0)} ms, ${r.sent} requests during the update, ${r.failed} failed`,
    );
  }
  const [ac, rc, au, ru] = [times.agentCreate, times.rawCreate, times.agentUpdate, times.rawUpdate].map(median);
  console.log('\nmedian over the rounds');
  console.log(
    `(a) create of a 3-service stack until every replica runs: agent ${fmt(ac, 0)} ms, raw docker stack deploy ${fmt(rc, 0)} ms, ratio ${fmt(ac / rc, 2)} (goal <= 1.10)`,
  );
  console.log(`(b) rolling update until converged (update completed): agent ${fmt(au, 0)} ms, raw ${fmt(ru, 0)} ms, ratio ${fmt(au / ru, 2)}`);
  console.log(
    `(c) failed requests through nginx during the update at ${RATE} req/s: ${traffic.map((x) => x.failed).join(', ')} of ${traffic.map((x) => x.sent).join(', ')} (goal 0)`,
  );
} finally {
  for (const name of made.filter((n) => n.includes('-api'))) await api('DELETE', `/deployments/${name}?remove_files=true`).catch(() => undefined);
  await agent.stop();
  for (const name of made.filter((n) => n.includes('-raw'))) await removeRaw(name);
}
