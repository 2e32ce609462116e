/**
 * The app runner alone, without an agent: real child processes (test/fixtures/probe-app.mjs) started, watched,
 * restarted with backoff and stopped. What only a whole agent shows (the proxy, the lifeline after a kill -9 of the
 * agent) is tested with examples/hello-app.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AppPlugin, AppState, Logger } from '@agent/sdk';
import type { AppHost as AppHostClass } from '../src/app-host.js';

const FIXTURES = join(import.meta.dirname, 'fixtures');

interface Line {
  level: 'debug' | 'info' | 'warn' | 'error';
  msg: string;
  fields: Record<string, unknown>;
}

function recordingLogger(): Logger & { lines: Line[] } {
  const lines: Line[] = [];
  const at =
    (level: Line['level']) =>
    (msg: string, fields: Record<string, unknown> = {}) =>
      void lines.push({ level, msg, fields });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

async function until<T>(what: string, fn: () => T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const probe = (mode: string, name = 'probe'): AppPlugin => ({
  plugin: name,
  packageDir: FIXTURES,
  app: { entry: 'probe-app.mjs', routes: [], env: { PROBE_MODE: mode } },
  config: { probe: { label: 'from config' } },
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('the app runner', () => {
  let AppHost: typeof AppHostClass;
  let dataDir: string;
  let hosts: AppHostClass[] = [];
  const execArgv = [...process.execArgv];

  beforeAll(async () => {
    // The runner passes on the agent's heap sizing, and only that, from the flags it was started with.
    process.execArgv.push('--max-semi-space-size=1', '--stack-size=2000', '--heap-growing-percent=20');
    ({ AppHost } = await import('../src/app-host.js'));
    process.execArgv.splice(0, process.execArgv.length, ...execArgv);
    dataDir = mkdtempSync(join(tmpdir(), 'apps-test-'));
  });
  afterEach(async () => {
    await Promise.all(hosts.map((h) => h.stopAll()));
    hosts = [];
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  const runner = (log: Logger, tokens: string[] = []) => {
    const host = new AppHost(
      log,
      dataDir,
      () => 'http://127.0.0.1:8090',
      async (name) => {
        const token = `token-${name}-${tokens.length + 1}`;
        tokens.push(token);
        return token;
      },
    );
    hosts.push(host);
    return host;
  };

  it('starts an app on a loopback port with its environment, a stdin pipe and its data folder', async () => {
    const log = recordingLogger();
    const tokens: string[] = [];
    const host = runner(log, tokens);
    host.start(probe('serve'));
    expect(host.state('probe')).toMatchObject({ name: 'probe', status: 'starting', restarts: 0, last_exit: null });
    const state = await until('the app to run', () => (host.state('probe')?.status === 'running' ? host.state('probe') : undefined));
    expect(state).toMatchObject({ pid: expect.any(Number), port: expect.any(Number) });
    expect(state.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(log.lines).toContainEqual({ level: 'info', msg: 'app running', fields: { app: 'probe', port: state.port, pid: state.pid } });

    const seen = (await (await fetch(`http://127.0.0.1:${state.port}/`)).json()) as {
      env: Record<string, string>;
      cwd: string;
      stdin_is_pipe: boolean;
      exec_argv: string[];
    };
    const appDataDir = join(dataDir, 'plugins', 'probe', 'app');
    expect(seen.env).toEqual({
      PROBE_MODE: 'serve',
      AGENT_APP_NAME: 'probe',
      AGENT_APP_HOST: '127.0.0.1',
      AGENT_APP_PORT: String(state.port),
      AGENT_APP_SECRET: state.secret,
      AGENT_APP_DATA_DIR: appDataDir,
      AGENT_APP_CONFIG: JSON.stringify({ probe: { label: 'from config' } }),
      AGENT_URL: 'http://127.0.0.1:8090',
      AGENT_APP_TOKEN: 'token-probe-1',
    });
    expect(tokens).toEqual(['token-probe-1']);
    expect(seen.cwd).toBe(FIXTURES);
    expect(seen.stdin_is_pipe).toBe(true);
    expect(seen.exec_argv).toEqual(['--max-semi-space-size=1', '--heap-growing-percent=20']);
    expect(statSync(appDataDir).mode & 0o777).toBe(0o700);
    expect(host.state('other')).toBeUndefined();
  });

  it("logs the app's JSON records at their level and other lines as app output", async () => {
    const log = recordingLogger();
    const host = runner(log);
    host.start(probe('serve'));
    await until('three lines of the app', () => log.lines.filter((l) => l.fields.app === 'probe' && l.msg !== 'app running').length >= 3);
    expect(log.lines).toEqual(
      expect.arrayContaining([
        { level: 'warn', msg: 'probe says', fields: { app: 'probe', answer: 42 } },
        { level: 'info', msg: 'app output', fields: { app: 'probe', line: 'a plain line' } },
        { level: 'warn', msg: 'app output', fields: { app: 'probe', line: 'a line on stderr' } },
      ]),
    );
  });

  it('restarts a crashed app with a doubling backoff, and stop cancels a pending restart', async () => {
    const log = recordingLogger();
    const tokens: string[] = [];
    const host = runner(log, tokens);
    host.start(probe('exit'));
    const first = await until('the first exit', () => (host.state('probe')?.status === 'crashed' ? host.state('probe') : undefined));
    expect(first).toMatchObject({ status: 'crashed', pid: null, restarts: 0, last_exit: { code: 3, signal: null, at: expect.any(String) } });
    const secret = first.secret;
    const exits = () => log.lines.filter((l) => l.msg === 'app exited; restarting').map((l) => l.fields.in_ms);
    await until('three exits', () => exits().length >= 3, 10_000);
    expect(exits()).toEqual([1000, 2000, 4000]);
    const state = host.state('probe') as AppState;
    expect(state).toMatchObject({ status: 'crashed', restarts: 2 });
    // One secret per run of the agent; a fresh token for every process.
    expect(state.secret).toBe(secret);
    expect(tokens).toEqual(['token-probe-1', 'token-probe-2', 'token-probe-3']);
    // Stopped while it waits 4 s before the next start: it is not started again.
    await host.stopAll();
    await new Promise((r) => setTimeout(r, 4500));
    expect(exits()).toHaveLength(3);
    expect(host.state('probe')).toMatchObject({ restarts: 2 });
    expect(tokens).toHaveLength(3);
  }, 30_000);

  it('stops every app with SIGTERM, then SIGKILL after 5 s; starts none once stopping', async () => {
    const log = recordingLogger();
    const host = runner(log);
    host.start(probe('serve', 'polite'));
    host.start(probe('ignore-term', 'stubborn'));
    await until('both apps to run', () => host.state('polite')?.status === 'running' && host.state('stubborn')?.status === 'running');
    const pids = [host.state('polite')!.pid!, host.state('stubborn')!.pid!];
    const started = Date.now();
    await host.stopAll();
    expect(Date.now() - started).toBeGreaterThanOrEqual(4900);
    expect(host.state('polite')).toMatchObject({ status: 'stopped', pid: null, last_exit: { code: null, signal: 'SIGTERM' } });
    expect(host.state('stubborn')).toMatchObject({ status: 'stopped', pid: null, last_exit: { code: null, signal: 'SIGKILL' } });
    expect(log.lines.some((l) => l.msg === 'probe ignores SIGTERM' || l.fields.line === 'probe ignores SIGTERM')).toBe(true);
    expect(pids.filter(alive)).toEqual([]);
    expect(log.lines.some((l) => l.msg === 'app exited; restarting')).toBe(false);
    host.start(probe('serve', 'late'));
    expect(host.state('late')).toBeUndefined();
  }, 20_000);
});
