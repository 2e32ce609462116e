/**
 * Compose through its CLI: `docker compose` (v2) or `docker-compose` (v1), detected once at start.
 * Always an argv array, cwd = the deployment folder, project name = the deployment name.
 */
import { execa } from 'execa';
import type { ComposeRunResult } from '@agent/sdk';

const OUTPUT_LIMIT = 256 * 1024;

export type ComposeChoice = 'auto' | 'docker compose' | 'docker-compose';

async function works(argv: string[]): Promise<boolean> {
  try {
    const r = await execa(argv[0]!, [...argv.slice(1), 'version'], { reject: false, timeout: 15_000 });
    return r.exitCode === 0;
  } catch {
    return false;
  }
}

/** The compose command to use, or null when none is installed. */
export async function detectCompose(choice: ComposeChoice): Promise<string[] | null> {
  const candidates = choice === 'docker compose' ? [['docker', 'compose']] : choice === 'docker-compose' ? [['docker-compose']] : [['docker', 'compose'], ['docker-compose']];
  for (const argv of candidates) if (await works(argv)) return argv;
  return null;
}

export interface ComposeRunOptions {
  signal?: AbortSignal;
  onLine?: (line: string) => void;
  env?: Record<string, string>;
}

/**
 * Compose interpolates `${VAR}` from the process environment before `.env`: it gets a minimal environment so
 * the agent's own variables never leak into deployments.
 */
export function baseEnv(dockerHost: string | null): Record<string, string> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: process.env.HOME ?? '/root', LANG: 'C.UTF-8' };
  if (dockerHost) env.DOCKER_HOST = dockerHost;
  if (process.env.DOCKER_CONFIG) env.DOCKER_CONFIG = process.env.DOCKER_CONFIG;
  return env;
}

export async function runCompose(command: string[], dockerHost: string | null, project: string, dir: string, args: string[], options: ComposeRunOptions = {}): Promise<ComposeRunResult> {
  const child = execa(command[0]!, [...command.slice(1), '--project-name', project, ...args], {
    cwd: dir,
    env: { ...baseEnv(dockerHost), ...(options.env ?? {}) },
    extendEnv: false,
    reject: false,
    all: true,
    buffer: false,
    stdin: 'ignore',
    ...(options.signal ? { cancelSignal: options.signal } : {}),
    forceKillAfterDelay: 10_000,
  });
  let output = '';
  let partial = '';
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
  return { exit_code: result.exitCode ?? (result.isCanceled ? 130 : 1), output };
}
