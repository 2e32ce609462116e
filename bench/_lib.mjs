// Helpers shared by the benchmarks: start the real agent in a child process, measure load with autocannon.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const ADMIN_PASSWORD = 'Bench-Admin-Pass-1';
/** The agent runs with the Node flags `npm start` uses (scripts/lib.mjs). */
export { NODE_FLAGS } from '../scripts/lib.mjs';
import { AGENT_ENTRY, NODE_FLAGS } from '../scripts/lib.mjs';

/**
 * Starts the agent; resolves once it printed "agent ready". `nodeFlags` and `entry` let a benchmark compare Node
 * flags or another build of the agent.
 */
export async function startAgent({ plugins = ['*'], config = {}, dataDir, nodeFlags = NODE_FLAGS, entry = AGENT_ENTRY } = {}) {
  const work = mkdtempSync(join(tmpdir(), 'agent-bench-'));
  const data = dataDir ?? join(work, 'data');
  const yaml = JSON.stringify({ listen: '127.0.0.1:0', data_dir: data, log: { level: 'warn' }, plugins: { enabled: plugins }, ...config });
  writeFileSync(join(work, 'agent.yaml'), yaml); // JSON is valid YAML
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, [...nodeFlags, entry, '--config', join(work, 'agent.yaml')], {
    env: { ...process.env, AGENT_ADMIN_PASSWORD: ADMIN_PASSWORD, AGENT_LOG_LEVEL: 'info' },
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
    url, readyMs, pid: child.pid, dataDir: data,
    async token() {
      const res = await fetch(`${url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) });
      return (await res.json()).data.token;
    },
    rssMb() {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      return m ? Number(m[1]) / 1024 : NaN;
    },
    async stop({ keepData = false } = {}) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      if (!keepData) rmSync(work, { recursive: true, force: true });
    },
  };
}

export const fmt = (n, digits = 1) => Number(n).toFixed(digits);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
