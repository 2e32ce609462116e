/**
 * A real Docker registry (Debian's `docker-registry`, distribution v2) on a free loopback port with htpasswd
 * (bcrypt) authentication and temporary storage, plus a docker CLI with its own config folder so logins made here
 * never touch the user's `~/.docker`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { freePort } from '../../../test/helpers/net.js';

export interface TestRegistry {
  host: string;
  username: string;
  password: string;
  /** Runs the docker CLI with a private config folder. */
  docker(args: string[]): Promise<string>;
  stop(): Promise<void>;
}

export async function startRegistry(username = 'pusher', password = `Pw-${Math.random().toString(36).slice(2)}`): Promise<TestRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-test-registry-'));
  const dockerConfig = join(dir, 'docker-config');
  const htpasswd = (await execa('htpasswd', ['-Bbn', username, password])).stdout.trim();
  writeFileSync(join(dir, 'htpasswd'), htpasswd + '\n');
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  writeFileSync(
    join(dir, 'config.yml'),
    [
      'version: 0.1',
      'log: {level: error}',
      `storage: {filesystem: {rootdirectory: ${join(dir, 'data')}}, delete: {enabled: true}}`,
      `http: {addr: "${host}", secret: "${Math.random().toString(36).slice(2)}"}`,
      `auth: {htpasswd: {realm: agent-test, path: ${join(dir, 'htpasswd')}}}`,
      '',
    ].join('\n'),
  );
  const proc: ResultPromise = execa('docker-registry', ['serve', join(dir, 'config.yml')], { reject: false, stdio: ['ignore', 'pipe', 'pipe'], all: true });
  let output = '';
  proc.all?.on('data', (c: Buffer) => (output += c.toString()));
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      const res = await fetch(`http://${host}/v2/`);
      if (res.status === 401) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || proc.exitCode !== null) {
      proc.kill();
      throw new Error(`docker-registry did not start on ${host}:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host,
    username,
    password,
    docker: async (args) => (await execa('docker', args, { env: { DOCKER_CONFIG: dockerConfig } })).stdout,
    stop: async () => {
      proc.kill('SIGTERM');
      await proc;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
