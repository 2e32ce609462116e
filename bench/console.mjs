// `npm run bench -- console`: what the web console's traffic and audit screens cost the agent today, with many rows.
// One agent (access, edge, security) whose audit journal holds CONSOLE_BENCH_AUDIT events (default 1M, written
// through the journal as the kernel's sink writes them, spread over 30 days) and whose traffic journal holds
// CONSOLE_BENCH_TRAFFIC requests (default 1M access-log lines over the last 24 h, ingested by the edge plugin as it
// follows nginx's log). Then each call a screen makes when it opens is timed over HTTP, one at a time, p50/p99:
//   traffic screen: GET /traffic/stats (the last 24 h), GET /traffic/logs?limit=1000 (the per-minute chart),
//                   GET /traffic/unknown-domains;
//   audit screen:   GET /audit/events?limit=50 (first page, with its total), the same filtered by action, and the
//                   next page.
// Goal (issue 28): each < 100 ms p99 at 1M rows. /traffic/stats and /traffic/unknown-domains are answered from
// the edge plugin's per-minute and per-hour rollups (plugins/edge/src/traffic/rollups.ts).
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, agentApi, fmt, percentile, scratchEdge, sleep, startAgent } from './_lib.mjs';

const AUDIT = Number(process.env.CONSOLE_BENCH_AUDIT ?? 1_000_000);
const TRAFFIC = Number(process.env.CONSOLE_BENCH_TRAFFIC ?? 1_000_000);
const RUNS = Number(process.env.CONSOLE_BENCH_RUNS ?? 30);
const { AuditJournal } = await import(pathToFileURL(join(ROOT, 'plugins/access/dist/audit/journal.js')).href);
const { openJournal } = await import(pathToFileURL(join(ROOT, 'core/dist/store/journal.js')).href);

let seed = 7;
const rnd = (n) => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed % n;
};
const resources = ['deployments', 'apikeys', 'users', 'backups', 'proxy', 'security', 'settings', 'containers'];
const verbs = ['create', 'update', 'delete', 'start', 'stop', 'restart', 'revoke'];
const auditEvent = () => {
  const resource_type = resources[rnd(resources.length)];
  const deployment = rnd(10) < 7 ? `app${rnd(10)}` : null;
  const success = rnd(20) !== 0;
  return {
    actor_type: 'user',
    actor_id: `user:${1 + rnd(20)}`,
    actor_name: `user${rnd(20)}`,
    action: `${resource_type}.${verbs[rnd(verbs.length)]}`,
    resource_type,
    resource_id: deployment ?? String(rnd(5000)),
    deployment,
    success,
    status: success ? 200 : 404,
    client_ip: `10.0.${rnd(4)}.${rnd(25)}`,
    detail: null,
  };
};
const statuses = [200, 200, 200, 200, 201, 204, 301, 304, 400, 401, 403, 404, 404, 500, 502];
const now = Date.now() / 1000;
const trafficLine = (i) => {
  const d = rnd(11);
  const dep = d === 10 ? '' : `app${d}`;
  return JSON.stringify({
    time: (now - 86_400 + (i / TRAFFIC) * 86_400).toFixed(3),
    deployment: dep,
    host: dep ? `${dep}.example.com` : `unknown${rnd(50)}.example.net`,
    method: 'GET',
    path: ['/', '/api/items', '/login', '/static/app.js'][rnd(4)],
    status: String(statuses[rnd(statuses.length)]),
    bytes: String(rnd(50_000)),
    duration: (rnd(2000) / 10_000).toFixed(3),
    ip: `10.${rnd(4)}.${rnd(250)}.${rnd(250)}`,
    ua: 'bench',
    blocked: '0',
    protected: '0',
    user: '',
  });
};

const work = mkdtempSync(join(tmpdir(), 'agent-bench-console-'));
const dataDir = join(work, 'data');
const accessLog = join(work, 'access.log');
writeFileSync(accessLog, '');
let agent;
try {
  // ---- the audit journal, written before the agent starts (it is the access plugin's file) ----
  let t0 = Date.now();
  const journal = openJournal(join(dataDir, 'plugins', 'access', 'audit.sqlite'));
  const audit = new AuditJournal(journal);
  const samples = Array.from({ length: 4096 }, auditEvent);
  let next = 0;
  await Promise.all(
    Array.from({ length: 500 }, async () => {
      while (next < AUDIT) await audit.record(samples[next++ & 4095]);
    }),
  );
  const span = 30 * 86400_000;
  const end = Date.now();
  journal
    .prepare("UPDATE audit_events SET time_ms = ? - (? - id) * ?, time = strftime('%Y-%m-%dT%H:%M:%fZ', (? - (? - id) * ?) / 1000.0, 'unixepoch')")
    .run(end, AUDIT, Math.floor(span / AUDIT), end, AUDIT, Math.floor(span / AUDIT));
  journal.pragma('wal_checkpoint(TRUNCATE)');
  journal.close();
  console.log(`audit: ${AUDIT.toLocaleString('en')} events written in ${fmt((Date.now() - t0) / 1000)} s`);

  agent = await startAgent({
    plugins: ['access', 'docker', 'deployments', 'edge', 'security'],
    dataDir,
    config: {
      ...scratchEdge(join(work, 'nginx'), { access_log: accessLog, error_log: join(work, 'error.log'), default_server: false }),
      traffic: { follow_interval_ms: 100 },
    },
  });
  const client = await agentApi(agent);
  const api = (path) => client.request('GET', path, undefined, 200);

  // ---- the traffic journal, through the edge plugin's follower ----
  t0 = Date.now();
  for (let i = 0; i < TRAFFIC; i += 50_000) {
    const part = [];
    for (let j = i; j < Math.min(TRAFFIC, i + 50_000); j++) part.push(trafficLine(j));
    appendFileSync(accessLog, `${part.join('\n')}\n`);
  }
  let rows = 0;
  while (rows < TRAFFIC) {
    await sleep(500);
    rows = (await api('/traffic/logs?limit=1')).body.meta.total;
    if (Date.now() - t0 > 900_000) throw new Error(`only ${rows} traffic rows after 15 minutes`);
  }
  console.log(`traffic: ${rows.toLocaleString('en')} requests ingested in ${fmt((Date.now() - t0) / 1000)} s`);
  await sleep(2000);

  const since = () => new Date(Date.now() - 86_400_000).toISOString();
  const calls = [
    ['traffic', 'GET /traffic/stats (24 h)', () => `/traffic/stats?start_time=${encodeURIComponent(since())}`],
    ['traffic', 'GET /traffic/logs?limit=1000', () => '/traffic/logs?limit=1000'],
    ['traffic', 'GET /traffic/unknown-domains', () => '/traffic/unknown-domains'],
    ['audit', 'GET /audit/events?limit=50', () => '/audit/events?limit=50&offset=0'],
    ['audit', 'GET /audit/events?action=apikeys.revoke&limit=50', () => '/audit/events?action=apikeys.revoke&limit=50&offset=0'],
    ['audit', 'GET /audit/events?limit=50&offset=50', () => '/audit/events?limit=50&offset=50'],
  ];
  console.log(`\n${RUNS} calls each, one at a time (load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores):`);
  for (const [screen, label, path] of calls) {
    await api(path()); // warm
    const times = [];
    for (let i = 0; i < RUNS; i++) times.push((await api(path())).ms);
    times.sort((a, b) => a - b);
    const p99 = percentile(times, 99);
    console.log(
      `  ${screen.padEnd(8)} ${label.padEnd(52)} p50 ${fmt(percentile(times, 50)).padStart(7)} ms  p99 ${fmt(p99).padStart(7)} ms  ${p99 < 100 ? 'under' : 'OVER'} the 100 ms goal`,
    );
  }
} finally {
  await agent?.stop();
  rmSync(work, { recursive: true, force: true });
}
