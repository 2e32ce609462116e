/**
 * Runs the real `agentctl` binary (cli/dist/main.js) as a child process with its own config and cache
 * folders, the way a user's shell would.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../../test/helpers/agent.js';

export const CLI = join(REPO_ROOT, 'cli/dist/main.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliHome {
  /** XDG_CONFIG_HOME and XDG_CACHE_HOME live below it. */
  dir: string;
  env: Record<string, string>;
  run(args: string[], options?: { input?: string; env?: Record<string, string>; cwd?: string }): Promise<CliResult>;
  /** Starts a long-running command (follows); stop it with `child.kill('SIGINT')`. */
  start(
    args: string[],
    options?: { env?: Record<string, string> },
  ): { child: ReturnType<typeof spawn>; output: () => CliResult; exited: Promise<number | null> };
  remove(): void;
}

export function cliHome(): CliHome {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-test-'));
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: dir,
    XDG_CONFIG_HOME: join(dir, 'config'),
    XDG_CACHE_HOME: join(dir, 'cache'),
    NO_COLOR: '1',
  };
  const spawnCli = (args: string[], options: { env?: Record<string, string>; cwd?: string } = {}) =>
    spawn(process.execPath, [CLI, ...args], { cwd: options.cwd ?? dir, env: { ...env, ...(options.env ?? {}) }, stdio: ['pipe', 'pipe', 'pipe'] });
  return {
    dir,
    env,
    run: (args, options = {}) =>
      new Promise((resolve, reject) => {
        const child = spawnCli(args, options);
        let stdout = '';
        let stderr = '';
        child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
        child.once('error', reject);
        child.once('close', (code) => resolve({ code, stdout, stderr }));
        child.stdin!.end(options.input ?? '');
      }),
    start: (args, options = {}) => {
      const child = spawnCli(args, options);
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
      child.stdin!.end();
      const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
      return { child, output: () => ({ code: child.exitCode, stdout, stderr }), exited };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Polls until `check` returns a truthy value (no fixed sleeps). */
export async function waitFor<T>(check: () => T | Promise<T>, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
