/**
 * A real ACME server for one test file: Debian's pebble with pebble-challtestsrv as its DNS (every name resolves
 * to 127.0.0.1), HTTP-01 validation pointed at the test nginx. Its API certificate is made with openssl.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from './ports.js';

export interface TestPebble {
  directoryUrl: string;
  /** CA of pebble's API certificate (for `certificates.directory_ca_file`). */
  apiCaFile: string;
  /** Root that signs the certificates pebble issues (PEM). */
  issuerRoot(): Promise<string>;
  stop(): Promise<void>;
}

export function httpsText(url: string, ca: string | Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpsGet(url, { ca }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

export async function startPebble(httpPort: number): Promise<TestPebble> {
  const dir = mkdtempSync(join(tmpdir(), 'edge-pebble-'));
  const ssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=edge test pebble API CA',
  ]);
  ssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'key.pem', '-out', 'csr.pem', '-subj', '/CN=localhost']);
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  ssl(['x509', '-req', '-in', 'csr.pem', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'cert.pem', '-days', '2', '-extfile', 'ext.cnf']);

  const [acmePort, mgmtPort, dnsPort, dnsMgmtPort, tlsPort] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  writeFileSync(
    join(dir, 'pebble.json'),
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${acmePort}`,
        managementListenAddress: `127.0.0.1:${mgmtPort}`,
        certificate: join(dir, 'cert.pem'),
        privateKey: join(dir, 'key.pem'),
        httpPort,
        tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  const procs: ChildProcess[] = [];
  const start = (cmd: string, args: string[], env: Record<string, string> = {}) => {
    const p = spawn(cmd, args, { cwd: dir, env: { ...process.env, ...env }, stdio: 'ignore' });
    procs.push(p);
    return p;
  };
  start('pebble-challtestsrv', [
    '-dns01',
    `127.0.0.1:${dnsPort}`,
    '-http01',
    '',
    '-https01',
    '',
    '-tlsalpn01',
    '',
    '-management',
    `127.0.0.1:${dnsMgmtPort}`,
    '-defaultIPv4',
    '127.0.0.1',
    '-defaultIPv6',
    '',
  ]);
  start('pebble', ['-config', join(dir, 'pebble.json'), '-dnsserver', `127.0.0.1:${dnsPort}`, '-strict=false'], {
    PEBBLE_VA_NOSLEEP: '1',
    PEBBLE_WFE_NONCEREJECT: '0',
    PEBBLE_VA_ALWAYS_VALID: '0',
  });
  const ca = readFileSync(join(dir, 'ca.pem'));
  const directoryUrl = `https://127.0.0.1:${acmePort}/dir`;
  await waitFor(async () => (await httpsText(directoryUrl, ca)).status === 200, 'pebble directory', 15_000, 100);
  return {
    directoryUrl,
    apiCaFile: join(dir, 'ca.pem'),
    issuerRoot: async () => (await httpsText(`https://127.0.0.1:${mgmtPort}/roots/0`, ca)).body,
    stop: async () => {
      for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
      await Promise.all(procs.map((p) => (p.exitCode !== null ? null : new Promise((r) => p.once('exit', r)))));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
