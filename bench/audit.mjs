// `npm run bench -- audit`: the audit journal at 1M events.
//   1. ingest with durable acknowledgement: events recorded through the journal (the kernel's sink) by many
//      concurrent writers, each waiting for its record to be committed and synced (group commit), events/s and the
//      wait per record;
//   2. p50/p99 of filtered pages (GET /api/audit/events with the spec's filters, limit 50, with `total`) over HTTP;
//   3. CSV export rate (POST /api/audit/export, streamed) in rows/s and MB/s;
//   4. latency of a cheap audited mutation (DELETE /api/apikeys/<unknown id>: the pipeline, a 404 and its audit
//      record, nothing else written) at 1 and 32 concurrent clients, this build side by side with another
//      (AUDIT_BENCH_BASE_ENTRY, e.g. /work/main/core/dist/agent.mjs, whose records were queued and written after the
//      answer).
// Goals (issues 6, 16): ingest >= 50k events/s with durable acknowledgement, filtered page p99 < 20 ms.
import { mkdtempSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, agentApi, fmt, percentile, startAgent } from './_lib.mjs';

const EVENTS = Number(process.env.AUDIT_BENCH_EVENTS ?? 1_000_000);
const WRITERS = Number(process.env.AUDIT_BENCH_WRITERS ?? 1000);
const BASE_ENTRY = process.env.AUDIT_BENCH_BASE_ENTRY;
const { AuditJournal } = await import(pathToFileURL(join(ROOT, 'plugins/access/dist/audit/journal.js')).href);
const { openJournal } = await import(pathToFileURL(join(ROOT, 'core/dist/store/journal.js')).href);

// A deterministic spread of values, like a busy agent's month.
let seed = 42;
const rnd = (n) => {
  // mulberry32: a small PRNG whose low bits are as random as its high ones.
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) % n;
};
const actors = [
  ...Array.from({ length: 40 }, (_, i) => ['user', `user:${i + 1}`]),
  ...Array.from({ length: 8 }, (_, i) => ['api_key', `api_key:${i + 1}`]),
  ['system', 'system:backups'],
  ['system', 'system:access'],
];
const resources = [
  'deployments',
  'containers',
  'images',
  'users',
  'apikeys',
  'backups',
  'certificates',
  'proxy',
  'security',
  'settings',
  'dns',
  'databases',
  'scheduler',
  'credentials',
  'registries',
];
const verbs = ['create', 'update', 'delete', 'start', 'stop', 'restart', 'list', 'get'];
const event = () => {
  const [actor_type, actor_id] = actors[rnd(actors.length)];
  const resource_type = resources[rnd(resources.length)];
  const deployment = rnd(10) < 7 ? `app-${rnd(200)}` : null;
  const success = rnd(20) !== 0;
  return {
    actor_type,
    actor_id,
    actor_name: actor_id.replace(':', '-'),
    action: `${resource_type}.${verbs[rnd(verbs.length)]}`,
    resource_type,
    resource_id: deployment ?? String(rnd(5000)),
    deployment,
    success,
    status: success ? 200 : [400, 403, 404, 409, 500][rnd(5)],
    client_ip: `10.0.${rnd(4)}.${rnd(25)}`,
    detail: rnd(4) === 0 ? { plan: true, note: 'x'.repeat(rnd(40)) } : null,
  };
};

const work = mkdtempSync(join(tmpdir(), 'agent-bench-audit-'));
const dataDir = join(work, 'data');
try {
  // ---- 1. ingest with durable acknowledgement ----
  const journal = openJournal(join(dataDir, 'plugins', 'access', 'audit.sqlite'));
  const audit = new AuditJournal(journal);
  const samples = Array.from({ length: 4096 }, event);
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  // Each writer waits for its record to be durable before the next, as a request waits before it is answered.
  let next = 0;
  const waits = [];
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      while (next < EVENTS) {
        const i = next++;
        const t = performance.now();
        await audit.record(samples[i & 4095]);
        if ((i & 63) === 0) waits.push(performance.now() - t);
      }
    }),
  );
  waits.sort((a, b) => a - b);
  const ingestS = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const ingestCpuS = (cpu.user + cpu.system) / 1e6;
  // Spread the events over the last 30 days, so time filters select a realistic share.
  const now = Date.now();
  const span = 30 * 86400_000;
  journal
    .prepare("UPDATE audit_events SET time_ms = ? - (? - id) * ?, time = strftime('%Y-%m-%dT%H:%M:%fZ', (? - (? - id) * ?) / 1000.0, 'unixepoch')")
    .run(now, EVENTS, Math.floor(span / EVENTS), now, EVENTS, Math.floor(span / EVENTS));
  journal.pragma('wal_checkpoint(TRUNCATE)');
  journal.close();
  console.log(
    `audit ingest, durable acknowledgement, ${WRITERS} concurrent writers: ${EVENTS.toLocaleString('en')} events in ${fmt(ingestS, 2)} s = ` +
      `${Math.round(EVENTS / ingestS).toLocaleString('en')} events/s (goal >= 50,000; ratio ${fmt(EVENTS / ingestS / 50000, 2)}x); wait per record p50 ` +
      `${fmt(percentile(waits, 50), 2)} ms, p99 ${fmt(percentile(waits, 99), 2)} ms; ` +
      `per CPU second ${Math.round(EVENTS / ingestCpuS).toLocaleString('en')} events ` +
      `(load average now ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores)`,
  );

  // ---- 2. filtered pages over HTTP ----
  const agent = await startAgent({ plugins: ['access'], dataDir });
  try {
    const api = await agentApi(agent);
    const hour = new Date(now - 3600_000).toISOString();
    const day = new Date(now - 86400_000).toISOString();
    const week = new Date(now - 7 * 86400_000).toISOString();
    const filters = [
      {},
      { actor_id: 'user:7' },
      { actor_type: 'system' },
      { action: 'deployments.delete' },
      { resource_type: 'certificates' },
      { resource_id: 'app-17' },
      { deployment: 'app-42' },
      { success: 'false' },
      { client_ip: '10.0.2.9' },
      { start_time: hour },
      { start_time: week, end_time: day },
      { actor_id: 'user:3', action: 'deployments.update' },
      { resource_type: 'deployments', success: 'false', start_time: day },
      { actor_type: 'api_key', deployment: 'app-5' },
      { action: 'users.create', offset: '40' },
    ];
    const get = async (query) => {
      const { ms, body } = await api.request('GET', `/audit/events?${new URLSearchParams(query)}`, undefined, 200);
      return { ms, total: `${body.meta.total}${body.meta.total_exact ? '' : '+'}` };
    };
    for (const f of filters) await get(f); // warm-up (statement cache, page cache)
    const all = [];
    const perFilter = [];
    const ROUNDS = 40;
    for (const f of filters) {
      const times = [];
      let total = 0;
      for (let i = 0; i < ROUNDS; i++) {
        const r = await get(f);
        times.push(r.ms);
        total = r.total;
      }
      times.sort((a, b) => a - b);
      all.push(...times);
      perFilter.push({
        filter: JSON.stringify(f).replace(/"/g, '').slice(0, 60) || '{}',
        matches: total,
        p50_ms: fmt(percentile(times, 50), 2),
        p99_ms: fmt(percentile(times, 99), 2),
      });
    }
    all.sort((a, b) => a - b);
    console.table(perFilter);
    const p99 = percentile(all, 99);
    console.log(
      `audit filtered page (limit 50, with total) over ${EVENTS.toLocaleString('en')} events, ${all.length} requests: p50 ${fmt(percentile(all, 50), 2)} ms, p99 ${fmt(p99, 2)} ms (goal < 20 ms; ratio ${fmt(20 / p99, 2)}x headroom)`,
    );

    // ---- 3. CSV export ----
    const t = process.hrtime.bigint();
    const res = await api.send('POST', '/audit/export', { format: 'csv', limit: EVENTS });
    let bytes = 0;
    let lines = 0;
    for await (const chunk of res.body) {
      bytes += chunk.length;
      for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10) lines++;
    }
    const exportS = Number(process.hrtime.bigint() - t) / 1e9;
    const rows = lines - 1;
    console.log(
      `audit CSV export: ${rows.toLocaleString('en')} rows, ${fmt(bytes / 1e6)} MB in ${fmt(exportS, 2)} s = ${Math.round(rows / exportS).toLocaleString('en')} rows/s, ${fmt(bytes / 1e6 / exportS)} MB/s; agent RSS after ${fmt(agent.rssMb(), 0)} MB`,
    );
  } finally {
    await agent.stop({ keepData: true });
  }

  // ---- 4. latency of a cheap audited mutation, this build and the base ----
  const rows4 = [];
  for (const [label, entry] of [['this build', undefined], ...(BASE_ENTRY ? [['base', BASE_ENTRY]] : [])]) {
    const a = await startAgent({ plugins: ['access'], ...(entry ? { entry } : {}) });
    try {
      const api = await agentApi(a);
      const mutate = async () => {
        const t = process.hrtime.bigint();
        const res = await api.send('DELETE', '/apikeys/999999');
        await res.arrayBuffer();
        if (res.status !== 404) throw new Error(`${label}: DELETE of an unknown key answered ${res.status}`);
        return Number(process.hrtime.bigint() - t) / 1e6;
      };
      for (let i = 0; i < 200; i++) await mutate(); // warm-up
      for (const clients of [1, 32]) {
        const times = [];
        const t = process.hrtime.bigint();
        const PER_CLIENT = clients === 1 ? 2000 : 200;
        await Promise.all(
          Array.from({ length: clients }, async () => {
            for (let i = 0; i < PER_CLIENT; i++) times.push(await mutate());
          }),
        );
        const s = Number(process.hrtime.bigint() - t) / 1e9;
        times.sort((x, y) => x - y);
        rows4.push({
          build: label,
          clients,
          requests: times.length,
          req_per_s: Math.round(times.length / s),
          p50_ms: fmt(percentile(times, 50), 2),
          p99_ms: fmt(percentile(times, 99), 2),
        });
      }
    } finally {
      await a.stop();
    }
  }
  console.log('cheap audited mutation (DELETE /api/apikeys/<unknown id>, 404), answered after its record is durable in this build, before it in the base:');
  console.table(rows4);
} finally {
  rmSync(work, { recursive: true, force: true });
}
