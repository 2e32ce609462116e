// The docker service as consumer plugins see it, through a fixture plugin that exposes its methods over HTTP.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const id = randomBytes(4).toString('hex');
const box = `agent-test-svc-${id}`;

describe('docker service contract', () => {
  let agent: TestAgent;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agent-compose-'));
    agent = await startAgent({ plugins: ['docker', join(import.meta.dirname, 'probe-plugin')] });
    await execa('docker', ['run', '-d', '--name', box, '--label', 'agent.test=1', 'agent-test/busybox:latest', 'sh', '-c', 'echo started; exec sleep 3600']);
  });
  afterAll(async () => {
    await agent?.stop();
    await execa('docker', ['rm', '-f', box], { reject: false });
    await execa('docker', ['network', 'rm', `agent-test-net-${id}`], { reject: false });
    await execa('docker', ['rm', '-f', `svc${id}_one_1`, `svc${id}-one-1`], { reject: false });
    await execa('docker', ['network', 'rm', `svc${id}_default`], { reject: false });
    rmSync(dir, { recursive: true, force: true });
  });
  const probe = (path: string, body?: unknown) => agent.api(body === undefined ? 'GET' : 'POST', `/probe/${path}`, body === undefined ? {} : { body });

  it('answers info and the detected compose flavour', async () => {
    expect((await probe('info')).body.data).toMatchObject({ version: expect.any(String), api_version: expect.any(String) });
    expect(['v1', 'v2']).toContain((await probe('compose-flavour')).body.data);
  });

  it('inspects, reads stats and logs', async () => {
    const details = (await probe('inspect', { id: box })).body.data;
    expect(details).toMatchObject({ name: box, state: 'running', exit_code: null, has_healthcheck: false, cmd: ['sh', '-c', 'echo started; exec sleep 3600'] });
    const stats = (await probe('stats', { id: box })).body.data;
    expect(stats).toMatchObject({ name: box, deployment: null, pids: 1 });
    expect(stats.memory_limit).toBeGreaterThan(0);
    const logs = (await probe('logs', { id: box, options: { tail: 10, timestamps: true } })).body.data;
    expect(logs).toEqual([{ stream: 'stdout', time: expect.any(String), text: 'started' }]);
    const missing = await probe('inspect', { id: `nope-${id}` });
    expect(missing.status).toBe(404);
  });

  it('runs exec with bounded output and exit codes', async () => {
    const ok = (await probe('exec', { id: box, argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] })).body.data;
    expect(ok).toEqual({ exit_code: 3, stdout: 'out\n', stderr: 'err\n' });
    const env = (await probe('exec', { id: box, argv: ['sh', '-c', 'echo $FOO; pwd'], options: { env: ['FOO=bar'], workdir: '/tmp' } })).body.data;
    expect(env.stdout).toBe('bar\n/tmp\n');
  });

  it('streams exec output without buffering it, and feeds stdin', async () => {
    const big = (await probe('exec-stream', { id: box, argv: ['sh', '-c', 'head -c 20000000 /dev/zero; echo done >&2'] })).body.data;
    expect(big).toMatchObject({ bytes: 20_000_000, exit_code: 0, stderr: 'done\n' });
    const cat = (await probe('exec-stream', { id: box, argv: ['cat'], stdin: 'hello through stdin' })).body.data;
    expect(cat).toMatchObject({ bytes: 19, head: 'hello through stdin', exit_code: 0 });
  });

  it('ensures networks and connects containers idempotently', async () => {
    const res = (await probe('network', { name: `agent-test-net-${id}`, container: box })).body.data;
    expect(Object.keys(res.connected)).toContain(`agent-test-net-${id}`);
    expect(Object.keys(res.after)).not.toContain(`agent-test-net-${id}`);
  });

  it('runs checked compose models for a project, and publishes engine events', async () => {
    const content = 'services:\n  one:\n    image: agent-test/busybox:latest\n    command: ["true"]\n    labels: {agent.test: "1"}\n';
    const up = (await probe('compose', { project: `svc${id}`, dir, content, command: { command: 'up' } })).body.data;
    expect(up.exit_code, up.output).toBe(0);
    expect(up.lines).toBeGreaterThan(0);
    expect(up.services).toEqual(['one']);
    const again = (await probe('compose', { project: `svc${id}`, dir, content, command: { command: 'up', noRecreate: true } })).body.data;
    expect(again.hash).toBe(up.hash);
    const bad = await probe('compose', { project: 'Bad Name', dir, content, command: { command: 'up' } });
    expect(bad.status).toBe(400);
    const unsafe = await probe('compose', {
      project: `svc${id}`,
      dir,
      content: 'services:\n  one:\n    image: agent-test/busybox:latest\n    privileged: true\n',
      command: { command: 'up' },
    });
    expect(unsafe.status).toBe(400);
    expect(unsafe.body).toMatchObject({ code: 'HOST_SAFETY', service: 'one', key: 'privileged', exception: 'privileged' });
    const forged = await probe('compose-forged', { project: `svc${id}`, dir, content });
    expect(forged.status).toBe(500);
    expect(
      (await execa('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=svc${id}`, '--filter', 'label=com.docker.compose.service=evil']))
        .stdout,
    ).toBe('');
    const noService = await probe('compose', { project: `svc${id}`, dir, content, command: { command: 'stop', services: ['nope'] } });
    expect(noService.status).toBe(400);
    const failed = (
      await probe('compose', {
        project: `svc${id}`,
        dir,
        content: 'services:\n  one:\n    image: agent-test/no-such-image:latest\n    pull_policy: never\n    labels: {agent.test: "1"}\n',
        command: { command: 'up' },
      })
    ).body.data;
    expect(failed.exit_code).not.toBe(0);
    const down = (await probe('compose', { project: `svc${id}`, dir, content, command: { command: 'down' } })).body.data;
    expect(down.exit_code).toBe(0);
    const events = (await probe('events')).body.data;
    expect(events).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'container', action: 'start', deployment: `svc${id}`, service: 'one' })]));
  });
});
