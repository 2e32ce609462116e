/**
 * Doctor checks of the parts the edge plugin drives: nginx (which mode runs and where its files are, installed,
 * version, the configuration test; for the host's nginx whether nginx.conf includes the agent's file, for the own
 * instance whether its master runs), the ACME directory, and the clock, compared with the ACME server's
 * (certificates are only valid from their issue time: a host clock far off makes them look invalid).
 */
import { readFileSync } from 'node:fs';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { get as httpsGet } from 'node:https';
import { join } from 'node:path';
import { execa } from 'execa';
import type { CheckResult, DoctorCheck } from '@agent/sdk';
import type { EdgeConfig } from './config.js';
import type { Edge } from './edge.js';
import { NGINX_FIX } from './nginx/apply.js';

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

/** Which nginx the agent drives and where its files are: the first words of the nginx check. */
export function modeSummary(edge: Edge): string {
  const p = edge.proxy;
  const ports = `HTTP :${p.httpPort}, HTTPS :${p.httpsPort}`;
  return edge.own
    ? `proxy.mode own (${p.reason}): the agent's own nginx on ${ports}, its files under ${edge.own.paths.prefix} (nginx.conf, agent/, logs/)`
    : `proxy.mode system (${p.reason}): the host's nginx on ${ports}, the agent's files in ${p.configDir}`;
}

export function edgeChecks(edge: Edge, certs: EdgeConfig['certificates']): DoctorCheck[] {
  const control = edge.applier.control;
  return [
    {
      id: 'edge.nginx',
      title: 'nginx: proxy mode, installed, configuration test, agent include',
      run: async (signal): Promise<CheckResult> => {
        const mode = modeSummary(edge);
        const program = control.program;
        const testLine = control.testCommand().join(' ');
        const version = await execa(program, ['-v'], { reject: false, all: true, timeout: TIMEOUT_MS, cancelSignal: signal });
        if (version.exitCode === undefined && version.code === 'ENOENT')
          return { status: 'failed', detail: `${mode}; nginx is not installed ('${program}' was not found)`, fix: NGINX_FIX };
        const name = /nginx\/\S+/.exec(version.all ?? '')?.[0] ?? program;
        const test = await edge.applier.test();
        if (!test.ok)
          return {
            status: 'failed',
            detail: `${mode}; ${name}: \`${testLine}\` fails: ${test.message}`,
            fix: `correct what nginx names, then check with: ${testLine}`,
          };
        if (edge.own) {
          const pid = edge.own.pid;
          if (!pid)
            return {
              status: 'failed',
              detail: `${mode}; ${name}: the configuration test passes but the own nginx is not running`,
              fix: `see ${edge.proxy.errorLog} and the agent's log; restarting the agent starts it (a port in use: set proxy.http_port / proxy.https_port)`,
            };
          return { status: 'ok', detail: `${mode}; ${name}: configuration test passes, master pid ${pid}` };
        }
        const dump = dumpCommand(control.testCommand());
        const entry = join(edge.proxy.configDir, 'agent.conf');
        if (dump) {
          const out = await execa(dump[0]!, dump.slice(1), { reject: false, all: true, timeout: TIMEOUT_MS, cancelSignal: signal });
          const included = (out.all ?? '').includes(`# configuration file ${entry}:`);
          if (out.exitCode === 0 && !included) {
            return {
              status: 'failed',
              detail: `${mode}; ${name}: the configuration test passes but does not include ${entry}, so the agent's domains are not served`,
              fix: `add \`include ${entry};\` inside the http {} block of nginx.conf, then: ${edge.proxy.reloadCommand!.join(' ')}`,
            };
          }
        }
        return { status: 'ok', detail: `${mode}; ${name}: configuration test passes${dump ? `, includes ${entry}` : ''}` };
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
