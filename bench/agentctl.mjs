// agentctl benchmark: wall time of short CLI calls against the real agent (all built-in plugins), compared with a
// bare `node -e 0` on the same machine: start-up only (--version), a call from the cached description, the same
// with the description downloaded again (--refresh), and a checked create (body validation) in --dry-run.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_PASSWORD, ROOT, fmt, percentile, startAgent } from './_lib.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const CLI = join(ROOT, 'cli/dist/main.js');
const home = mkdtempSync(join(tmpdir(), 'agentctl-bench-'));
const env = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache'), NO_COLOR: '1' };

function time(args, input) {
  const samples = [];
  for (let i = 0; i < RUNS; i++) {
    const t = process.hrtime.bigint();
    const r = spawnSync(process.execPath, args, { env, input, encoding: 'utf8' });
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p90: percentile(samples, 90) };
}

console.log(`# agentctl benchmark (${RUNS} runs each, node ${process.version}, load average ${(await import('node:os')).loadavg()[0].toFixed(1)})`);
const agent = await startAgent();
try {
  const login = spawnSync(process.execPath, [CLI, 'login', '--url', agent.url, '--username', 'admin'], { env, input: `${ADMIN_PASSWORD}\n`, encoding: 'utf8' });
  if (login.status !== 0) throw new Error(login.stderr);
  const cacheDir = join(home, 'cache', 'agentctl', 'descriptions');
  const size = statSync(join(cacheDir, readdirSync(cacheDir)[0])).size;
  console.log(login.stdout.trim().split('\n').pop(), `— description ${fmt(size / 1024, 0)} KB`);

  const bare = time(['-e', '0']);
  const rows = [
    ['node -e 0 (baseline)', bare],
    ['agentctl --version', time([CLI, '--version'])],
    ['agentctl system health (cached description)', time([CLI, 'system', 'health'])],
    ['agentctl plans list (cached, query checked)', time([CLI, 'plans', 'list'])],
    [
      'agentctl deployments create --dry-run (body checked)',
      time([CLI, 'deployments', 'create', '-f', 'name=web', '-f', 'compose_content=services: {}', '--dry-run']),
    ],
    ['agentctl system health --refresh (downloaded)', time([CLI, '--refresh', 'system', 'health'])],
  ];
  console.log('\n| call | p50 ms | p90 ms | p50 / bare node |\n|---|---|---|---|');
  for (const [name, r] of rows) console.log(`| ${name} | ${fmt(r.p50, 0)} | ${fmt(r.p90, 0)} | ${fmt(r.p50 / bare.p50, 2)} |`);
} finally {
  await agent.stop();
  rmSync(home, { recursive: true, force: true });
}
