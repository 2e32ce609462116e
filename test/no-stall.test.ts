/**
 * No request can stall the agent: patterns from users are matched in linear time, in bounded pieces of work. The
 * real agent with the docker, deployments, backups and edge plugins; a deployment folder full of long file names
 * backed up with the exclude patterns that made picomatch backtrack (one took 41 s on 40-character names and grew
 * without end with longer ones), and searches of a traffic journal of long repetitive paths with the path patterns
 * that made SQLite's LIKE quadratic (about 1 ms a row here: 40 s for the journal), and its statistics. Meanwhile `GET /api/health`
 * and an authenticated cheap call (`GET /api/auth/validate`) are timed every 20 ms: every one answers in under 1 s
 * (the figures are printed: p99 and max).
 */
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchProxy, startAgent, type TestAgent } from './helpers/agent.js';

const work = mkdtempSync(join(tmpdir(), 'no-stall-'));
const proxy = scratchProxy(join(work, 'nginx'));
const name = `stall-${randomBytes(3).toString('hex')}`;
/** Rows of the traffic journal, each with a path of PATH_LENGTH repeated characters. */
const ROWS = 40_000;
const PATH_LENGTH = 1000;
let agent: TestAgent;
let folder: string;

const compose = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sleep", "3600"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

beforeAll(async () => {
  agent = await startAgent({
    plugins: ['access', 'docker', 'deployments', 'backups', 'edge'],
    config: { proxy: { ...proxy, default_server: false }, traffic: { follow_interval_ms: 100 } },
  });
  const res = await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: false } });
  expect(res.status, res.text).toBe(201);
  folder = res.body.data.path as string;
  // 40 folders of 250-character names, 50 files of 250-character names in each: 2,040 names of one repeated letter.
  for (let d = 0; d < 40; d++) {
    const dir = join(folder, 'data', `${'a'.repeat(247)}${String(d).padStart(3, '0')}`);
    mkdirSync(dir, { recursive: true });
    for (let f = 0; f < 50; f++) writeFileSync(join(dir, `${'a'.repeat(247)}${String(f).padStart(3, '0')}`), 'x');
  }
  // The access log the edge plugin follows: ROWS lines whose paths are one letter repeated.
  const now = Date.now() / 1000;
  const path = `/${'a'.repeat(PATH_LENGTH - 1)}`;
  for (let i = 0; i < ROWS; i += 5000) {
    const lines: string[] = [];
    for (let k = i; k < i + 5000; k++) {
      lines.push(
        JSON.stringify({
          time: (now - 3600 + k / 100).toFixed(3),
          deployment: name,
          host: `${name}.example.com`,
          method: 'GET',
          path,
          status: '200',
          bytes: '10',
          duration: '0.001',
          ip: `10.0.${k % 250}.1`,
          ua: 'stall-test',
          blocked: '0',
          protected: '0',
          user: '',
        }),
      );
    }
    appendFileSync(proxy.access_log, `${lines.join('\n')}\n`);
  }
  for (const started = Date.now(); ;) {
    const total = (await agent.api('GET', '/traffic/logs', { query: { limit: 1 } })).body.meta?.total ?? 0;
    if (total >= ROWS) break;
    if (Date.now() - started > 120_000) throw new Error(`only ${total} of ${ROWS} rows in the traffic journal after 2 minutes`);
    await new Promise((r) => setTimeout(r, 250));
  }
}, 240_000);

afterAll(async () => {
  if (agent) {
    await agent.api('DELETE', `/deployments/${name}`, { query: { remove_volumes: true } }).catch(() => undefined);
    await agent.stop();
  }
  rmSync(work, { recursive: true, force: true });
});

/** Times `GET /api/health` and `GET /api/auth/validate` every 20 ms until `stop`; latencies in ms. */
function probe(stop: { done: boolean }) {
  const samples: { what: string; ms: number; status: number }[] = [];
  const loop = async (what: string, path: string, token: string | null) => {
    while (!stop.done) {
      const t0 = performance.now();
      const res = await fetch(new URL(path, agent.url), { headers: token ? { authorization: `Bearer ${token}` } : {} });
      await res.arrayBuffer();
      samples.push({ what, ms: performance.now() - t0, status: res.status });
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const running = Promise.all([loop('health', '/api/health', null), loop('validate', '/api/auth/validate', agent.token)]);
  return { samples, running };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

describe('no request stalls the agent', () => {
  it('backups with pathological exclude patterns and traffic searches with pathological path patterns run while every API call answers in < 1 s', async () => {
    const stop = { done: false };
    const { samples, running } = probe(stop);
    const started = performance.now();
    try {
      // The pattern that blocked the agent for 41 s, and patterns at the bounds: 8 × 500 characters, a star then
      // a literal run of the letter the names repeat (every partial match alive at once).
      const exclude = [`${'*a'.repeat(15)}*b`, ...Array.from({ length: 7 }, (_, i) => `*${'a'.repeat(495)}b${i}`), `data/**/${'*a'.repeat(14)}*c`];
      const backup = await agent.api('POST', '/backups', { body: { deployment_name: name, include_database: false, exclude_patterns: exclude } });
      expect(backup.status, backup.text).toBe(202);
      // Meanwhile: path patterns of the same kind over the traffic journal, each counting every row. (One after the
      // other: on a loaded machine three at once, beside the backup, can pass the searches' 10 s budget — a 503
      // SEARCH_TIMEOUT, by design, which is not what this test is about.)
      for (const path of [`*${'a'.repeat(500)}b*`, `${'a'.repeat(511)}b`, `/*${'a'.repeat(200)}*${'a'.repeat(200)}*c`]) {
        const res = await agent.api('GET', '/traffic/logs', { query: { path, exact_total: true, limit: 10 } });
        expect(res.status, res.text).toBe(200);
        expect(res.body.meta.total).toBe(0);
      }
      // And the aggregates, which read the same rows in slices too.
      const [stats, summary] = await Promise.all([agent.api('GET', '/traffic/stats'), agent.api('GET', `/deployments/${name}/traffic`)]);
      expect(stats!.status, stats!.text).toBe(200);
      expect(stats!.body.data.total.requests).toBe(ROWS);
      expect(summary!.status, summary!.text).toBe(200);
      expect(summary!.body.data.top_paths).toEqual([{ path: `/${'a'.repeat(PATH_LENGTH - 1)}`, requests: ROWS }]);
      // The journal's rows do match a plain pattern: the search reads them all.
      const all = await agent.api('GET', '/traffic/logs', { query: { path: '/a*a', exact_total: true, limit: 5 } });
      expect(all.status, all.text).toBe(200);
      expect(all.body.meta.total).toBe(ROWS);
      let job: any;
      for (;;) {
        job = (await agent.api('GET', `/backups/jobs/${backup.body.data.job_id}`)).body.data;
        if (job.status === 'completed' || job.status === 'failed') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(job.status, job.error).toBe('completed');
      const made = await agent.api('GET', `/backups/${job.result.backup_id}`);
      expect(made.status, made.text).toBe(200);
    } finally {
      stop.done = true;
      await running;
    }
    const seconds = (performance.now() - started) / 1000;
    const ms = samples.map((s) => s.ms).sort((a, b) => a - b);
    const worst = samples.reduce((a, b) => (b.ms > a.ms ? b : a));
    console.log(
      `no-stall: ${samples.length} probes over ${seconds.toFixed(1)} s while the backup and the searches ran: ` +
        `p50 ${percentile(ms, 50).toFixed(1)} ms, p99 ${percentile(ms, 99).toFixed(1)} ms, max ${worst.ms.toFixed(1)} ms (${worst.what})`,
    );
    expect(samples.every((s) => s.status === 200)).toBe(true);
    expect(samples.length).toBeGreaterThan(20);
    expect(worst.ms).toBeLessThan(1000);
  });

  it('patterns beyond the bounds are refused with 400 INVALID_PATTERN naming the field', async () => {
    const tooMany = await agent.api('POST', '/backups', { body: { deployment_name: name, exclude_patterns: ['*a'.repeat(17)] } });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body).toMatchObject({ code: 'INVALID_PATTERN' });
    expect(tooMany.body.error).toMatch(/exclude_patterns\[0\].*more than 16 wildcards/);
    const together = await agent.api('PUT', `/deployments/${name}/backup-config`, {
      body: { exclude_patterns: Array.from({ length: 9 }, (_, i) => `${'n'.repeat(500)}${i}`) },
    });
    expect(together.status).toBe(400);
    expect(together.body).toMatchObject({ code: 'INVALID_PATTERN' });
    expect(together.body.error).toMatch(/exclude_patterns: the patterns are longer than 4096 characters together/);
    const path = await agent.api('GET', '/traffic/logs', { query: { path: '*a'.repeat(17) } });
    expect(path.status).toBe(400);
    expect(path.body).toMatchObject({ code: 'INVALID_PATTERN' });
    expect(path.body.error).toMatch(/^path: .*more than 16 \* wildcards/);
  });
});
