// Soak: 100 clients for BENCH_SOAK_SECONDS (600) against the agent with every plugin, each looping over a mix of
// what operators' scripts do all day: validate the token, list deployments, read the audit journal and the plugin
// list, create and delete an API key, update a setting (each write durable with its audit record). Reports errors
// (any non-2xx or failed request), requests/s, and the agent's RSS: sampled every 10 s, the figure is the growth
// from the end of the settling period (the first fifth of the run, at least 60 s) to the end. A second figure
// compares the lowest samples of the first and the last minute after settling: a sample may fall anywhere in a
// garbage-collection cycle of the heap, the lowest of six is near its floor, which is what grows with a leak.
import { cpus } from 'node:os';
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { agentApi, fmt, percentile, scratchEdge, sleep, startAgent } from './_lib.mjs';

const SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 600);
const CLIENTS = Number(process.env.BENCH_SOAK_CLIENTS ?? 100);
const SETTLE = Math.min(Math.max(60, SECONDS / 5), SECONDS / 2);

const scratch = mkdtempSync(join(tmpdir(), 'bench-soak-'));
const agent = await startAgent({ config: scratchEdge(scratch) });
const call = await agentApi(agent);

let stop = false;
let requests = 0;
const errors = [];
const latencies = [];
const timed = async (fn) => {
  const t = performance.now();
  try {
    await fn();
    latencies.push(performance.now() - t);
  } catch (err) {
    errors.push(String(err?.message ?? err));
  }
  requests++;
};

async function client(n) {
  for (let i = 0; !stop; i++) {
    await timed(() => call('GET', '/auth/validate'));
    await timed(() => call('GET', '/deployments'));
    if (i % 5 === 0) await timed(() => call('GET', '/audit/events?limit=20'));
    if (i % 10 === 0) await timed(() => call('GET', '/plugins'));
    if (i % 10 === 3) {
      await timed(async () => {
        const key = await call('POST', '/apikeys', { name: `soak-${n}-${i}` });
        await call('DELETE', `/apikeys/${key.data.id}`);
      });
    }
    if (n === 0 && i % 20 === 0) await timed(() => call('PUT', '/settings', { access: { retention_days: 30 + (i % 50) } }));
  }
}

console.log(`# soak: ${CLIENTS} clients for ${SECONDS} s (settling ${SETTLE} s), all plugins, node ${process.version}, ${cpus().length} cores`);
const samples = [];
const started = Date.now();
const clients = Array.from({ length: CLIENTS }, (_, n) => client(n));
while (Date.now() - started < SECONDS * 1000) {
  await sleep(10_000);
  const s = Math.round((Date.now() - started) / 1000);
  samples.push({ s, rss: agent.rssMb() });
  if (s % 60 < 10) console.log(`${s} s: ${requests} requests, ${errors.length} errors, RSS ${fmt(agent.rssMb())} MB`);
}
stop = true;
await Promise.all(clients);
const elapsed = (Date.now() - started) / 1000;
const settled = samples.filter((x) => x.s >= SETTLE);
const base = settled[0]?.rss ?? NaN;
const last = samples.at(-1)?.rss ?? NaN;
const peak = Math.max(...settled.map((x) => x.rss));
latencies.sort((a, b) => a - b);
console.log(
  `requests ${requests} (${fmt(requests / elapsed, 0)}/s), errors ${errors.length}${errors.length ? `: ${[...new Set(errors)].slice(0, 5).join(' | ')}` : ''}`,
);
console.log(`latency p50 ${fmt(percentile(latencies, 50))} ms, p99 ${fmt(percentile(latencies, 99))} ms`);
console.log(
  `RSS after settling ${fmt(base)} MB, at the end ${fmt(last)} MB, peak ${fmt(peak)} MB: growth ${fmt(last - base)} MB (goal < 5 MB) ${last - base < 5 && errors.length === 0 ? 'OK' : 'NOT MET'}`,
);
const floor = (from, to) => Math.min(...settled.filter((x) => x.s >= from && x.s < to).map((x) => x.rss));
const firstFloor = floor(SETTLE, SETTLE + 60);
const lastFloor = floor(SECONDS - 60, Infinity);
console.log(
  `RSS floor (lowest sample) in the first minute after settling ${fmt(firstFloor)} MB, in the last minute ${fmt(lastFloor)} MB: growth ${fmt(lastFloor - firstFloor)} MB`,
);
await agent.stop();
