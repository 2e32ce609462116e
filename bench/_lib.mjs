// Helpers shared by the benchmarks: start the real agent in a child process, call its API, measure load with
// autocannon or with paced requests through nginx.
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const ADMIN_PASSWORD = 'Bench-Admin-Pass-1';
/** The agent runs with the Node flags and environment `npm start` uses (scripts/lib.mjs). */
export { AGENT_ENV, NODE_FLAGS } from '../scripts/lib.mjs';
import { AGENT_ENTRY, AGENT_ENV, NODE_FLAGS } from '../scripts/lib.mjs';

/**
 * Starts the agent; resolves once it printed "agent ready". `nodeFlags` and `entry` let a benchmark compare Node
 * flags or another build of the agent.
 */
export async function startAgent({ plugins = ['*'], config = {}, dataDir, nodeFlags = NODE_FLAGS, entry = AGENT_ENTRY, env = {} } = {}) {
  const work = mkdtempSync(join(tmpdir(), 'agent-bench-'));
  const data = dataDir ?? join(work, 'data');
  const yaml = JSON.stringify({ listen: '127.0.0.1:0', data_dir: data, log: { level: 'warn' }, plugins: { enabled: plugins }, ...config });
  writeFileSync(join(work, 'agent.yaml'), yaml); // JSON is valid YAML
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, [...nodeFlags, entry, '--config', join(work, 'agent.yaml')], {
    env: { ...AGENT_ENV, ...process.env, AGENT_ADMIN_PASSWORD: ADMIN_PASSWORD, AGENT_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise((resolve, reject) => {
    const onData = (c) => {
      output += c;
      const m = /"url":"(http:\/\/[^"]+)"[^\n]*"msg":"agent ready"/.exec(output);
      if (m) resolve(m[1]);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`agent exited ${code}: ${output}`)));
  });
  const readyMs = Number(process.hrtime.bigint() - started) / 1e6;
  return {
    url,
    readyMs,
    pid: child.pid,
    dataDir: data,
    /** Everything the agent printed so far. */
    output: () => output,
    async token() {
      const res = await fetch(`${url}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
      });
      return (await res.json()).data.token;
    },
    rssMb() {
      return rssOf(child.pid);
    },
    /** RSS of the agent and of every process below it (the observability app, compose runs in flight), in MB. */
    treeRssMb() {
      const pids = descendants(child.pid);
      const children = pids.reduce((sum, pid) => sum + (rssOf(pid) || 0), 0);
      const main = rssOf(child.pid);
      return { main, children, total: main + children, processes: pids.length + 1 };
    },
    async stop({ keepData = false } = {}) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      if (!keepData) rmSync(work, { recursive: true, force: true });
    },
  };
}

/** VmRSS of one process in MB (NaN when it is gone). */
export function rssOf(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Every process below `pid` (children, their children, …), from the parent ids in /proc. */
export function descendants(pid) {
  const parentOf = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command name in field 2 may hold spaces or parentheses: the fields after its last ')' are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // the process ended meanwhile
    }
  }
  const out = [];
  const queue = [pid];
  while (queue.length) {
    const parent = queue.shift();
    for (const [child, ppid] of parentOf)
      if (ppid === parent) {
        out.push(child);
        queue.push(child);
      }
  }
  return out;
}

/**
 * Config that keeps the edge plugin off the host's nginx: it renders into `dir`, its test and reload commands do
 * nothing; `proxy` overrides its other keys (an access log a bench writes itself, say).
 */
export const scratchEdge = (dir, proxy = {}) => ({
  proxy: {
    config_dir: dir,
    test_command: ['true'],
    reload_command: ['true'],
    access_log: join(dir, 'access.log'),
    error_log: join(dir, 'error.log'),
    ...proxy,
  },
});

export const fmt = (n, digits = 1) => Number(n).toFixed(digits);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The middle value of `xs` (the upper one of an even count), as every bench reports its rounds. */
export const median = (xs) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );

/** A TCP port free on 127.0.0.1 right now (for an nginx of the bench's own). */
export const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Logs in to the agent as the admin (or takes `token`) and returns `api(method, path, body, expect)`: a request to
 * `/api<path>` with the token, `body` (when given) sent as JSON. It resolves with the parsed answer (null when it is
 * empty) and throws when the status is not `expect` (any 2xx when left out). Its properties serve the benches that
 * look at more of the answer:
 *   - `api.request(method, path, body, expect)` resolves with { status, text, body, ms }: `body` is null when the
 *     answer is not JSON, `ms` runs from the request to the parsed answer; it throws only when `expect` is given
 *     and the status differs (the error's `status` says which, unlike a failed connection's);
 *   - `api.send(method, path, body)` resolves with the fetch Response itself, for an answer read as a stream or
 *     timed without being parsed;
 *   - `api.token` is the token, for a websocket or a load generator.
 */
export async function agentApi(agent, { token } = {}) {
  const bearer = token ?? (await agent.token());
  const send = (method, path, body) =>
    fetch(`${agent.url}/api${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const request = async (method, path, body, expect) => {
    const started = process.hrtime.bigint();
    const res = await send(method, path, body);
    const text = await res.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // an answer that is not JSON (a proxy's error page, say): its text tells
    }
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    const unexpected = expect === '2xx' ? res.status < 200 || res.status >= 300 : expect !== undefined && res.status !== expect;
    if (unexpected) throw Object.assign(new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`), { status: res.status });
    return { status: res.status, text, body: parsed, ms };
  };
  const api = async (method, path, body, expect = '2xx') => (await request(method, path, body, expect)).body;
  return Object.assign(api, { request, send, token: bearer });
}

/**
 * One GET of `/` through nginx on 127.0.0.1:`port` for `host`, on a fresh connection unless `keepAlive` is an
 * http.Agent: when it was sent, how long it took, whether it was a 200, and the answer's body. It never rejects
 * (an error or a timeout of 10 s is a failed request).
 */
export const nginxGet = (port, host, keepAlive = false) =>
  new Promise((resolve) => {
    const sent = performance.now();
    const done = (ok, body) => resolve({ sent, ms: performance.now() - sent, ok, body });
    const req = httpRequest({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: keepAlive }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => done(res.statusCode === 200, body));
      res.on('error', () => done(false, ''));
    });
    req.on('error', () => done(false, ''));
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end();
  });

/**
 * Sends `rate` GETs a second through nginx (`nginxGet`) on schedule until stopped: an open loop, requests go out
 * when due whatever the answers do, so a stalled upstream shows as failures and latency rather than as fewer
 * requests. Returns `stop`, which resolves once the last answer came with every answer in the order of sending.
 */
export function pacedLoad({ port, host, rate, keepAlive = false }) {
  const answers = [];
  const pending = new Set();
  const t0 = performance.now();
  let sent = 0;
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - t0) / 1000) * rate);
    for (; sent < due; sent++) {
      const p = nginxGet(port, host, keepAlive).then((a) => {
        answers.push(a);
        pending.delete(p);
      });
      pending.add(p);
    }
  }, 2);
  return async () => {
    clearInterval(timer);
    await Promise.all(pending);
    return answers.sort((a, b) => a.sent - b.sent);
  };
}

/** Removes every container of compose project `name` (a run that failed half-way leaves none behind). */
export function removeProjectContainers(name) {
  try {
    const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${name}`], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
    if (ids.length) execFileSync('docker', ['rm', '-f', ...ids], { stdio: 'ignore' });
  } catch {
    // no engine to ask: nothing to remove
  }
}
