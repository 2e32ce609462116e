/**
 * The agent's own nginx (`proxy.mode: own`): one master process the agent starts, reloads and stops, with every
 * file below `<data>/plugins/edge/nginx` — its main configuration (written at every start), the agent's folder, the
 * pid file, the logs and the temporary files. Nothing of the host's nginx is read or written.
 *
 * - Started in the foreground (`daemon off`) as a child of the agent, so it is tracked by its process, in a process
 *   group of its own: nginx's workers outlive a master that was killed (kill -9, the OOM killer) and keep its ports,
 *   so the group is how they are found and ended. Stopped with the agent (graceful, then fast, then killed).
 * - After a `kill -9` of the agent it goes on running: the next start finds it by the pid file and ends it, once
 *   /proc says that pid is the master of this very configuration (a pid reused by another process is left alone),
 *   or, its master gone, the workers left in its process group.
 * - Reloads go to its master: SIGHUP, then the error log (level notice) says whether the new configuration was
 *   taken (`start worker process`) or refused (`[emerg]`), since a signal has no exit code. The applier has tested
 *   the files with `nginx -t` against this configuration first, and restores them when either fails.
 * - Its ports are checked at start: one in use is an error naming the port and the setting, before nginx runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, readFileSync, readdirSync } from 'node:fs';
import { mkdir, open, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';
import { execa } from 'execa';
import type { Logger } from '@agent/sdk';
import type { OwnPaths, ProxySettings } from '../settings.js';
import { commandResult, type ControlResult, type ProxyControl } from './apply.js';
import { oldWorkersSettled, workersOf } from './workers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Where nginx is installed when it is not in PATH (Debian's PATH of a user leaves out the sbin folders). */
const SBIN = ['/usr/sbin', '/usr/local/sbin', '/sbin', '/usr/local/nginx/sbin'];

/** `ssl_reject_handshake` (a TLS default server without a certificate) came with nginx 1.19.4. */
const REJECT_HANDSHAKE_SINCE = [1, 19, 4];

/** How long a start, a reload and each step of a stop may take. */
const START_MS = 10_000;
const RELOAD_MS = 15_000;
const STOP_STEP_MS = 3_000;

/** The port of a listening socket nginx could not open, from its `bind() to <addr>:<port> failed (<errno>: <text>)`. */
const BIND_FAILED = /bind\(\) to (\S+):(\d+) failed \((\d+): ([^)]*)\)/;

export class PortInUseError extends Error {
  readonly code = 'PROXY_PORT_IN_USE';
}

/** A program name looked up in PATH, then in the sbin folders; a path as it is. */
export function findProgram(name: string): string {
  if (name.includes('/')) return name;
  for (const dir of [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), ...SBIN]) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  return name;
}

/** The command line of a process (NULs as spaces), or null when there is no such process or it is a zombie. */
function commandLine(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the command name in parentheses, which may itself hold spaces and parentheses.
    if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') return null;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return null;
  }
}

/** Live processes of a process group (the master, which leads it, and its workers). */
function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(pgrp) === pgid && state !== 'Z') out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** SIGKILL to a process group: the workers a killed master left (nothing when there are none). */
const killGroup = (pgid: number) => {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // no process left in it
  }
};

const signal = (pid: number, sig: NodeJS.Signals) => {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
};

/** Whether a TCP port can be listened on at `host`: null when it can, else the error code (EADDRINUSE, EACCES). */
function probePort(port: number, host: string): Promise<string | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'EADDRINUSE'));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(null)));
  });
}

function versionAtLeast(version: string, min: number[]): boolean {
  const parts = version.split('.').map(Number);
  for (let i = 0; i < min.length; i++) {
    const a = parts[i] ?? 0;
    if (a !== min[i]) return a > min[i]!;
  }
  return true;
}

export class OwnNginx implements ProxyControl {
  readonly paths: OwnPaths;
  program: string;
  /** `nginx/1.22.1`, once `prepare` ran and found it. */
  version: string | null = null;
  private child: ChildProcess | null = null;
  private closed = false;
  /** Times of the restarts after an unexpected exit (bounded: a master that keeps dying is left down). */
  private restarts: number[] = [];
  /** Called when the master ended on its own (not stopped by the agent): the edge starts it again through its queue. */
  onUnexpectedExit: (() => void) | null = null;

  constructor(
    private readonly settings: ProxySettings,
    private readonly log: Logger,
  ) {
    this.paths = settings.own!;
    this.program = findProgram(this.paths.program);
  }

  /** The master's pid while it runs. */
  get pid(): number | null {
    return this.child && this.child.exitCode === null && this.child.signalCode === null ? (this.child.pid ?? null) : null;
  }

  /** nginx's options for this instance: its prefix, its configuration, its error log from the first line on. */
  private args(): string[] {
    return ['-p', `${this.paths.prefix}/`, '-c', this.paths.conf, '-e', this.settings.errorLog];
  }

  testCommand(): string[] {
    return [this.program, ...this.args(), '-t'];
  }

  dumpCommand(): string[] {
    return [this.program, ...this.args(), '-T'];
  }

  /**
   * Before the first render: folders, the main configuration, a stale instance of a killed agent ended, the ports
   * checked. `installed` false: no nginx (the edge reports it as today, the ports do not matter then). Throws
   * PortInUseError for a port taken by another process.
   */
  async prepare(): Promise<{ installed: boolean; rejectHandshake: boolean }> {
    this.program = findProgram(this.paths.program);
    for (const dir of [this.paths.prefix, this.paths.logsDir, this.paths.tempDir, this.settings.configDir]) await mkdir(dir, { recursive: true, mode: 0o755 });
    const v = await execa(this.program, ['-v'], { reject: false, all: true, timeout: 10_000 });
    if (v.exitCode === undefined && v.code === 'ENOENT') return { installed: false, rejectHandshake: false };
    this.version = /nginx\/(\S+)/.exec(v.all ?? '')?.[0] ?? null;
    const rejectHandshake = versionAtLeast(this.version?.slice('nginx/'.length) ?? '0', REJECT_HANDSHAKE_SINCE);
    await writeFile(this.paths.conf, this.mainConfig(), { mode: 0o644 });
    await this.endStale();
    await this.checkPorts();
    return { installed: true, rejectHandshake };
  }

  /** nginx.conf of the instance: everything below the prefix, the agent's folder included inside http {}. */
  mainConfig(): string {
    const q = (path: string) => `"${path}"`;
    const root = process.getuid?.() === 0;
    return [
      '# Generated by the agent at every start (proxy.mode: own): changes are overwritten. The agent starts this nginx,',
      '# tests the configuration with nginx -t before every reload, and stops it when the agent stops.',
      // In the foreground: the master is the agent's child, so the agent knows it is running and stops it.
      'daemon off;',
      ...(root
        ? [
            // The workers read files below the data folder (ACME challenges, htpasswd files, temporary files), which
            // is 0700 for its owner: as the agent's own user, they can. The host's nginx (proxy.mode: system) runs
            // its workers as www-data instead, with the agent's files in /etc/nginx/agent.
            'user root root;',
          ]
        : []),
      'worker_processes auto;',
      `pid ${q(this.paths.pidFile)};`,
      `lock_file ${q(join(this.paths.prefix, 'nginx.lock'))};`,
      // notice: the reload's outcome is read from this log (`reconfiguring`, `start worker process`, `[emerg]`).
      `error_log ${q(this.settings.errorLog)} notice;`,
      'events {',
      '    worker_connections 1024;',
      '}',
      'http {',
      // Only what nginx serves itself needs types (ACME challenges are text/plain); proxied answers keep theirs.
      '    default_type application/octet-stream;',
      '    types {',
      '        text/html html;',
      '        text/plain txt;',
      '    }',
      '    sendfile on;',
      '    server_tokens off;',
      '    access_log off;',
      '    server_names_hash_bucket_size 128;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `    ${t}_temp_path ${q(join(this.paths.tempDir, t))};`),
      `    include ${q(join(this.settings.configDir, 'agent.conf'))};`,
      '}',
      '',
    ].join('\n');
  }

  /** Whether `pid` is the master of this instance (its command line names this configuration). */
  private isOurs(pid: number): boolean {
    const cmd = commandLine(pid);
    return !!cmd && cmd.startsWith('nginx: master process') && cmd.includes(` -c ${this.paths.conf}`);
  }

  /** Ends the instance a killed agent left running (found by its pid file), and removes a stale pid file. */
  private async endStale(): Promise<void> {
    let pid = 0;
    try {
      pid = Number(readFileSync(this.paths.pidFile, 'utf8').trim());
    } catch {
      return;
    }
    if (Number.isInteger(pid) && pid > 1 && pid !== this.pid) {
      if (this.isOurs(pid)) {
        this.log.warn('ending the own nginx a previous run of the agent left running', { pid, pid_file: this.paths.pidFile });
        await this.terminate(pid, (p) => this.isOurs(p));
      } else {
        // Its master is gone (killed with the agent's, by the OOM killer): its workers may still hold the ports.
        const orphans = groupMembers(pid).filter((p) => commandLine(p)?.startsWith('nginx: worker process'));
        if (orphans.length) {
          this.log.warn("ending the own nginx's workers a killed master left running", { pids: orphans, pid_file: this.paths.pidFile });
          killGroup(pid);
          // Gone before the ports are checked: a SIGKILL is delivered at once, the sockets close when they exit.
          for (const until = Date.now() + STOP_STEP_MS; groupMembers(pid).length && Date.now() < until;) await sleep(25);
        }
      }
    }
    await rm(this.paths.pidFile, { force: true });
  }

  /**
   * QUIT (graceful), then TERM (fast), then KILL; `alive` tells when the master is gone. Its group is killed last:
   * workers a master leaves behind when it is killed.
   */
  private async terminate(pid: number, alive: (pid: number) => boolean): Promise<void> {
    const gone = async (ms: number) => {
      for (const until = Date.now() + ms; Date.now() < until; await sleep(25)) if (!alive(pid)) return true;
      return !alive(pid);
    };
    try {
      signal(pid, 'SIGQUIT');
      if (await gone(STOP_STEP_MS)) return;
      signal(pid, 'SIGTERM');
      if (await gone(STOP_STEP_MS)) return;
      this.log.warn('the own nginx did not stop: killing it', { pid });
      killGroup(pid);
      await gone(STOP_STEP_MS);
    } finally {
      killGroup(pid);
      for (const until = Date.now() + STOP_STEP_MS; groupMembers(pid).length && Date.now() < until;) await sleep(25);
    }
  }

  private portProblem(port: number, address: string, code: string): string {
    const key = port === this.settings.httpPort ? 'http_port' : 'https_port';
    const where = `${address || '0.0.0.0'}:${port}`;
    const change = `set proxy.${key} to another port (agent.yaml, or AGENT__proxy__${key}=<port>)`;
    if (code === 'EACCES' || code === '13') return `port ${port} (proxy.${key}) cannot be opened on ${where}: a port below 1024 needs root; ${change}`;
    if (code === 'EADDRNOTAVAIL' || code === '99') return `proxy.listen_address '${address}' is not an address of this host (${where}, proxy.${key})`;
    return `port ${port} (proxy.${key}) is in use on ${where} by another process (another agent's nginx?): stop it, or ${change}`;
  }

  /** Both ports must be free at start (the default server holds the HTTPS one too, see render.ts). */
  private async checkPorts(): Promise<void> {
    const host = this.settings.listenAddress || '0.0.0.0';
    for (const port of [this.settings.httpPort, this.settings.httpsPort]) {
      const code = await probePort(port, host);
      if (code) throw new PortInUseError(this.portProblem(port, this.settings.listenAddress, code));
    }
  }

  /** nginx's message, with a port it could not open named by its setting. */
  private explain(output: string): string {
    const bind = BIND_FAILED.exec(output);
    if (bind) {
      const address = bind[1]!.replace(/^\[|\]$/g, '');
      return this.portProblem(Number(bind[2]), address === '0.0.0.0' ? '' : address, bind[3]!);
    }
    return commandResult({ exitCode: 1, all: output }).message;
  }

  async test(): Promise<ControlResult> {
    const [program, ...args] = this.testCommand();
    return commandResult(await execa(program!, args, { reject: false, all: true, timeout: 30_000 }));
  }

  /** Starts the master when it does not run (the first apply, or after it ended), else reloads it. */
  async reload(): Promise<ControlResult> {
    return this.pid ? this.hangUp(this.pid) : this.start();
  }

  private async start(): Promise<ControlResult> {
    if (this.closed) return { ok: false, missing: false, message: 'the agent is stopping: the own nginx is not started again' };
    // A pid file without its process (a crash): nginx would take it for a running instance on -s, not on a start.
    await rm(this.paths.pidFile, { force: true });
    // A process group of its own (see above); the agent ends it, a Ctrl-C on the agent's terminal does not.
    const child = spawn(this.program, this.args(), { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => {
      if (stderr.length < 65_536) stderr += c.toString();
    });
    const outcome = await new Promise<ControlResult>((resolve) => {
      let done = false;
      const finish = (r: ControlResult) => {
        if (done) return;
        done = true;
        clearInterval(poll);
        clearTimeout(timer);
        resolve(r);
      };
      child.once('error', (err: NodeJS.ErrnoException) =>
        finish(
          err.code === 'ENOENT'
            ? { ok: false, missing: true, message: `'${this.program}' was not found` }
            : { ok: false, missing: false, message: err.message },
        ),
      );
      child.once('exit', (code, sig) => {
        killGroup(child.pid!);
        finish({ ok: false, missing: false, message: this.explain(stderr) || `nginx exited at start (${sig ?? `exit ${code}`})` });
      });
      // nginx writes its pid file once its sockets are open and the configuration is loaded.
      const poll = setInterval(() => {
        try {
          if (readFileSync(this.paths.pidFile, 'utf8').trim() === String(child.pid)) finish({ ok: true, missing: false, message: 'started' });
        } catch {
          // not yet
        }
      }, 25);
      const timer = setTimeout(() => {
        killGroup(child.pid!);
        finish({ ok: false, missing: false, message: `nginx did not start within ${START_MS / 1000} s: ${this.explain(stderr) || 'no output'}` });
      }, START_MS);
    });
    if (!outcome.ok) return outcome;
    if (this.closed) {
      // The agent began to stop while this started: stop() found nothing to stop, so this one must not stay.
      await this.terminate(child.pid!, () => child.exitCode === null && child.signalCode === null);
      return { ok: false, missing: false, message: 'the agent is stopping: the own nginx is not started again' };
    }
    this.child = child;
    this.log.info('own nginx started', { pid: child.pid, http_port: this.settings.httpPort, https_port: this.settings.httpsPort, prefix: this.paths.prefix });
    child.once('exit', (code, sig) => {
      if (this.child !== child) return; // stopped by the agent
      this.child = null;
      // Killed, its workers are left serving the old configuration on its ports: they go before a new start.
      killGroup(child.pid!);
      // The agent may be stopping (an operator ended both): only a master that ended while the agent goes on
      // running is started again.
      setTimeout(() => {
        if (this.closed || this.child) return;
        const now = Date.now();
        this.restarts = this.restarts.filter((t) => now - t < 60_000);
        const again = this.restarts.length < 3;
        this.log.error(`the own nginx exited (${sig ?? `exit ${code}`})${again ? ': starting it again' : ''}`, {
          pid: child.pid,
          error_log: this.settings.errorLog,
          ...(again ? {} : { fix: 'see the error log; the next change of the proxy configuration starts it again' }),
        });
        if (again) {
          this.restarts.push(now);
          this.onUnexpectedExit?.();
        }
      }, 1000).unref();
    });
    return outcome;
  }

  /** SIGHUP to the master, then its error log tells whether the new configuration was taken. */
  private async hangUp(pid: number): Promise<ControlResult> {
    const from = (await stat(this.settings.errorLog).catch(() => null))?.size ?? 0;
    const before = await workersOf(pid);
    process.kill(pid, 'SIGHUP');
    const until = Date.now() + RELOAD_MS;
    while (Date.now() < until) {
      await sleep(20);
      if (this.pid !== pid) return { ok: false, missing: false, message: 'the own nginx exited during the reload' };
      const text = await readFrom(this.settings.errorLog, from);
      const at = text.indexOf('reconfiguring');
      if (at < 0) continue;
      const lines = text.slice(at).split('\n');
      if (lines.some((l) => l.includes('start worker process'))) {
        // The new configuration is loaded; it is in force once the old workers stopped accepting (workers.ts).
        if (!(await oldWorkersSettled(before, until))) this.log.warn('old nginx workers still accept connections after the reload', { pid });
        return { ok: true, missing: false, message: 'reloaded' };
      }
      const emerg = lines.filter((l) => l.includes('[emerg]'));
      if (emerg.length) return { ok: false, missing: false, message: this.explain(emerg.join('\n')) };
    }
    return { ok: false, missing: false, message: `the own nginx did not confirm the reload within ${RELOAD_MS / 1000} s (see ${this.settings.errorLog})` };
  }

  /** Stops the master with the agent; no start after this. */
  async stop(): Promise<void> {
    this.closed = true;
    const child = this.child;
    this.child = null;
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
    let exited = false;
    child.once('exit', () => (exited = true));
    await this.terminate(child.pid, () => !exited);
    this.log.info('own nginx stopped', { pid: child.pid });
  }
}

/** What was appended to a file after `from` (bounded). */
async function readFrom(path: string, from: number): Promise<string> {
  const fh = await open(path, 'r').catch(() => null);
  if (!fh) return '';
  try {
    const { size } = await fh.stat();
    // Truncated or replaced meanwhile: read it from the start.
    const start = size < from ? 0 : from;
    const len = Math.min(size - start, 1024 * 1024);
    const buf = Buffer.alloc(len);
    await fh.read(buf, 0, len, start);
    return buf.toString('utf8');
  } finally {
    await fh.close();
  }
}
