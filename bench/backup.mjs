// `npm run bench -- backup`: backup of a 1 GB deployment folder through the API (POST /api/backups, job polled
// to completion; the archive written by node-tar, compressed by Node's zlib) against `tar czf` of the same folder,
// and the agent's peak RSS while it runs.
// Goals (issue 5): time ratio agent / tar czf <= 1.2; peak RSS flat, < 200 MB.
// BACKUP_BENCH_MB changes the folder size (default 1024); BACKUP_BENCH_ROUNDS the number of rounds (default 3):
// tar and the agent take turns, so a machine whose load changes meanwhile weighs on both; the median ratio counts.
import { spawnSync } from 'node:child_process';
import { createReadStream, mkdirSync, mkdtempSync, openSync, closeSync, rmSync, statSync, writeSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentApi, fmt, sleep, startAgent } from './_lib.mjs';

const TOTAL_MB = Number(process.env.BACKUP_BENCH_MB ?? 1024);
const ROUNDS = Math.max(1, Number(process.env.BACKUP_BENCH_ROUNDS ?? 3));
const name = `bench-backup-${process.pid}`;

// A deterministic generator (no crypto cost in the timing): text-like files compress, binary-like ones do not.
let seed = 7;
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed);
const words = Array.from({ length: 4000 }, () => Array.from({ length: 3 + (rnd() % 8) }, () => String.fromCharCode(97 + (rnd() % 26))).join(''));
function textChunk(size) {
  const parts = [];
  let n = 0;
  while (n < size) {
    const w = words[rnd() % words.length];
    parts.push(w);
    n += w.length + 1;
  }
  return Buffer.from(parts.join(' ')).subarray(0, size);
}
function noiseChunk(size) {
  const b = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i += 4) b.writeUInt32LE(rnd() >>> 0, i);
  return b;
}

/** ~60% text files of 1-8 MB, ~40% incompressible files of 16-64 MB, plus many small files. */
function makeFolder(dir) {
  const MB = 1024 * 1024;
  const text = textChunk(8 * MB);
  let written = 0;
  let i = 0;
  mkdirSync(join(dir, 'small'), { recursive: true });
  for (let s = 0; s < 2000; s++) {
    const fd = openSync(join(dir, 'small', `f${s}.txt`), 'w');
    writeSync(fd, text.subarray(s * 100, s * 100 + 2000));
    closeSync(fd);
    written += 2000;
  }
  while (written < TOTAL_MB * MB) {
    const sub = join(dir, `d${i % 20}`);
    mkdirSync(sub, { recursive: true });
    const binary = i % 5 >= 3;
    const size = Math.min(binary ? (16 + (rnd() % 48)) * MB : (1 + (rnd() % 8)) * MB, TOTAL_MB * MB - written);
    const fd = openSync(join(sub, `${binary ? 'blob' : 'text'}-${i}.${binary ? 'bin' : 'txt'}`), 'w');
    for (let off = 0; off < size; off += 4 * MB) {
      const n = Math.min(4 * MB, size - off);
      writeSync(fd, binary ? noiseChunk(n) : text.subarray(((off / MB) % 4) * MB, ((off / MB) % 4) * MB + n));
    }
    closeSync(fd);
    written += size;
    i++;
  }
  return written;
}

async function readAll(dir) {
  // Warm the page cache, so both runs read from memory and compare compression + archiving, not the disk.
  const out = spawnSync('tar', ['cf', '/dev/null', '-C', dir, '.']);
  if (out.status !== 0) throw new Error('warm-up failed');
}

const work = mkdtempSync(join(tmpdir(), 'agent-bench-backup-'));
const agent = await startAgent({ plugins: ['docker', 'deployments', 'backups'], config: { log: { level: 'warn' } } });
try {
  const { request: api } = await agentApi(agent);
  const created = await api('POST', '/deployments', {
    name,
    auto_start: false,
    compose_content: 'services:\n  app:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    labels:\n      agent.test: "1"\n',
  });
  if (created.status !== 201) throw new Error(`deployment: ${JSON.stringify(created.body)}`);
  const folder = created.body.data.path;
  const bytes = makeFolder(join(folder, 'data'));
  await readAll(folder);
  console.log(`backup bench: deployment folder of ${fmt(bytes / 1024 / 1024, 0)} MB (text and incompressible files, 2000 small files)`);

  const load = () =>
    loadavg()
      .map((l) => fmt(l, 2))
      .join(' ');
  console.log(`load average before: ${load()} (${cpus().length} cores)`);

  // tar czf of the same folder (gzip level 6, like the agent's default).
  const tarOut = join(work, 'reference.tar.gz');
  const runTar = () => {
    const t0 = process.hrtime.bigint();
    const tar = spawnSync('tar', ['czf', tarOut, '-C', folder, '.']);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
    const size = statSync(tarOut).size;
    rmSync(tarOut);
    return { seconds, size };
  };

  // The agent: POST /api/backups, poll the job; sample the agent's RSS meanwhile.
  const runAgent = async () => {
    // The synchronous work before blocked this process: let it notice keep-alive sockets the agent closed meanwhile.
    await sleep(200);
    const baseline = agent.rssMb();
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, agent.rssMb())), 50);
    const t1 = process.hrtime.bigint();
    const started = await api('POST', '/backups', { deployment_name: name, include_database: false });
    if (started.status !== 202) throw new Error(`backup: ${JSON.stringify(started.body)}`);
    let job;
    for (;;) {
      job = (await api('GET', `/backups/jobs/${started.body.data.job_id}`)).body.data;
      if (job.status === 'completed' || job.status === 'failed') break;
      await sleep(50);
    }
    const seconds = Number(process.hrtime.bigint() - t1) / 1e9;
    clearInterval(sampler);
    if (job.status !== 'completed') throw new Error(`backup failed: ${job.error}`);
    const backup = (await api('GET', `/backups/${job.result.backup_id}`)).body.data;
    await api('DELETE', `/backups/${backup.id}`);
    return { seconds, size: backup.size, baseline, peak };
  };

  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) {
    const tar = runTar();
    const own = await runAgent();
    rounds.push({ tar, own, ratio: own.seconds / tar.seconds });
    console.log(
      `round ${r + 1}: tar czf ${fmt(tar.seconds, 2)} s (${fmt(tar.size / 1024 / 1024, 0)} MB), agent ${fmt(own.seconds, 2)} s (${fmt(own.size / 1024 / 1024, 0)} MB, + SHA-256 per component and of the archive), ratio ${fmt(own.seconds / tar.seconds, 2)}, agent RSS ${fmt(own.baseline, 0)} → peak ${fmt(own.peak, 0)} MB`,
    );
  }
  const sorted = rounds.map((r) => r.ratio).sort((a, b) => a - b);
  const ratio = sorted[Math.floor(sorted.length / 2)];
  const peak = Math.max(...rounds.map((r) => r.own.peak));
  const baseline = Math.min(...rounds.map((r) => r.own.baseline));
  const best = (k) => Math.min(...rounds.map((r) => r[k].seconds));
  console.log(`tar czf:       best ${fmt(best('tar'), 2)} s, ${fmt(bytes / 1024 / 1024 / best('tar'), 0)} MB/s`);
  console.log(`agent backup:  best ${fmt(best('own'), 2)} s, ${fmt(bytes / 1024 / 1024 / best('own'), 0)} MB/s`);
  console.log(
    `time ratio agent / tar czf: median ${fmt(ratio, 2)} of ${rounds.length} (${sorted.map((x) => fmt(x, 2)).join(', ')}) (goal <= 1.2: ${ratio <= 1.2 ? 'met' : 'NOT met'})`,
  );
  console.log(
    `agent RSS: ${fmt(baseline, 0)} MB before, peak ${fmt(peak, 0)} MB during the backups (+${fmt(peak - baseline, 0)} MB; goal flat, < 200 MB: ${peak < 200 ? 'met' : 'NOT met'})`,
  );
  console.log(`load average after: ${load()}`);
  await api('DELETE', `/deployments/${name}?remove_files=true`);
} finally {
  await agent.stop();
  rmSync(work, { recursive: true, force: true });
}
