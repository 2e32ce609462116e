/**
 * The guard's `start-beside` (start-first redeploys), with the real compose CLI and engine: one more container of a
 * service from the checked model while the running one keeps running as it is; refused (409 CONTAINER_STALE, nothing
 * created) while a stopped container of another model could be started as it is by `--no-recreate`.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectCompose } from '../src/compose/cli.js';
import { ComposeGuard } from '../src/compose/guard.js';
import { realEngine } from './guard-engine.js';

const project = `sb${randomBytes(3).toString('hex')}`;
const log = { debug() {}, info() {}, warn() {}, error() {} };
const compose = (marker: string) => `services:
  web:
    image: agent-test/busybox:latest
    command: ["sleep", "3600"]
    environment:
      MARKER: "${marker}"
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

/** The project's containers: id, state and the MARKER its model gave it. */
async function containers(): Promise<{ id: string; state: string; marker: string }[]> {
  const ids = (await execa('docker', ['ps', '-aq', '--no-trunc', '--filter', `label=com.docker.compose.project=${project}`])).stdout
    .split('\n')
    .filter(Boolean);
  const out = [];
  for (const id of ids) {
    const [state, env] = (await execa('docker', ['inspect', '-f', '{{.State.Status}}|{{json .Config.Env}}', id])).stdout.split('|');
    out.push({ id, state: state!, marker: (JSON.parse(env!) as string[]).find((e) => e.startsWith('MARKER='))!.slice(7) });
  }
  return out;
}

describe("the guard's start-beside", () => {
  let guard: ComposeGuard;
  let root: string;
  let dir: string;

  beforeAll(async () => {
    const command = await detectCompose('auto');
    if (!command) throw new Error('compose is needed for this test');
    root = mkdtempSync(join(tmpdir(), 'agent-start-beside-'));
    dir = join(root, project);
    mkdirSync(dir);
    guard = new ComposeGuard({ root: join(root, 'private'), dockerHost: null, command: async () => command, engine: realEngine(), log });
  });
  afterAll(async () => {
    const ids = (await execa('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${project}`])).stdout.split('\n').filter(Boolean);
    if (ids.length) await execa('docker', ['rm', '-f', ...ids], { reject: false });
    await execa('docker', ['network', 'rm', `${project}_default`], { reject: false });
    rmSync(root, { recursive: true, force: true });
  });

  it('starts one more container from the checked model beside the running one, and refuses while a stopped one of another model is there', async () => {
    const a = await guard.check({ project, dir, content: compose('a') });
    expect((await guard.run(a, { command: 'up' })).exit_code).toBe(0);
    const [old] = await containers();
    expect(old).toMatchObject({ state: 'running', marker: 'a' });

    // A new model: the running container of the old one keeps running untouched, the new one is of the new model.
    const b = await guard.check({ project, dir, content: compose('b') });
    const beside = await guard.run(b, { command: 'start-beside', service: 'web' });
    expect(beside.exit_code, beside.output).toBe(0);
    const both = await containers();
    expect(both).toHaveLength(2);
    expect(both.find((c) => c.id === old!.id)).toMatchObject({ state: 'running', marker: 'a' });
    expect(both.find((c) => c.id !== old!.id)).toMatchObject({ state: 'running', marker: 'b' });

    // Stopped, the container of model a would be started as it is by `--no-recreate`: refused, nothing created.
    await execa('docker', ['stop', old!.id]);
    const c = await guard.check({ project, dir, content: compose('c') });
    await expect(guard.run(c, { command: 'start-beside', service: 'web' })).rejects.toMatchObject({ status: 409, code: 'CONTAINER_STALE' });
    expect((await containers()).map((x) => x.id).sort()).toEqual(both.map((x) => x.id).sort());
    expect((await containers()).find((x) => x.id === old!.id)!.state).toBe('exited');
    // An unknown service is refused like for any command.
    await expect(guard.run(c, { command: 'start-beside', service: 'nope' })).rejects.toMatchObject({ status: 400 });
  }, 120_000);
});
