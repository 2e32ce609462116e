// Deployments benchmark, in one run against the real engine:
// (a) POST /api/deployments with auto_start (3 services) vs raw compose `up -d` of the same file, and the ratio;
// (b) p50/p99 of GET /api/deployments with 200 deployments;
// (c) tail=100 on a container with 1 GB of logs;
// (d) line-to-websocket latency of the logs stream (container output and a file source);
// (e) the host-safety check: a create (compose `config` + policy) vs raw `config`, and start/restart of an unchanged
//     deployment (checked model kept by content hash: no extra compose call) vs raw `up -d` / `restart` + `up -d`.
import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { agentApi, fmt, median, percentile, sleep, startAgent } from './_lib.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const LIST_SIZE = 200;
const LIST_REQUESTS = Number(process.env.BENCH_LIST_REQUESTS ?? 1000);
const LOG_BYTES = Number(process.env.BENCH_LOG_BYTES ?? 1024 ** 3);
const id = Math.random().toString(16).slice(2, 8);
// BENCH_ONLY=c,d runs some parts only (all by default).
const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : null;
const want = (part) => !only || only.has(part);
const prefix = `bench${id}`;

const compose = (marker) => `services:
${['a', 'b', 'c']
  .map(
    (s) => `  ${s}:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "echo ${marker}-${s}; exec sleep 3600"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`,
  )
  .join('')}`;

const composeCmd = (() => {
  const v2 = spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' });
  return v2.status === 0 ? ['docker', 'compose'] : ['docker-compose'];
})();
const runCompose = (project, dir, args) =>
  execFileSync(composeCmd[0], [...composeCmd.slice(1), '--project-name', project, ...args], { cwd: dir, stdio: 'ignore' });
const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;

function cleanupDocker() {
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `name=${prefix}`], { encoding: 'utf8' }).trim();
  if (ids) spawnSync('docker', ['rm', '-f', ...ids.split('\n')], { stdio: 'ignore' });
  const nets = execFileSync('docker', ['network', 'ls', '-q', '--filter', `name=${prefix}`], { encoding: 'utf8' }).trim();
  if (nets) spawnSync('docker', ['network', 'rm', ...nets.split('\n')], { stdio: 'ignore' });
}

console.log(`# deployments benchmark (node ${process.version}, compose: ${composeCmd.join(' ')})`);
const agent = await startAgent({ plugins: ['docker', 'deployments'] });
const api = await agentApi(agent);

try {
  // (a) create + start vs raw compose, alternating to share the machine's noise.
  if (want('a')) {
    const work = mkdtempSync(join(tmpdir(), 'bench-compose-'));
    const agentTimes = [];
    const rawTimes = [];
    const rawRun = (i) => {
      const raw = `${prefix}-raw${i}`;
      const dir = join(work, raw);
      mkdirSync(dir);
      writeFileSync(join(dir, 'docker-compose.yml'), compose(raw));
      const t = process.hrtime.bigint();
      runCompose(raw, dir, ['-f', 'docker-compose.yml', 'up', '-d']);
      rawTimes.push(ms(t));
      runCompose(raw, dir, ['-f', 'docker-compose.yml', 'down']);
    };
    const agentRun = async (i) => {
      const name = `${prefix}-api${i}`;
      const t = process.hrtime.bigint();
      const res = await api('POST', '/deployments', { name, compose_content: compose(name), auto_start: true });
      agentTimes.push(ms(t));
      if (res.data.status !== 'running') throw new Error(`deployment ${name} is ${res.data.status}`);
      await api('DELETE', `/deployments/${name}?remove_files=true`);
    };
    // Alternating which goes first, so neither always meets colder caches.
    for (let i = 0; i < ROUNDS; i++) {
      if (i % 2 === 0) {
        rawRun(i);
        await agentRun(i);
      } else {
        await agentRun(i);
        rawRun(i);
      }
    }
    rmSync(work, { recursive: true, force: true });
    const a = median(agentTimes);
    const r = median(rawTimes);
    console.log(
      `(a) create+start, 3 services (median of ${ROUNDS}): agent ${fmt(a, 0)} ms, raw compose up -d ${fmt(r, 0)} ms, ratio ${fmt(a / r, 3)} (goal <= 1.10)`,
    );
  }

  // (b) list with 200 deployments (10 of them running), from the state cache.
  if (want('b')) {
    const names = [];
    for (let i = 0; i < LIST_SIZE; i++) {
      const name = `${prefix}-list${String(i).padStart(3, '0')}`;
      names.push(name);
      await api('POST', '/deployments', { name, compose_content: compose(name), auto_start: i < 10 });
    }
    const listed = await api('GET', '/deployments');
    if (listed.data.length !== LIST_SIZE) throw new Error(`expected ${LIST_SIZE} deployments, got ${listed.data.length}`);
    // Timed: request to the last byte of the answer (parsing it is the client's business).
    const raw = async (path) => {
      const t = process.hrtime.bigint();
      const res = await api.send('GET', path);
      const body = await res.arrayBuffer();
      if (res.status !== 200 || body.byteLength === 0) throw new Error(`${path}: ${res.status}`);
      return ms(t);
    };
    for (let i = 0; i < 50; i++) await raw('/deployments');
    const lat = [];
    for (let i = 0; i < LIST_REQUESTS; i++) lat.push(await raw('/deployments'));
    lat.sort((x, y) => x - y);
    // The same client against an authenticated trivial GET: what the machine, HTTP and auth cost anyway.
    const base = [];
    for (let i = 0; i < LIST_REQUESTS; i++) base.push(await raw('/auth/validate'));
    base.sort((x, y) => x - y);
    console.log(
      `(b) GET /api/deployments with ${LIST_SIZE} deployments (10 running), ${LIST_REQUESTS} sequential requests: p50 ${fmt(percentile(lat, 50), 2)} ms, p99 ${fmt(percentile(lat, 99), 2)} ms (goal p99 < 25 ms), ${fmt(listed && JSON.stringify(listed).length / 1024, 0)} KiB; GET /api/auth/validate on the same client: p50 ${fmt(percentile(base, 50), 2)} ms, p99 ${fmt(percentile(base, 99), 2)} ms`,
    );
    for (let i = 0; i < names.length; i += 10) await Promise.all(names.slice(i, i + 10).map((n) => api('DELETE', `/deployments/${n}?remove_files=true`)));
  }

  // (c) tail=100 on a container with 1 GB of logs.
  if (want('c')) {
    const big = `${prefix}-biglog`;
    const lineText = 'x'.repeat(100);
    await api('POST', '/deployments', {
      name: big,
      auto_start: true,
      compose_content: `services:\n  log:\n    image: agent-test/busybox:latest\n    command: ["sh", "-c", "yes '${lineText}' | head -c ${Math.floor(LOG_BYTES * 0.62)}; echo; echo last-line; exec sleep 3600"]\n    stop_signal: SIGKILL\n    labels:\n      agent.test: "1"\n`,
    });
    const details = await api('GET', `/deployments/${big}`);
    const cid = details.data.containers[0].id;
    const logPath = execFileSync('docker', ['inspect', '--format', '{{.LogPath}}', cid], { encoding: 'utf8' }).trim();
    let size = 0;
    for (let waited = 0; waited < 600_000; waited += 1000) {
      const logs = await api('GET', `/deployments/${big}/logs?tail=1`);
      size = statSync(logPath).size;
      if (logs.data[0]?.text === 'last-line') break;
      await sleep(1000);
    }
    const tailTimes = [];
    for (let i = 0; i < 20; i++) {
      const t = process.hrtime.bigint();
      const res = await api('GET', `/deployments/${big}/logs?tail=100`);
      tailTimes.push(ms(t));
      if (res.data.length !== 100) throw new Error(`tail returned ${res.data.length} lines`);
    }
    const cTimes = [];
    for (let i = 0; i < 20; i++) {
      const t = process.hrtime.bigint();
      await api('GET', `/containers/${cid}/logs?tail=100`);
      cTimes.push(ms(t));
    }
    console.log(
      `(c) tail=100 on a container with ${fmt(size / 1024 ** 3, 2)} GiB of logs (json-file): deployment logs median ${fmt(median(tailTimes), 1)} ms (max ${fmt(Math.max(...tailTimes), 1)}), container logs median ${fmt(median(cTimes), 1)} ms (goal < 150 ms)`,
    );
    await api('DELETE', `/deployments/${big}?remove_files=true`);
  }

  // (d) line-to-websocket latency.
  if (want('d')) {
    const ticker = `${prefix}-ws`;
    await api('POST', '/deployments', {
      name: ticker,
      auto_start: true,
      compose_content:
        'services:\n  tick:\n    image: agent-test/busybox:latest\n    command: ["sh", "-c", "while true; do echo tick; sleep 0.1; done"]\n    stop_signal: SIGKILL\n    labels:\n      agent.test: "1"\n',
    });
    const tickerDir = join(agent.dataDir, 'deployments', ticker);
    writeFileSync(join(tickerDir, 'app.log'), '');
    await api('PUT', `/deployments/${ticker}/log-sources`, { sources: [{ id: 'app', name: 'app', path: 'app.log' }] });
    const stream = (query, onLine) =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(`${agent.url.replace('http', 'ws')}/api/deployments/${ticker}/logs/stream?${query}`);
        ws.on('open', () => ws.send(api.token));
        ws.on('error', reject);
        ws.on('message', (data) => {
          const m = JSON.parse(String(data));
          if (m.type === 'ready') resolve(ws);
          else if (m.type === 'line') onLine(m, Date.now(), process.hrtime.bigint());
        });
      });
    // Container output: from the engine's timestamp of the line to its arrival on the socket (same clock).
    const dockerLat = [];
    const ws1 = await stream('tail=0&service=tick', (m, now) => {
      if (m.time) dockerLat.push(now - Date.parse(m.time));
    });
    await sleep(200);
    dockerLat.length = 0;
    while (dockerLat.length < 100) await sleep(100);
    ws1.close();
    // File source: from the append to its arrival on the socket.
    const fileLat = [];
    let pending = null;
    const ws2 = await stream('source=app&tail=1', (m, _now, hr) => {
      if (pending && m.text === pending.text) {
        fileLat.push(Number(hr - pending.t) / 1e6);
        pending.done();
      }
    });
    let lost = 0;
    for (let i = 0; i < 50; i++) {
      const arrived = await new Promise((done) => {
        pending = { text: `line ${i}`, t: process.hrtime.bigint(), done: () => done(true) };
        appendFileSync(join(tickerDir, 'app.log'), `line ${i}\n`);
        setTimeout(() => done(false), 5000);
      });
      if (!arrived) lost++;
    }
    if (lost) console.log(`    ${lost} appended line(s) never arrived on the socket`);
    ws2.close();
    dockerLat.sort((x, y) => x - y);
    fileLat.sort((x, y) => x - y);
    console.log(
      `(d) line-to-websocket latency: container output p50 ${fmt(percentile(dockerLat, 50), 1)} ms, p99 ${fmt(percentile(dockerLat, 99), 1)} ms (${dockerLat.length} lines); file source p50 ${fmt(percentile(fileLat, 50), 1)} ms, p99 ${fmt(percentile(fileLat, 99), 1)} ms (goal < 100 ms)`,
    );
    await api('DELETE', `/deployments/${ticker}?remove_files=true`);
  }
  // (e) the cost of checking: a create pays one `config` call; an unchanged deployment pays none at start.
  if (want('e')) {
    const work = mkdtempSync(join(tmpdir(), 'bench-safety-'));
    const t = { create: [], config: [], start: [], rawStart: [], restart: [], rawRestart: [] };
    const timed = async (list, fn) => {
      const s0 = process.hrtime.bigint();
      await fn();
      list.push(ms(s0));
    };
    const agentRun = async (i) => {
      const name = `${prefix}-safe${i}`;
      await timed(t.create, () => api('POST', '/deployments', { name, compose_content: compose(name) }));
      await api('POST', `/deployments/${name}/start`);
      await api('POST', `/deployments/${name}/stop`);
      await timed(t.start, () => api('POST', `/deployments/${name}/start`));
      await timed(t.restart, () => api('POST', `/deployments/${name}/restart`));
      await api('DELETE', `/deployments/${name}?remove_files=true`);
    };
    const rawRun = async (i) => {
      const raw = `${prefix}-rawsafe${i}`;
      const dir = join(work, raw);
      mkdirSync(dir);
      writeFileSync(join(dir, 'docker-compose.yml'), compose(raw));
      const f = ['-f', 'docker-compose.yml'];
      await timed(t.config, async () => runCompose(raw, dir, [...f, 'config']));
      runCompose(raw, dir, [...f, 'up', '-d']);
      runCompose(raw, dir, [...f, 'stop']);
      await timed(t.rawStart, async () => runCompose(raw, dir, [...f, 'up', '-d', '--no-recreate']));
      await timed(t.rawRestart, async () => {
        runCompose(raw, dir, [...f, 'restart']);
        runCompose(raw, dir, [...f, 'up', '-d', '--no-recreate']);
      });
      runCompose(raw, dir, [...f, 'down']);
    };
    for (let i = 0; i < ROUNDS; i++) {
      if (i % 2 === 0) {
        await rawRun(i);
        await agentRun(i);
      } else {
        await agentRun(i);
        await rawRun(i);
      }
    }
    rmSync(work, { recursive: true, force: true });
    const m = Object.fromEntries(Object.entries(t).map(([k, v]) => [k, median(v)]));
    console.log(
      `(e) host-safety check (median of ${ROUNDS}): create without start ${fmt(m.create, 0)} ms vs raw compose config ${fmt(m.config, 0)} ms (the check's own cost beyond compose: ${fmt(m.create - m.config, 0)} ms)`,
    );
    console.log(
      `(e) start of an unchanged stopped deployment: agent ${fmt(m.start, 0)} ms vs raw up -d ${fmt(m.rawStart, 0)} ms, ratio ${fmt(m.start / m.rawStart, 3)} (goal <= 1.10); restart: agent ${fmt(m.restart, 0)} ms vs raw restart + up -d ${fmt(m.rawRestart, 0)} ms, ratio ${fmt(m.restart / m.rawRestart, 3)}`,
    );
  }
} finally {
  await agent.stop();
  cleanupDocker();
}
