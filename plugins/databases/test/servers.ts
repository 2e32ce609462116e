/**
 * Real MariaDB and PostgreSQL servers for a test suite: Debian's binaries, data under a temp folder, a random
 * loopback port, run as an unprivileged user when the tests run as root. Stopped (and deleted) by `stop()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
export { freePort } from '../../../test/helpers/net.js';
import { freePort } from '../../../test/helpers/net.js';

export interface DbServer {
  type: 'mariadb' | 'postgres';
  host: string;
  port: number;
  /** An administrative login (all privileges, may grant). */
  username: string;
  password: string;
  stop(): Promise<void>;
}

const asRoot = process.getuid?.() === 0;
/** `nobody`: the servers refuse to run as root. */
const UNPRIVILEGED = { uid: 65534, gid: 65534 };

function workDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (asRoot) chownSync(dir, UNPRIVILEGED.uid, UNPRIVILEGED.gid);
  return dir;
}

function run(cmd: string, args: string[], opts: { input?: string } = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], ...(asRoot ? UNPRIVILEGED : {}), cwd: '/' });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    child.once('error', reject);
    // A program that exits without reading its input must not fail the suite with EPIPE.
    child.stdin.on('error', () => undefined);
    child.once('exit', (code) => resolve({ code: code ?? 1, out }));
    child.stdin.end(opts.input ?? '');
  });
}

function daemon(cmd: string, args: string[]): { child: ChildProcess; output: () => string } {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...(asRoot ? UNPRIVILEGED : {}), cwd: '/' });
  let out = '';
  child.stdout!.on('data', (c) => (out = (out + c).slice(-20000)));
  child.stderr!.on('data', (c) => (out = (out + c).slice(-20000)));
  return { child, output: () => out };
}

async function until(what: string, check: () => Promise<boolean>, output: () => string, ms = 30000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`${what} did not become ready:\n${output()}`);
}

function stopper(child: ChildProcess, dir: string): () => Promise<void> {
  return async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
}

export async function startMariaDb(): Promise<DbServer> {
  const dir = workDir('agent-mariadb-');
  const port = await freePort();
  const password = 'Adm1n-' + Math.random().toString(36).slice(2);
  const install = await run('mariadb-install-db', [
    '--no-defaults',
    `--datadir=${dir}/data`,
    '--auth-root-authentication-method=normal',
    '--skip-test-db',
    '--skip-name-resolve',
  ]);
  if (install.code !== 0) throw new Error(`mariadb-install-db failed:\n${install.out}`);
  const socket = join(dir, 'mysqld.sock');
  const { child, output } = daemon('mariadbd', [
    '--no-defaults',
    `--datadir=${dir}/data`,
    `--socket=${socket}`,
    `--port=${port}`,
    '--bind-address=127.0.0.1',
    `--pid-file=${dir}/mariadbd.pid`,
    '--skip-name-resolve',
    '--innodb-buffer-pool-size=32M',
    '--innodb-log-file-size=16M',
    '--skip-log-bin',
    '--performance-schema=OFF',
  ]);
  const client = (sql: string) => run('mariadb', ['--no-defaults', '-S', socket, '-uroot', '-e', sql]);
  await until('mariadbd', async () => existsSync(socket) && (await client('SELECT 1')).code === 0, output);
  const setup = await client(`CREATE USER 'admin'@'%' IDENTIFIED BY '${password}'; GRANT ALL PRIVILEGES ON *.* TO 'admin'@'%' WITH GRANT OPTION;`);
  if (setup.code !== 0) throw new Error(`mariadb setup failed: ${setup.out}`);
  return { type: 'mariadb', host: '127.0.0.1', port, username: 'admin', password, stop: stopper(child, dir) };
}

function postgresBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error('PostgreSQL is not installed (Debian package postgresql)');
  return join(root, versions[0]!, 'bin');
}

export async function startPostgres(): Promise<DbServer> {
  const dir = workDir('agent-postgres-');
  const port = await freePort();
  const password = 'Adm1n-' + Math.random().toString(36).slice(2);
  const bin = postgresBin();
  const pwfile = join(dir, 'pwfile');
  writeFileSync(pwfile, password + '\n', { mode: 0o600 });
  if (asRoot) chownSync(pwfile, UNPRIVILEGED.uid, UNPRIVILEGED.gid);
  const init = await run(join(bin, 'initdb'), [
    '-D',
    `${dir}/data`,
    '-U',
    'postgres',
    '--auth=scram-sha-256',
    `--pwfile=${pwfile}`,
    '-E',
    'UTF8',
    '--locale=C',
    '--no-instructions',
  ]);
  if (init.code !== 0) throw new Error(`initdb failed:\n${init.out}`);
  const { child, output } = daemon(join(bin, 'postgres'), [
    '-D',
    `${dir}/data`,
    '-p',
    String(port),
    '-k',
    dir,
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'full_page_writes=off',
    '-c',
    'shared_buffers=16MB',
  ]);
  await until('postgres', async () => (await run(join(bin, 'pg_isready'), ['-h', '127.0.0.1', '-p', String(port)])).code === 0, output);
  return { type: 'postgres', host: '127.0.0.1', port, username: 'postgres', password, stop: stopper(child, dir) };
}
