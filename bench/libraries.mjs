// `npm run bench -- libraries`: hand-written code the agent keeps where a well-kept library does the same, measured
// against that library on the path where it runs. Each case runs in a process of its own (memory is measured
// from its start) with the agent's Node flags.
//
// - `$ref` resolution of the live description (client/src/json-schema.ts) vs @apidevtools/json-schema-ref-parser:
//   agentctl resolves the operation it runs, lazily and synchronously; the library resolves asynchronously, a
//   whole document (or one schema with its components) at a time.
// - The Prometheus exposition of the observability app (plugins/observability/src/app/prometheus.ts) vs
//   prom-client, 50 containers: the app's memory is one of the README's figures, and every scrape renders.
// - The audit export's CSV writer (plugins/access/src/audit/export.ts) vs csv-stringify, batches of 5,000 rows
//   as the export reads them: the same bytes (RFC 4180, formula cells prefixed), rows a second.
// - The login limiter (plugins/access/src/identity/login-limiter.ts) vs rate-limiter-flexible's memory limiter,
//   attempts from 50,000 addresses inside one lockout window (a spray): time an attempt, heap kept.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { NODE_FLAGS, ROOT, agentApi, fmt, startAgent } from './_lib.mjs';

const work = mkdtempSync(join(tmpdir(), 'bench-libraries-'));
const CONTAINERS = Number(process.env.BENCH_CONTAINERS ?? 50);
const SCRAPES = Number(process.env.BENCH_SCRAPES ?? 2000);

/** Runs `code` (an ES module body; bare imports resolved here) in a fresh Node with the agent's flags and --expose-gc. */
function child(code) {
  const file = join(work, `case-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(file, code);
  const r = spawnSync(process.execPath, [...NODE_FLAGS, '--expose-gc', file], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${file}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

const url = (path) => pathToFileURL(join(ROOT, path)).href;
const MEM = `const mem = () => { gc(); gc(); const m = process.memoryUsage(); return { rss: m.rss / 1048576, heap: m.heapUsed / 1048576 }; };`;

// ---------------------------------------------------------------- 1. $ref resolution of the live description
console.log('> the live description of an agent with every plugin');
const agent = await startAgent();
let docPath;
try {
  const { request } = await agentApi(agent);
  docPath = join(work, 'openapi.json');
  writeFileSync(docPath, (await request('GET', '/openapi.json')).text);
} finally {
  await agent.stop();
}

const refs = child(`
import { readFileSync } from 'node:fs';
const text = readFileSync(${JSON.stringify(docPath)}, 'utf8');
const doc = JSON.parse(text);
const { derefSchema } = await import(${JSON.stringify(url('client/dist/json-schema.js'))});
const ops = Object.values(doc.paths).flatMap((p) => Object.values(p));
const bodies = ops.map((o) => o.requestBody?.content?.['application/json']?.schema).filter(Boolean);
const time = async (fn, reps = 1) => { const t = performance.now(); for (let i = 0; i < reps; i++) await fn(); return (performance.now() - t) / reps; };
const oursOp = await time(() => { for (const o of ops) { derefSchema(o.parameters ?? [], doc); derefSchema(o.responses, doc); } for (const b of bodies) derefSchema(b, doc); }, 5);
let t = performance.now();
const { dereference } = await import(${JSON.stringify(import.meta.resolve('@apidevtools/json-schema-ref-parser'))});
const importMs = performance.now() - t;
const whole = [];
for (let i = 0; i < 5; i++) { const copy = JSON.parse(text); whole.push(await time(() => dereference(copy, { dereference: { circular: 'ignore' } }))); }
const libOp = await time(async () => {
  for (const o of ops) await dereference({ components: doc.components, p: structuredClone(o.parameters ?? []), r: structuredClone(o.responses) });
  for (const b of bodies) await dereference({ components: doc.components, b: structuredClone(b) });
});
whole.sort((a, b) => a - b);
console.log(JSON.stringify({ bytes: text.length, ops: ops.length, oursPerOp: oursOp / ops.length, libPerOp: libOp / ops.length, importMs, wholeMedian: whole[2], wholeMin: whole[0], wholeMax: whole[4] }));
`);
console.log(`  description: ${fmt(refs.bytes / 1024, 0)} KiB, ${refs.ops} operations`);
console.log(`  ours (lazy, synchronous): ${fmt(refs.oursPerOp, 3)} ms an operation (parameters, answers, body)`);
console.log(`  json-schema-ref-parser: ${fmt(refs.libPerOp, 3)} ms an operation (its schemas with the components);`);
console.log(
  `    the whole description ${fmt(refs.wholeMedian, 0)} ms (median of 5, ${fmt(refs.wholeMin, 0)}–${fmt(refs.wholeMax, 0)}), import ${fmt(refs.importMs, 0)} ms`,
);
console.log(`  ratio: ${fmt(refs.libPerOp / refs.oursPerOp, 0)}× an operation`);

// ---------------------------------------------------------------- 2. Prometheus exposition, 50 containers
const scrape = (impl) => `
${MEM}
const before = mem();
const { CONTAINER_METRICS, HOST_METRICS } = await import(${JSON.stringify(url('plugins/observability/dist/metrics.js'))});
const readings = Array.from({ length: ${CONTAINERS} }, (_, i) => ({
  info: { name: \`dep\${i % 5}-web-\${i}\`, deployment: \`dep\${i % 5}\`, service: 'web' },
  updated: Date.now(),
  metrics: Object.fromEntries(CONTAINER_METRICS.map((m) => [m.name, Math.random() * 1e6])),
}));
const host = { metrics: Object.fromEntries(HOST_METRICS.map((m) => [m.name, Math.random()])), updated: Date.now() };
${impl}
const loaded = mem();
const text = await render();
for (let i = 0; i < 200; i++) await render();
const cpu0 = process.cpuUsage();
for (let i = 0; i < ${SCRAPES}; i++) await render();
const cpu = process.cpuUsage(cpu0);
const after = mem();
console.log(JSON.stringify({ bytes: text.length, timestamps: / \\d{13}$/m.test(text), importRss: loaded.rss - before.rss, afterRss: after.rss - before.rss, afterHeap: after.heap - before.heap, cpuMs: (cpu.user + cpu.system) / 1000 / ${SCRAPES} }));
`;
const ours = `const { exposition } = await import(${JSON.stringify(url('plugins/observability/dist/app/prometheus.js'))});
const render = async () => exposition(readings, host);`;
// A registry per scrape: what a scrape shows depends on the principal (its deployments), so a shared registry
// would need a reset and a lock across concurrent scrapes.
const lib = `const { Registry, Gauge } = await import(${JSON.stringify(import.meta.resolve('prom-client'))});
const render = () => {
  const registry = new Registry();
  for (const m of CONTAINER_METRICS) {
    const g = new Gauge({ name: m.prometheus, help: \`\${m.description} (\${m.name})\`, labelNames: ['container', 'deployment', 'service'], registers: [registry] });
    for (const r of readings) if (r.metrics[m.name] !== undefined) g.set({ container: r.info.name, deployment: r.info.deployment ?? '', service: r.info.service }, r.metrics[m.name]);
  }
  for (const m of HOST_METRICS) if (host.metrics[m.name] !== undefined) new Gauge({ name: m.prometheus, help: \`\${m.description} (\${m.name})\`, registers: [registry] }).set(host.metrics[m.name]);
  return registry.metrics();
};`;
const runs = { ours: [], prom: [] };
for (let i = 0; i < 3; i++) {
  runs.ours.push(child(scrape(ours)));
  runs.prom.push(child(scrape(lib)));
}
const range = (list, key, digits = 1) => {
  const v = list.map((r) => r[key]).sort((a, b) => a - b);
  const [low, high] = [fmt(v[0], digits), fmt(v.at(-1), digits)];
  return low === high ? low : `${low}–${high}`;
};
console.log(`> Prometheus exposition, ${CONTAINERS} containers, ${SCRAPES} scrapes, 3 runs each`);
for (const [name, list] of Object.entries(runs)) {
  console.log(
    `  ${name === 'ours' ? 'ours       ' : 'prom-client'}: ${range(list, 'cpuMs', 3)} ms CPU a scrape; RSS +${range(list, 'importRss')} MB at import, ` +
      `+${range(list, 'afterRss')} MB after the scrapes (heap retained ${range(list, 'afterHeap', 2)} MB); ${fmt(list[0].bytes / 1024, 1)} KiB, ` +
      `sample timestamps: ${list[0].timestamps ? 'yes' : 'no'}`,
  );
}
const cpuRatio = runs.prom.reduce((s, r) => s + r.cpuMs, 0) / runs.ours.reduce((s, r) => s + r.cpuMs, 0);
console.log(`  ratio: prom-client ${fmt(cpuRatio, 1)}× the CPU a scrape`);

// ---------------------------------------------------------------- 3. audit CSV export
const csv = child(`
const { csvLine } = await import(${JSON.stringify(url('plugins/access/dist/audit/export.js'))});
const { stringify } = await import(${JSON.stringify(import.meta.resolve('csv-stringify/sync'))});
const rows = Array.from({ length: 5000 }, (_, i) => [i + 1, new Date(1.7e12 + i * 1000).toISOString(), 'user', 'user:' + (i % 50), 'user' + (i % 50),
  'deployments.update', 'deployment', 'app-' + (i % 30), 'app-' + (i % 30), i % 7 ? 'true' : 'false', i % 7 ? 200 : 409, '10.0.' + (i % 255) + '.' + (i % 200),
  i % 3 ? null : JSON.stringify({ changed: ['compose', 'env'], note: 'a "quoted", text' })]);
const ours = () => { let s = ''; for (const r of rows) s += csvLine(r); return s; };
// RFC 4180 records end in CRLF; with that delimiter csv-stringify no longer quotes a lone LF or CR: quoted_match does.
const lib = () => stringify(rows, { record_delimiter: 'windows', escape_formulas: true, quoted_match: /[\\r\\n]/ });
const rate = (fn) => { for (let i = 0; i < 5; i++) fn(); const t = performance.now(); for (let i = 0; i < 40; i++) fn(); return 5000 / ((performance.now() - t) / 40) * 1000; };
const lf = stringify([['a\\nb']], { record_delimiter: 'windows', escape_formulas: true });
console.log(JSON.stringify({ same: ours() === lib(), ours: [rate(ours), rate(ours)], lib: [rate(lib), rate(lib)], lfUnquoted: lf === 'a\\nb\\r\\n' }));
`);
console.log('> audit CSV export, batches of 5,000 rows');
console.log(
  `  ours: ${fmt(Math.min(...csv.ours) / 1000, 0)}–${fmt(Math.max(...csv.ours) / 1000, 0)}k rows/s; csv-stringify: ${fmt(Math.min(...csv.lib) / 1000, 0)}–${fmt(Math.max(...csv.lib) / 1000, 0)}k rows/s (same bytes: ${csv.same ? 'yes' : 'NO'})`,
);
console.log(
  `  ratio: csv-stringify ${fmt(Math.min(...csv.ours) / Math.max(...csv.lib), 1)}× slower at least; with CRLF records and no quoted_match it leaves a field with a line break unquoted: ${csv.lfUnquoted ? 'yes' : 'no'}`,
);

// ---------------------------------------------------------------- 4. login limiter, a spray from many addresses
const spray = (impl) => `
${MEM}
const N = 50000;
const address = (i) => '10.' + ((i >> 16) & 255) + '.' + ((i >> 8) & 255) + '.' + (i & 255);
${impl}
const before = mem();
const t = performance.now();
for (let i = 0; i < N; i++) await attempt(i);
const ms = performance.now() - t;
console.log(JSON.stringify({ usPerAttempt: ms / N * 1000, heapMb: mem().heap - before.heap }));
`;
const limiterOurs = `const { LoginLimiter } = await import(${JSON.stringify(url('plugins/access/dist/identity/login-limiter.js'))});
const limiter = new LoginLimiter(5, 20, 900_000);
const attempt = (i) => limiter.begin('admin', address(i));`;
// Two budgets as the agent keeps them; a refused attempt gives the other budget its point back.
const limiterLib = `const { RateLimiterMemory } = await import(${JSON.stringify(import.meta.resolve('rate-limiter-flexible'))});
const ip = new RateLimiterMemory({ points: 20, duration: 900, blockDuration: 900 });
const user = new RateLimiterMemory({ points: 5, duration: 900, blockDuration: 900 });
const attempt = async (i) => {
  const a = address(i);
  const [x, y] = await Promise.allSettled([ip.consume(a), user.consume('admin\\u0000' + a)]);
  if (x.status !== y.status) await (x.status === 'fulfilled' ? ip.reward(a) : user.reward('admin\\u0000' + a));
};`;
const lim = { ours: [], lib: [] };
for (let i = 0; i < 3; i++) {
  lim.ours.push(child(spray(limiterOurs)));
  lim.lib.push(child(spray(limiterLib)));
}
console.log('> login limiter, 50,000 addresses inside one lockout window, 3 runs each');
console.log(`  ours: ${range(lim.ours, 'usPerAttempt')} µs an attempt, heap +${range(lim.ours, 'heapMb')} MB`);
console.log(`  rate-limiter-flexible: ${range(lim.lib, 'usPerAttempt')} µs an attempt, heap +${range(lim.lib, 'heapMb')} MB (a timer per budget)`);

rmSync(work, { recursive: true, force: true });
