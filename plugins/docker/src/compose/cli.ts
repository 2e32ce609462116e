/**
 * The compose CLI: `docker compose` (v2) or `docker-compose` (v1), detected once. Always an argv array and a fixed,
 * minimal environment: nothing of the agent's own environment can reach compose's interpolation.
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { execa } from 'execa';
import type { ComposeRunResult } from '../api.js';

const OUTPUT_LIMIT = 256 * 1024;

export type ComposeChoice = 'auto' | 'docker compose' | 'docker-compose';

async function works(argv: string[]): Promise<boolean> {
  try {
    const r = await execa(argv[0]!, [...argv.slice(1), 'version'], { reject: false, timeout: 15_000, env: baseEnv(null), extendEnv: false });
    return r.exitCode === 0;
  } catch {
    return false;
  }
}

/** The absolute path of a program on the agent's PATH (compose later runs without any PATH of its own). */
function locate(program: string): string | null {
  for (const dir of (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(delimiter)) {
    if (!dir) continue;
    const path = join(dir, program);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      /* not here */
    }
  }
  return null;
}

/** The compose command to use (absolute program path), or null when none is installed. */
export async function detectCompose(choice: ComposeChoice): Promise<string[] | null> {
  const candidates =
    choice === 'docker compose' ? [['docker', 'compose']] : choice === 'docker-compose' ? [['docker-compose']] : [['docker', 'compose'], ['docker-compose']];
  for (const [program, ...rest] of candidates) {
    const path = locate(program!);
    if (path && (await works([path, ...rest]))) return [path, ...rest];
  }
  return null;
}

/** `v1` is the standalone `docker-compose`, `v2` the docker CLI plugin. */
export const flavourOf = (command: string[]): 'v1' | 'v2' => (command.length === 1 ? 'v1' : 'v2');

export interface ComposeRunOptions {
  signal?: AbortSignal;
  onLine?: (line: string) => void;
  /** Replaces the environment (see `interpolationEnv`). */
  env?: Record<string, string>;
  /** Also collect stdout alone, unbounded (`config` writes the model there, warnings go to stderr). */
  stdout?: boolean;
}

/**
 * The whole environment compose gets: where programs are, a home for the client's config (registry logins),
 * the engine address. Compose reads `${VAR}` from its environment before any env file, so nothing else is passed.
 */
export function baseEnv(dockerHost: string | null): Record<string, string> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: process.env.HOME ?? '/root', LANG: 'C.UTF-8' };
  if (dockerHost) env.DOCKER_HOST = dockerHost;
  if (process.env.DOCKER_CONFIG) env.DOCKER_CONFIG = process.env.DOCKER_CONFIG;
  return env;
}

/**
 * The environment of `compose config`, the one call that interpolates: nothing the agent's process holds, only a
 * locale (compose v1 is Python) and, for the docker CLI, a config folder of the guard's own. `${LANG}` is the only
 * variable a compose file can use besides its project's own `.env`.
 */
export function interpolationEnv(flavour: 'v1' | 'v2', configDir: string): Record<string, string> {
  return flavour === 'v1' ? { LANG: 'C.UTF-8' } : { LANG: 'C.UTF-8', DOCKER_CONFIG: configDir };
}

/** Runs compose with `args` (global options and subcommand) in `cwd`; output is collected (bounded) and streamed by line. */
export async function runCompose(
  command: string[],
  dockerHost: string | null,
  cwd: string,
  args: string[],
  options: ComposeRunOptions = {},
): Promise<ComposeRunResult & { stdout: string }> {
  const child = execa(command[0]!, [...command.slice(1), ...args], {
    cwd,
    env: options.env ?? baseEnv(dockerHost),
    extendEnv: false,
    reject: false,
    all: true,
    buffer: false,
    stdin: 'ignore',
    ...(options.signal ? { cancelSignal: options.signal } : {}),
    // A cancelled job must end within 5 s (the jobs service's promise): SIGTERM, then SIGKILL 3 s later.
    forceKillAfterDelay: 3_000,
  });
  let output = '';
  let stdout = '';
  let partial = '';
  if (options.stdout) {
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      stdout += chunk;
    });
  }
  child.all!.setEncoding('utf8');
  child.all!.on('data', (chunk: string) => {
    output += chunk;
    if (output.length > OUTPUT_LIMIT) output = output.slice(-OUTPUT_LIMIT);
    if (options.onLine) {
      const lines = (partial + chunk).split(/\r?\n/);
      partial = lines.pop()!;
      for (const line of lines) if (line) options.onLine(line);
    }
  });
  const result = await child;
  if (options.onLine && partial) options.onLine(partial);
  return { exit_code: result.exitCode ?? (result.isCanceled ? 130 : 1), output, stdout };
}
