/**
 * Applies a rendered configuration to the proxy: changed files are written to temp files and renamed into place,
 * `nginx -t` checks the whole configuration, a failure restores the previous files (nothing else changes) and
 * answers with nginx's message; success reloads nginx. Applies are serialised. How nginx is tested and reloaded is
 * the mode's (`ProxyControl`): the host's nginx through the configured commands, or the agent's own instance
 * (own.ts).
 */
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { execa } from 'execa';
import { HttpError, type Logger } from '@agent/sdk';
import { oldWorkersSettled, workersOf } from './workers.js';

export interface ApplyResult {
  changed: string[];
  removed: string[];
  reloaded: boolean;
}

/**
 * Files the agent owns at the top of the config folder; the folders whose content it owns entirely (the sites,
 * the contributors') are given with each call.
 */
const OWNED_FILES = ['agent.conf', 'default.conf'];

/** The outcome of a test or a reload: `missing` when nginx's program does not exist. */
export interface ControlResult {
  ok: boolean;
  missing: boolean;
  /** nginx's useful lines (or what the control found), for the answer and the log. */
  message: string;
}

/** How the applier tests and reloads the nginx that reads the files. */
export interface ProxyControl {
  /** The program run, for messages about a missing nginx. */
  readonly program: string;
  test(): Promise<ControlResult>;
  reload(): Promise<ControlResult>;
  /** argv that tests the whole configuration (`nginx -t`), for people and the doctor's dump. */
  testCommand(): string[];
}

/** A finished command as a ControlResult (the program missing: spawn failed with ENOENT). */
export function commandResult(r: { exitCode?: number; code?: string; all?: string }): ControlResult {
  return { ok: r.exitCode === 0, missing: notFound(r), message: nginxMessage(r.all ?? '') };
}

/** The host's nginx (`proxy.mode: system`): the configured test and reload commands. */
export class SystemControl implements ProxyControl {
  constructor(
    private readonly test_: string[],
    private readonly reload_: string[],
  ) {}

  get program(): string {
    return this.test_[0]!;
  }

  testCommand(): string[] {
    return this.test_;
  }

  private async run(argv: string[]): Promise<ControlResult> {
    const r = commandResult(await execa(argv[0]!, argv.slice(1), { reject: false, all: true, timeout: 30_000 }));
    return r.missing ? { ...r, message: nginxMissing(argv[0]!).message } : r;
  }

  test(): Promise<ControlResult> {
    return this.run(this.test_);
  }

  /** Runs the reload command; when nginx's master is found, waits until its old workers stopped accepting. */
  async reload(): Promise<ControlResult> {
    const master = await masterPid(this.test_);
    const before = master ? await workersOf(master) : [];
    const result = await this.run(this.reload_);
    if (result.ok && before.length > 0) await oldWorkersSettled(before, Date.now() + 15_000);
    return result;
  }
}

/**
 * The running master of the nginx the test command names: the `pid` file of its configuration (`-c FILE`, or the
 * packaged default), null when none can be read (then the reload is taken as done when its command returns).
 */
async function masterPid(testCommand: string[]): Promise<number | null> {
  const at = testCommand.indexOf('-c');
  const conf = at >= 0 ? testCommand[at + 1] : '/etc/nginx/nginx.conf';
  const text = conf ? await readFile(conf, 'utf8').catch(() => '') : '';
  const pidFile = /^\s*pid\s+([^;\s]+)\s*;/m.exec(text)?.[1] ?? '/run/nginx.pid';
  const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim());
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

export class NginxApplier {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly configDir: string,
    readonly control: ProxyControl,
    private readonly log: Logger,
  ) {}

  /** Runs `fn` alone: no other apply interleaves (state read → render → apply → commit stays consistent). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** The generated files currently on disk (relative path → content), in the top folder and the `owned` folders. */
  async current(owned: string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const f of OWNED_FILES) {
      const text = await readFile(join(this.configDir, f), 'utf8').catch(() => null);
      if (text !== null) out.set(f, text);
    }
    for (const dir of owned) {
      const entries = await readdir(join(this.configDir, dir), { recursive: true, withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        if (!e.isFile() || e.name.endsWith('.agent-tmp')) continue;
        const abs = join(e.parentPath, e.name);
        out.set(relative(this.configDir, abs), await readFile(abs, 'utf8'));
      }
    }
    return out;
  }

  /** Unified diff between what is on disk and `desired`. */
  async diff(desired: Map<string, string>, owned: string[]): Promise<{ diff: string; changed: string[]; removed: string[] }> {
    const current = await this.current(owned);
    const { changed, removed } = compare(current, desired);
    const parts = [...changed, ...removed]
      .sort()
      .map((f) =>
        createTwoFilesPatch(
          current.has(f) ? `a/${f}` : '/dev/null',
          desired.has(f) ? `b/${f}` : '/dev/null',
          current.get(f) ?? '',
          desired.get(f) ?? '',
          '',
          '',
          { context: 3 },
        ),
      );
    return { diff: parts.join(''), changed, removed };
  }

  /**
   * Writes `desired`, tests, reloads; restores the previous files when the test or the reload fails. Files of the
   * `owned` folders that `desired` lacks are removed; `secret` files are written 0640 and handed to `protect` before
   * they take their place: nginx opens some of them per request (htpasswd), so a worker must never find one it cannot
   * read (it would answer 500).
   */
  async apply(
    desired: Map<string, string>,
    options: { force?: boolean; owned: string[]; secret?: Set<string>; protect?: (path: string) => Promise<void> },
  ): Promise<ApplyResult> {
    const current = await this.current(options.owned);
    const { changed, removed } = compare(current, desired);
    if (changed.length === 0 && removed.length === 0 && !options.force) return { changed, removed, reloaded: false };
    // Write every new content to a temp file first, then swap them in with renames.
    for (const f of changed) {
      const abs = join(this.configDir, f);
      await mkdir(dirname(abs), { recursive: true, mode: 0o755 });
      const secret = options.secret?.has(f) ?? false;
      await writeFile(`${abs}.agent-tmp`, desired.get(f)!, { mode: secret ? 0o640 : 0o644 });
      if (secret) await options.protect?.(`${abs}.agent-tmp`);
    }
    for (const f of changed) await rename(join(this.configDir, `${f}.agent-tmp`), join(this.configDir, f));
    for (const f of removed) await rm(join(this.configDir, f), { force: true });

    const restore = async () => {
      for (const f of changed) {
        const abs = join(this.configDir, f);
        if (current.has(f)) await writeFile(abs, current.get(f)!);
        else await rm(abs, { force: true });
      }
      for (const f of removed) {
        const abs = join(this.configDir, f);
        await mkdir(dirname(abs), { recursive: true });
        await writeFile(abs, current.get(f)!);
      }
    };

    const test = await this.control.test();
    if (test.missing) {
      await restore();
      throw nginxMissing(this.control.program);
    }
    if (!test.ok) {
      await restore();
      this.log.warn('proxy configuration rejected by nginx; previous files restored', { error: test.message });
      throw new HttpError(400, 'PROXY_CONFIG_INVALID', `nginx rejected the configuration: ${test.message}`);
    }
    const reload = await this.control.reload();
    if (reload.missing) {
      await restore();
      throw nginxMissing(this.control.program);
    }
    if (!reload.ok) {
      await restore();
      this.log.error('proxy reload failed; previous files restored', { error: reload.message });
      throw new HttpError(502, 'PROXY_RELOAD_FAILED', `reloading the proxy failed: ${reload.message}`);
    }
    this.log.info('proxy configuration applied', { changed: changed.length, removed: removed.length });
    return { changed, removed, reloaded: true };
  }

  /** Runs the test alone (status endpoints, doctor). `installed` is false when nginx's program does not exist. */
  async test(): Promise<{ ok: boolean; installed: boolean; message: string }> {
    const r = await this.control.test();
    if (r.missing) return { ok: false, installed: false, message: nginxMissing(this.control.program).message };
    return { ok: r.ok, installed: true, message: r.message };
  }
}

export const NGINX_FIX =
  'install nginx (Debian: apt-get install nginx), or say where it is: proxy.nginx (proxy.mode: own) or proxy.test_command and proxy.reload_command (system)';

/** The program of a command does not exist (spawn failed with ENOENT), as opposed to nginx refusing the files. */
function notFound(result: { code?: string; exitCode?: number }): boolean {
  return result.exitCode === undefined && result.code === 'ENOENT';
}

/** 503 naming nginx: the proxy cannot be configured at all while it is not installed. */
export function nginxMissing(program: string): HttpError {
  return new HttpError(503, 'NGINX_UNAVAILABLE', `nginx is not installed: '${program}' was not found (${NGINX_FIX})`);
}

function compare(current: Map<string, string>, desired: Map<string, string>) {
  const changed = [...desired.keys()].filter((f) => current.get(f) !== desired.get(f)).sort();
  const removed = [...current.keys()].filter((f) => !desired.has(f)).sort();
  return { changed, removed };
}

/** The useful lines of nginx's output (the `[emerg]` ones), bounded. */
function nginxMessage(output: string): string {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const important = lines.filter((l) => /\[(emerg|alert|crit|error)\]/.test(l));
  return (
    (important.length ? important : lines)
      .join('; ')
      .replace(/^nginx: /, '')
      .slice(0, 1000) || 'no output'
  );
}
