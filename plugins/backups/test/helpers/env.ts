/** Shared helpers of the backups tests: unique names, polling, docker cleanup, SQL in a container, tree hashes. */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { TestAgent } from '../../../../test/helpers/agent.js';

export const runId = randomBytes(3).toString('hex');
/** Unique per run: other suites and helpers share the engine. */
export const uniqueName = (what: string) => `b${runId}-${what}`;

export async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 60_000, stepMs = 200): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`condition not met in ${timeoutMs} ms: ${JSON.stringify(v).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

export async function waitJob(agent: TestAgent, id: string, timeoutMs = 120_000): Promise<any> {
  const res = await until(
    () => agent.api('GET', `/backups/jobs/${id}`),
    (r) => ['completed', 'failed'].includes(r.body?.data?.status),
    timeoutMs,
  );
  return res.body.data;
}

/** Removes containers, networks and volumes of this run's compose projects. */
export function cleanupDocker(prefix = `b${runId}-`): void {
  const ps = spawnSync('docker', ['ps', '-a', '--filter', 'label=com.docker.compose.project', '--format', '{{.ID}} {{.Label "com.docker.compose.project"}}'], {
    encoding: 'utf8',
  });
  const ids = ps.stdout
    .split('\n')
    .filter((l) => l.split(' ')[1]?.startsWith(prefix))
    .map((l) => l.split(' ')[0]!);
  if (ids.length) spawnSync('docker', ['rm', '-f', '-v', ...ids]);
  for (const [kind, fmt] of [
    ['network', '{{.Name}}'],
    ['volume', '{{.Name}}'],
  ] as const) {
    const list = spawnSync('docker', [kind, 'ls', '--format', fmt], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter((n) => n.startsWith(prefix));
    if (list.length) spawnSync('docker', [kind, 'rm', ...(kind === 'volume' ? ['-f'] : []), ...list]);
  }
}

/** The container id of a compose service. */
export function serviceContainer(project: string, service: string): string {
  const out = execFileSync(
    'docker',
    ['ps', '-q', '--filter', `label=com.docker.compose.project=${project}`, '--filter', `label=com.docker.compose.service=${service}`],
    { encoding: 'utf8' },
  ).trim();
  if (!out) throw new Error(`no running container for ${project}/${service}`);
  return out.split('\n')[0]!;
}

/** Runs SQL with psql inside the database container; returns the unaligned output. */
export function psql(project: string, sql: string, db = 'appdb', user = 'app'): string {
  return execFileSync('docker', ['exec', serviceContainer(project, 'db'), 'psql', '-U', user, '-d', db, '-At', '-v', 'ON_ERROR_STOP=1', '-c', sql], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

export async function waitPostgres(project: string, db = 'appdb'): Promise<void> {
  await until(
    async () => {
      try {
        return psql(project, 'SELECT 1', db) === '1';
      } catch {
        return false;
      }
    },
    (ok) => ok,
    60_000,
    300,
  );
}

/** Path → SHA-256 of every file (and symlink target, folder marker) below a folder. */
export function treeHashes(root: string, skip: (rel: string) => boolean = () => false, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(root, rel)).sort()) {
    const r = rel ? `${rel}/${name}` : name;
    if (skip(r)) continue;
    const st = lstatSync(join(root, r));
    if (st.isDirectory()) Object.assign(out, { [`${r}/`]: 'dir' }, treeHashes(root, skip, r));
    else if (st.isSymbolicLink()) out[r] = `-> ${readlinkSync(join(root, r))}`;
    else
      out[r] = createHash('sha256')
        .update(readFileSync(join(root, r)))
        .digest('hex');
  }
  return out;
}

export const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
