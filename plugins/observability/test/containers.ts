/** Test containers on the real engine: labelled `agent.test=1`, unique names, removed by `removeAll`. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { waitFor } from '../../../test/helpers/net.js';

const run = promisify(execFile);

export async function docker(...args: string[]): Promise<string> {
  const { stdout } = await run('docker', args, { maxBuffer: 16 * 1024 * 1024 });
  return stdout.trim();
}

export interface ContainerSpec {
  name: string;
  deployment?: string;
  service?: string;
  labels?: Record<string, string>;
  /** Extra `docker run` options (argv). */
  options?: string[];
  /** The command, run by busybox sh; `trap` makes it stop quickly on SIGTERM. */
  script: string;
}

export const IMAGE = 'agent-test/busybox:latest';

export async function runContainer(spec: ContainerSpec): Promise<string> {
  const labels = {
    'agent.test': '1',
    ...(spec.deployment ? { 'com.docker.compose.project': spec.deployment, 'com.docker.compose.service': spec.service ?? 'app' } : {}),
    ...spec.labels,
  };
  const args = [
    'run',
    '-d',
    '--name',
    spec.name,
    ...Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
    ...(spec.options ?? []),
    IMAGE,
    'sh',
    '-c',
    `trap 'exit 0' TERM; ${spec.script}`,
  ];
  return docker(...args);
}

export async function removeContainers(names: string[]): Promise<void> {
  if (names.length === 0) return;
  await run('docker', ['rm', '-f', ...names]).catch(() => undefined);
}

/** Polls until `fn` holds (30 s, every 250 ms by default). */
export const poll = <T>(fn: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 30_000, everyMs = 250): Promise<T> =>
  waitFor(fn, what, timeoutMs, everyMs);
