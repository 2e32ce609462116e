/**
 * Doctor checks of the parts the edge plugin drives: nginx (installed, version, the configuration test, and
 * whether nginx.conf includes the agent's file), the ACME directory, and the clock, compared with the ACME
 * server's (certificates are only valid from their issue time: a host clock far off makes them look invalid).
 */
import { readFileSync } from 'node:fs';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { get as httpsGet } from 'node:https';
import { join } from 'node:path';
import { execa } from 'execa';
import type { CheckResult, DoctorCheck } from '@agent/sdk';
import type { EdgeConfig } from './config.js';
import { NGINX_FIX, type NginxApplier } from './nginx/apply.js';

/** Clock skew beyond which the clock check warns, and beyond which it fails (ACME servers backdate a little). */
const SKEW_WARNING_S = 5;
const SKEW_FAILED_S = 60;

const TIMEOUT_MS = 10_000;

interface DirectoryAnswer {
  status: number;
  /** The server's `Date` header, and the local time halfway through the request. */
  serverTime: number | null;
  localTime: number;
  body: string;
}

function fetchDirectory(url: string, caFile: string, signal: AbortSignal): Promise<DirectoryAnswer> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const options = { timeout: TIMEOUT_MS, signal, ...(caFile && url.startsWith('https:') ? { ca: readFileSync(caFile) } : {}) };
    const onResponse = (res: IncomingMessage) => {
      const localTime = (started + Date.now()) / 2;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        if (body.length < 65_536) body += c;
      });
      res.on('end', () => {
        const date = res.headers.date ? Date.parse(res.headers.date) : NaN;
        resolve({ status: res.statusCode ?? 0, serverTime: Number.isNaN(date) ? null : date, localTime, body });
      });
      res.on('error', reject);
    };
    const req = url.startsWith('https:') ? httpsGet(url, options, onResponse) : httpGet(url, options, onResponse);
    req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)));
    req.on('error', reject);
  });
}

/** `nginx -t` in the configured test command becomes `nginx -T` (dump the configuration), or null without `-t`. */
function dumpCommand(test: string[]): string[] | null {
  const at = test.indexOf('-t');
  return at < 0 ? null : [...test.slice(0, at), '-T', ...test.slice(at + 1)];
}

const CLOCK_FIX = 'synchronise the clock: apt-get install systemd-timesyncd (or chrony), then check with timedatectl';

/** Without a server to compare with: whether systemd says the clock is synchronised (null when it cannot say). */
async function timeSyncResult(signal: AbortSignal): Promise<CheckResult | null> {
  const r = await execa('timedatectl', ['show', '--property=NTPSynchronized', '--value'], {
    reject: false,
    all: true,
    timeout: TIMEOUT_MS,
    cancelSignal: signal,
  });
  const value = (r.all ?? '').trim();
  if (r.exitCode !== 0 || (value !== 'yes' && value !== 'no')) return null;
  return value === 'yes'
    ? { status: 'ok', detail: 'timedatectl: the system clock is synchronised (no ACME server to compare with)' }
    : { status: 'warning', detail: 'timedatectl: the system clock is not synchronised', fix: CLOCK_FIX };
}

export function edgeChecks(config: EdgeConfig, applier: NginxApplier): DoctorCheck[] {
  const proxy = config.proxy;
  const certs = config.certificates;
  const program = proxy.test_command[0]!;
  return [
    {
      id: 'edge.nginx',
      title: 'nginx: installed, configuration test, agent include',
      run: async (signal): Promise<CheckResult> => {
        const version = await execa(program, ['-v'], { reject: false, all: true, timeout: TIMEOUT_MS, cancelSignal: signal });
        if (version.exitCode === undefined && version.code === 'ENOENT')
          return { status: 'failed', detail: `nginx is not installed ('${program}' was not found)`, fix: NGINX_FIX };
        const name = /nginx\/\S+/.exec(version.all ?? '')?.[0] ?? program;
        const test = await applier.test();
        if (!test.ok)
          return {
            status: 'failed',
            detail: `${name}: \`${proxy.test_command.join(' ')}\` fails: ${test.message}`,
            fix: `correct what nginx names, then check with: ${proxy.test_command.join(' ')}`,
          };
        const dump = dumpCommand(proxy.test_command);
        if (dump) {
          const out = await execa(dump[0]!, dump.slice(1), { reject: false, all: true, timeout: TIMEOUT_MS, cancelSignal: signal });
          const included = (out.all ?? '').includes(`# configuration file ${join(proxy.config_dir, 'agent.conf')}:`);
          if (out.exitCode === 0 && !included) {
            return {
              status: 'failed',
              detail: `${name}: the configuration test passes but does not include ${join(proxy.config_dir, 'agent.conf')}, so the agent's domains are not served`,
              fix: `add \`include ${join(proxy.config_dir, 'agent.conf')};\` inside the http {} block of nginx.conf, then: ${proxy.reload_command.join(' ')}`,
            };
          }
        }
        return { status: 'ok', detail: `${name}: configuration test passes${dump ? `, includes ${join(proxy.config_dir, 'agent.conf')}` : ''}` };
      },
    },
    {
      id: 'edge.acme',
      title: 'ACME directory reachable',
      run: async (signal): Promise<CheckResult> => {
        const fix = `allow outbound HTTPS to ${new URL(certs.directory_url).host}, or set certificates.directory_url (and certificates.directory_ca_file for a private CA)`;
        let answer: DirectoryAnswer;
        try {
          answer = await fetchDirectory(certs.directory_url, certs.directory_ca_file, signal);
        } catch (err) {
          return { status: 'failed', detail: `${certs.directory_url}: ${(err as Error).message}`, fix };
        }
        let directory: { newNonce?: unknown; newAccount?: unknown; newOrder?: unknown } = {};
        try {
          directory = JSON.parse(answer.body) as typeof directory;
        } catch {
          // not JSON: reported below
        }
        if (answer.status !== 200 || !directory.newNonce || !directory.newAccount || !directory.newOrder) {
          return { status: 'failed', detail: `${certs.directory_url} answered ${answer.status} without an ACME directory`, fix };
        }
        return { status: 'ok', detail: `${certs.directory_url}: ACME directory` };
      },
    },
    {
      id: 'edge.clock',
      title: 'Clock skew (against the ACME server)',
      run: async (signal): Promise<CheckResult> => {
        let answer: DirectoryAnswer | null = null;
        let unreachable = '';
        try {
          answer = await fetchDirectory(certs.directory_url, certs.directory_ca_file, signal);
        } catch (err) {
          unreachable = (err as Error).message;
        }
        if (!answer || answer.serverTime === null) {
          return (
            (await timeSyncResult(signal)) ?? {
              status: 'skipped',
              detail: answer
                ? `${certs.directory_url} sends no Date header to compare clocks with`
                : `the ACME server is not reachable to compare clocks with (${unreachable})`,
            }
          );
        }
        // The Date header has whole seconds: up to 1 s of difference is no skew.
        const skew = (answer.localTime - answer.serverTime) / 1000;
        const text = `this host is ${Math.abs(skew).toFixed(1)} s ${skew >= 0 ? 'ahead of' : 'behind'} ${new URL(certs.directory_url).host}`;
        const fix = CLOCK_FIX;
        if (Math.abs(skew) > SKEW_FAILED_S) return { status: 'failed', detail: text, fix };
        if (Math.abs(skew) > SKEW_WARNING_S) return { status: 'warning', detail: text, fix };
        return { status: 'ok', detail: text };
      },
    },
  ];
}
