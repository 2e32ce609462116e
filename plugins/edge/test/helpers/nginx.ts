/**
 * A real nginx (Debian's package) for one test file: temp prefix, random loopback ports, a main config that
 * includes the agent's folder. Workers run as www-data like a host install, so file permissions are exercised.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { freePort, waitFor } from './ports.js';

export interface TestNginx {
  prefix: string;
  configDir: string;
  httpPort: number;
  httpsPort: number;
  accessLog: string;
  errorLog: string;
  conf: string;
  /** The agent's `proxy` config section for this instance. */
  proxyConfig: Record<string, unknown>;
  stop(): Promise<void>;
}

export const NGINX = '/usr/sbin/nginx';

export async function startNginx(): Promise<TestNginx> {
  const prefix = mkdtempSync(join(tmpdir(), 'edge-nginx-'));
  chmodSync(prefix, 0o755);
  const configDir = join(prefix, 'agent');
  for (const d of ['logs', 'tmp', 'agent', 'extra']) mkdirSync(join(prefix, d), { recursive: true, mode: 0o755 });
  const [httpPort, httpsPort] = [await freePort(), await freePort()];
  const conf = join(prefix, 'nginx.conf');
  const accessLog = join(prefix, 'logs', 'agent-access.log');
  const errorLog = join(prefix, 'logs', 'error.log');
  const asRoot = process.getuid?.() === 0;
  writeFileSync(
    conf,
    [
      asRoot ? 'user www-data www-data;' : '',
      'worker_processes 1;',
      `pid ${join(prefix, 'nginx.pid')};`,
      `error_log ${errorLog} notice;`,
      'events { worker_connections 512; }',
      'http {',
      '    include /etc/nginx/mime.types;',
      '    default_type application/octet-stream;',
      '    access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `    ${t}_temp_path ${join(prefix, 'tmp', t)};`),
      '    server_names_hash_bucket_size 128;',
      `    include ${join(configDir, 'agent.conf')};`,
      // Lets a test break the configuration outside the agent's folder (rollback tests).
      `    include ${join(prefix, 'extra')}/*.conf;`,
      '}',
      '',
    ].join('\n'),
  );
  // nginx needs the included file to exist before the agent writes the real one.
  writeFileSync(join(configDir, 'agent.conf'), '# placeholder until the agent renders its configuration\n');
  const base = [NGINX, '-p', prefix, '-c', conf, '-e', errorLog];
  const child: ChildProcess = spawn(NGINX, ['-p', prefix, '-c', conf, '-e', errorLog, '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
      try {
        return !!readFileSync(join(prefix, 'nginx.pid'), 'utf8').trim();
      } catch {
        return false;
      }
    },
    'nginx to start',
    10_000,
    50,
  );
  return {
    prefix,
    configDir,
    httpPort,
    httpsPort,
    accessLog,
    errorLog,
    conf,
    proxyConfig: {
      config_dir: configDir,
      test_command: [...base, '-t', '-q'],
      reload_command: [...base, '-s', 'reload'],
      http_port: httpPort,
      https_port: httpsPort,
      listen_address: '127.0.0.1',
      access_log: accessLog,
      error_log: errorLog,
      default_server: true,
    },
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGQUIT');
        await new Promise((r) => {
          const t = setTimeout(() => {
            child.kill('SIGKILL');
            r(null);
          }, 5000);
          child.once('exit', () => {
            clearTimeout(t);
            r(null);
          });
        });
      }
      rmSync(prefix, { recursive: true, force: true });
    },
  };
}

export interface HttpResult {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** A plain HTTP request to nginx with a chosen Host header and source address. */
export function hit(
  port: number,
  host: string,
  path: string,
  options: { localAddress?: string; headers?: Record<string, string>; method?: string } = {},
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        localAddress: options.localAddress,
        headers: { host, ...(options.headers ?? {}) },
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}
