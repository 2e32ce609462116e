/**
 * A real PowerDNS authoritative server for a test suite (Debian's pdns-server with the sqlite3 backend): DNS and
 * HTTP API on random loopback ports, database under a temp folder, caches off so changes show at once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../../test/helpers/net.js';

export interface PowerDns {
  apiUrl: string;
  apiKey: string;
  dnsPort: number;
  stop(): Promise<void>;
}

const asRoot = process.getuid?.() === 0;
const UNPRIVILEGED = { uid: 65534, gid: 65534 };
const SCHEMA = '/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql';

function run(cmd: string, args: string[], options: { stdinFile?: string; asUser?: boolean } = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], ...(asRoot && options.asUser ? UNPRIVILEGED : {}) });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    child.once('error', reject);
    // A program that exits without reading its input must not fail the suite with EPIPE.
    child.stdin.on('error', () => undefined);
    child.once('exit', (code) => resolve({ code: code ?? 1, out }));
    child.stdin.end();
  });
}

/** `dig +short` against the test server: the answer lines (empty when the name does not resolve). */
export async function dig(server: PowerDns, name: string, type: string): Promise<string[]> {
  const res = await run('dig', ['@127.0.0.1', '-p', String(server.dnsPort), '+short', '+norecurse', '+time=2', '+tries=2', name, type]);
  if (res.code !== 0) throw new Error(`dig failed: ${res.out}`);
  return res.out
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .sort();
}

export async function startPowerDns(apiKey: string): Promise<PowerDns> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-pdns-'));
  const db = join(dir, 'pdns.sqlite3');
  const schema = await run('sqlite3', [db, `.read ${SCHEMA}`]);
  if (schema.code !== 0) throw new Error(`sqlite3 schema failed: ${schema.out}`);
  if (asRoot) {
    chownSync(dir, UNPRIVILEGED.uid, UNPRIVILEGED.gid);
    chownSync(db, UNPRIVILEGED.uid, UNPRIVILEGED.gid);
  }
  const [dnsPort, apiPort] = [await freePort(), await freePort()];
  const child: ChildProcess = spawn(
    'pdns_server',
    [
      '--no-config',
      '--launch=gsqlite3',
      `--gsqlite3-database=${db}`,
      '--local-address=127.0.0.1',
      `--local-port=${dnsPort}`,
      '--api=yes',
      `--api-key=${apiKey}`,
      '--webserver=yes',
      '--webserver-address=127.0.0.1',
      `--webserver-port=${apiPort}`,
      '--webserver-allow-from=127.0.0.0/8',
      `--socket-dir=${dir}`,
      '--guardian=no',
      '--daemon=no',
      '--disable-syslog',
      '--write-pid=no',
      '--cache-ttl=0',
      '--negquery-cache-ttl=0',
      '--query-cache-ttl=0',
      '--consistent-backends=yes',
      '--security-poll-suffix=',
      '--loglevel=4',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], ...(asRoot ? UNPRIVILEGED : {}) },
  );
  let output = '';
  child.stdout!.on('data', (c) => (output = (output + c).slice(-10000)));
  child.stderr!.on('data', (c) => (output = (output + c).slice(-10000)));
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const end = Date.now() + 20000;
  for (;;) {
    try {
      const res = await fetch(`${apiUrl}/api/v1/servers/localhost`, { headers: { 'X-API-Key': apiKey } });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > end || child.exitCode !== null) throw new Error(`pdns_server did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    apiUrl,
    apiKey,
    dnsPort,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
