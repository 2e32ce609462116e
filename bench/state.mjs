// `npm run bench -- state`: the agent's own state under load. Create and delete API keys and users with
// 100 concurrent clients, then with one client, on an agent that already holds 100, 1k and 10k records (users and API keys, half each),
// p50/p99 per operation; and a request authenticated by an API key (GET /api/auth/validate) at the same
// concurrency, which must not get slower with more records (keys are looked up in memory).
// Goal (issue 16): p99 < 20 ms at 10k records for the key and user operations, flat from 100 to 10k. Creating a
// user hashes its password (argon2id, ~30 ms of CPU by design), so its figure is bounded by the hashing.
//
// The records are written before the agent starts, as an `identity.json` of the format agents kept before the
// SQLite store: the same file serves an older build as it is, and this build imports it on first start.
// `STATE_BENCH_BASELINE=<path of another build's core/dist/agent.mjs>` runs the same on that build, side by side.
// Next to the latencies, the agent's CPU time per operation: on a shared machine it is the figure least disturbed by
// whatever else runs (latencies under 100 clients are mostly queueing for the CPU).
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import argon2 from 'argon2';
import { ADMIN_PASSWORD, agentApi, fmt, percentile, startAgent } from './_lib.mjs';
import { AGENT_ENTRY } from '../scripts/lib.mjs';

const SIZES = (process.env.STATE_BENCH_SIZES ?? '100,1000,10000').split(',').map(Number);
// The load is 100 clients at once; one client alone measures the time an operation takes without queueing
// behind the others (the agent runs requests on one thread, so under 100 clients latency is mostly waiting).
const CLIENT_COUNTS = (process.env.STATE_BENCH_CLIENTS ?? '100,1').split(',').map(Number);
const KEY_OPS = Number(process.env.STATE_BENCH_KEY_OPS ?? 1000);
const USER_OPS = Number(process.env.STATE_BENCH_USER_OPS ?? 200);
const AUTH_OPS = Number(process.env.STATE_BENCH_AUTH_OPS ?? 5000);
const targets = [['this build', AGENT_ENTRY]];
if (process.env.STATE_BENCH_BASELINE) targets.push(['baseline', process.env.STATE_BENCH_BASELINE]);

const hashOptions = { type: argon2.argon2id, memoryCost: 19456, timeCost: 2, parallelism: 1 };
const adminHash = await argon2.hash(ADMIN_PASSWORD, hashOptions);
// One hash for every seeded user: they are never logged in as, and hashing 5k passwords would take minutes.
const userHash = await argon2.hash(randomBytes(16).toString('hex'), hashOptions);

/** An `identity.json` with `records` users and keys (half each) besides the admin. */
function seedFile(records) {
  const at = new Date().toISOString();
  const user = (id, username, role, hash) => ({
    id,
    username,
    email: `${username}@example.com`,
    role,
    permissions: [],
    scope: role === 'admin' ? 'global' : 'deployments',
    is_active: true,
    created_at: at,
    updated_at: at,
    last_login_at: null,
    password_hash: hash,
    token_version: 1,
  });
  const users = [user(1, 'admin', 'admin', adminHash)];
  for (let i = 0; i < records / 2; i++) users.push(user(i + 2, `seed${i}`, 'viewer', userHash));
  const api_keys = [];
  for (let i = 0; i < records / 2; i++) {
    api_keys.push({
      id: i + 1,
      user_id: (i % (records / 2)) + 2,
      name: `seed-key-${i}`,
      description: '',
      role: 'viewer',
      permissions: [],
      deployments: [],
      key_prefix: 'agk_seed00',
      active: true,
      created_at: at,
      expires_at: null,
      revoked_at: null,
      last_used_at: null,
      last_used_ip: null,
      key_hash: createHash('sha256').update(`agk_seed${i}`).digest('hex'),
    });
  }
  return JSON.stringify({ users, api_keys, grants: [], next_user_id: users.length + 1, next_key_id: api_keys.length + 1 });
}

/** CPU time (user + system) of a process so far, in ms. */
const cpuMs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
};

/** Runs `ops` requests with `clients` at once: latency percentiles in ms, operations per second, agent CPU ms per operation. */
async function load(ops, request, pid, clients = CLIENT_COUNTS[0]) {
  const cpuBefore = pid ? cpuMs(pid) : 0;
  const times = [];
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = next++; i < ops; i = next++) {
        const t = process.hrtime.bigint();
        await request(i);
        times.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), rate: ops / seconds, cpu: pid ? (cpuMs(pid) - cpuBefore) / ops : NaN };
}

const rows = [];
for (const records of SIZES) {
  for (const [target, entry] of targets) {
    const work = mkdtempSync(join(tmpdir(), 'agent-bench-state-'));
    const dataDir = join(work, 'data');
    mkdirSync(join(dataDir, 'core'), { recursive: true, mode: 0o700 });
    writeFileSync(join(dataDir, 'core', 'identity.json'), seedFile(records), { mode: 0o600 });
    const agent = await startAgent({ plugins: ['access'], dataDir, entry });
    try {
      const call = await agentApi(agent);
      const seen = await call('GET', '/apikeys', undefined, 200);
      if (seen.data.length !== records / 2) throw new Error(`${target}: ${seen.data.length} keys instead of ${records / 2}`);
      // Warm-up: connections opened, code paths compiled, before anything is measured.
      await load(CLIENT_COUNTS[0] * 5, () => call('GET', '/apikeys/1', undefined, 200));
      for (const clients of CLIENT_COUNTS) {
        const run = (ops, request) => load(ops, request, agent.pid, clients);
        const row = (op, r) => {
          rows.push({ target, records, clients, op, p50_ms: fmt(r.p50, 1), p99_ms: fmt(r.p99, 1), per_s: Math.round(r.rate), cpu_ms_per_op: fmt(r.cpu, 2) });
          console.log(
            `${target}, ${records} records, ${clients} client(s), ${op}: p50 ${fmt(r.p50, 1)} ms, p99 ${fmt(r.p99, 1)} ms, ${Math.round(r.rate)}/s, ` +
              `${fmt(r.cpu, 2)} ms CPU/op`,
          );
        };
        const keyIds = [];
        row(
          'key create',
          await run(KEY_OPS, async (i) => {
            keyIds.push((await call('POST', '/apikeys', { name: `bench-${clients}-${i}`, role: 'viewer' }, 201)).data.id);
          }),
        );
        row('key delete', await run(keyIds.length, (i) => call('DELETE', `/apikeys/${keyIds[i]}`, undefined, 200)));

        const userIds = [];
        row(
          'user create',
          await run(USER_OPS, async (i) => {
            const body = { username: `bench${clients}x${i}`, email: `bench${clients}x${i}@example.com`, password: 'Str0ng-Pass-word!', role: 'viewer' };
            userIds.push((await call('POST', '/users', body, 201)).data.id);
          }),
        );
        row('user delete', await run(userIds.length, (i) => call('DELETE', `/users/${userIds[i]}`, undefined, 200)));

        // A seeded key: authenticated from memory, whatever the number of records.
        const asKey = await agentApi(agent, { token: `agk_seed${records / 2 - 1}` });
        row('auth (API key)', await run(AUTH_OPS, () => asKey('GET', '/auth/validate', undefined, 200)));
      }
    } finally {
      await agent.stop();
      rmSync(work, { recursive: true, force: true });
    }
  }
}
console.log(
  `${CLIENT_COUNTS.join(' and ')} concurrent client(s); ${KEY_OPS} key and ${USER_OPS} user operations of each kind per run; ` +
    'goal: p99 < 20 ms at 10k records, flat from 100',
);
console.table(rows);
