/**
 * What runs is what was checked, at every start: a container created from an older model (the files changed while
 * the deployment was stopped) is recreated by start and restart and refused by the container routes; builds read a
 * private copy of their context and the Dockerfile in it is checked; names that would meet another project's are
 * refused at create.
 */
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName } from './helpers.js';

const compose = (marker: string, extra = '') =>
  `services:\n  app:\n    image: agent-test/busybox:latest\n    command: ["sh", "-c", "echo ${marker}; sleep 3600"]\n    stop_signal: SIGKILL\n    labels: {agent.test: "1"}\n${extra}`;

async function containerOf(project: string): Promise<{ id: string; cmd: string; stamp: string } | null> {
  const { stdout } = await execa('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${project}`]);
  const id = stdout.split('\n').filter(Boolean)[0];
  if (!id) return null;
  const info = JSON.parse((await execa('docker', ['inspect', id])).stdout)[0];
  return { id: info.Id, cmd: info.Config.Cmd.join(' '), stamp: info.Config.Labels['agent.checked'] ?? '' };
}

describe('checked starts, builds and names', () => {
  let agent: TestAgent;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments'] });
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
    const { stdout } = await execa('docker', ['images', '--format', '{{.Repository}}:{{.Tag}}']);
    const mine = stdout.split('\n').filter((i) => i.startsWith(uniqueName('')));
    if (mine.length) await execa('docker', ['rmi', '-f', ...mine], { reject: false });
  });

  it('start recreates a container whose model changed while it was stopped; the container routes refuse it', async () => {
    const name = uniqueName('stale');
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose('one'), auto_start: true } })).status).toBe(201);
    const first = (await containerOf(name))!;
    expect(first.stamp).toMatch(/^[0-9a-f]{32}$/);
    expect((await agent.api('POST', `/deployments/${name}/stop`)).status).toBe(200);
    const updated = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: compose('two') } });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body.data.recreated ?? false).toBe(false);

    // The old container is still there, stopped, with the old command: it must not run again as it is.
    const old = await agent.api('POST', `/containers/${first.id}/start`);
    expect(old.status, old.text).toBe(409);
    expect(old.body.code).toBe('CONTAINER_STALE');
    expect((await containerOf(name))!.id).toBe(first.id);

    expect((await agent.api('POST', `/deployments/${name}/start`)).status).toBe(200);
    const second = (await containerOf(name))!;
    expect(second.id).not.toBe(first.id);
    expect(second.cmd).toContain('echo two');
    expect(second.stamp).not.toBe(first.stamp);

    // A container of the current model starts through the routes as before.
    await execa('docker', ['stop', '-t', '0', second.id]);
    const current = await agent.api('POST', `/containers/${second.id}/start`);
    expect(current.status, current.text).toBe(200);

    // restart of a stopped deployment updated meanwhile recreates too (it never `docker restart`s the old one).
    expect((await agent.api('POST', `/deployments/${name}/stop`)).status).toBe(200);
    expect((await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: compose('three') } })).status).toBe(200);
    expect((await agent.api('POST', `/deployments/${name}/restart`)).status).toBe(200);
    const third = (await containerOf(name))!;
    expect(third.id).not.toBe(second.id);
    expect(third.cmd).toContain('echo three');
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  });

  it('a revoked exception takes effect at once: neither the deployment nor its old container starts', async () => {
    const name = uniqueName('revoked');
    const content = compose('cap', '    cap_add: [NET_ADMIN]\n');
    const created = await agent.api('POST', '/deployments', {
      body: { name, compose_content: content, auto_start: true, host_safety_exceptions: ['cap_add:NET_ADMIN'] },
    });
    expect(created.status, created.text).toBe(201);
    const first = (await containerOf(name))!;
    expect((await agent.api('POST', `/deployments/${name}/stop`)).status).toBe(200);
    expect((await agent.api('PUT', `/deployments/${name}/host-safety`, { body: { exceptions: [] } })).status).toBe(200);
    const old = await agent.api('POST', `/containers/${first.id}/start`);
    expect(old.status, old.text).toBe(409);
    expect(old.body.code).toBe('CONTAINER_STALE');
    const start = await agent.api('POST', `/deployments/${name}/start`);
    expect(start.status).toBe(400);
    expect(start.body).toMatchObject({ code: 'HOST_SAFETY', key: 'cap_add' });
    const { stdout } = await execa('docker', ['inspect', '-f', '{{.State.Running}}', first.id]);
    expect(stdout).toBe('false');
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  });

  it('removes an older container that could write above what the new model mounts before creating anything', async () => {
    const name = uniqueName('above');
    const v1 = `services:\n  a:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    stop_signal: SIGKILL\n    volumes: ["./data:/data"]\n    labels: {agent.test: "1"}\n`;
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: v1, auto_start: true } })).status).toBe(201);
    const a = (await containerOf(name))!;
    // Version 2 mounts a folder below ./data into another service, and keeps `a` as it is (same model, same stamp).
    const v2 = `${v1}  b:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    stop_signal: SIGKILL\n    volumes: ["./data/x:/x:ro"]\n    labels: {agent.test: "1"}\n`;
    const refused = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: v2 } });
    // Within one model, a bind below a read-write bind is refused outright.
    expect(refused.status).toBe(400);
    expect(refused.body.code).toBe('HOST_SAFETY');
    // Without `a`'s write access in the model, `a` (still running from the old one) is removed before `b` starts.
    const v3 = `services:\n  b:\n    image: agent-test/busybox:latest\n    command: ["sleep", "3600"]\n    stop_signal: SIGKILL\n    volumes: ["./data/x:/x:ro"]\n    labels: {agent.test: "1"}\n`;
    const res = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: v3 } });
    expect(res.status, res.text).toBe(200);
    const { stdout } = await execa('docker', ['ps', '-aq', '--no-trunc', '--filter', `label=com.docker.compose.project=${name}`]);
    expect(stdout.split('\n').filter(Boolean)).not.toContain(a.id);
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  });

  it('accepts build: . at create, builds from a copy of the context, and checks the Dockerfile that is built', async () => {
    const name = uniqueName('build');
    const content = `services:\n  app:\n    build: .\n    command: ["sh", "-c", "cat /ctx/hello; sleep 3600"]\n    stop_signal: SIGKILL\n    volumes: ["./data:/data"]\n    labels: {agent.test: "1"}\n`;
    const created = await agent.api('POST', '/deployments', { body: { name, compose_content: content } });
    expect(created.status, created.text).toBe(201);
    const dir = join(agent.dataDir, 'deployments', name);
    writeFileSync(join(dir, 'Dockerfile'), 'FROM agent-test/busybox:latest\nCOPY ctx /ctx\n');
    mkdirSync(join(dir, 'ctx'));
    writeFileSync(join(dir, 'ctx', 'hello'), 'from-the-context\n');
    // A link in the context is copied as a link: the builder never reads the host file it points at.
    const canary = join(agent.dataDir, `canary-${name}`);
    writeFileSync(canary, 'host-canary\n');
    symlinkSync(canary, join(dir, 'ctx', 'host'));
    const started = await agent.api('POST', `/deployments/${name}/start`);
    expect(started.status, started.text).toBe(200);
    const built = await execa('docker', [
      'run',
      '--rm',
      `${name}_app`,
      'sh',
      '-c',
      'cat /ctx/hello; readlink /ctx/host; cat /ctx/host 2>/dev/null || echo not-followed',
    ]);
    expect(built.stdout.split('\n')).toEqual(['from-the-context', canary, 'not-followed']);

    // The Dockerfile is read again in the copy that is built: a later ADD of a URL is refused there.
    await agent.api('POST', `/deployments/${name}/stop`);
    await execa('docker', ['rmi', '-f', `${name}_app`]);
    writeFileSync(join(dir, 'Dockerfile'), 'FROM agent-test/busybox:latest\nADD http://127.0.0.1:9/secret /s\n');
    const refused = await agent.api('POST', `/deployments/${name}/start`);
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body).toMatchObject({ code: 'HOST_SAFETY', key: 'build.dockerfile' });
    expect(refused.body.violations[0].exception).toBe('build.add-url');
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
  });

  it('refuses names that meet the agent or another project at "_"', async () => {
    const base = uniqueName('nm');
    expect((await agent.api('POST', '/deployments', { body: { name: base, compose_content: compose('x') } })).status).toBe(201);
    for (const other of [`${base}_x`]) {
      const res = await agent.api('POST', '/deployments', { body: { name: other, compose_content: compose('x') } });
      expect(res.status, other).toBe(409);
      expect(res.body).toMatchObject({ code: 'NAME_IN_USE', project: base });
    }
    const agentName = await agent.api('POST', '/deployments', { body: { name: 'agent', compose_content: compose('x') } });
    expect(agentName.status).toBe(400);
    expect(agentName.body.code).toBe('NAME_RESERVED');
    expect((await agent.api('DELETE', `/deployments/${base}`, { query: { remove_files: true } })).status).toBe(200);
  });

  it('answers 400, never 500, to a YAML alias bomb and to an oversized file', async () => {
    const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < 9; i++)
      bomb.push(
        `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)}]`,
      );
    const content = `${bomb.join('\n')}\nservices:\n  app:\n    image: agent-test/busybox:latest\n    command: *i\n`;
    const res = await agent.api('POST', '/deployments', { body: { name: uniqueName('bomb'), compose_content: content } });
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBe('INVALID_YAML');
    const big = await agent.api('POST', '/deployments', {
      body: { name: uniqueName('big'), compose_content: compose('x') + `x-pad: "${'a'.repeat(1024 * 1024)}"\n` },
    });
    expect(big.status, big.text.slice(0, 200)).toBe(400);
    // The route bounds the text (1 MiB) before the guard reads it; the guard bounds it for every other caller.
    expect(big.body.code).toBe('VALIDATION_FAILED');
    expect(big.body.error).toContain('compose_content');
  });

  it('a deployment folder whose data became a link is removed without following it', async () => {
    const name = uniqueName('rmlink');
    expect((await agent.api('POST', '/deployments', { body: { name, compose_content: compose('x') } })).status).toBe(201);
    const dir = join(agent.dataDir, 'deployments', name);
    const outside = join(agent.dataDir, `outside-${name}`);
    mkdirSync(join(outside, 'keep'), { recursive: true });
    writeFileSync(join(outside, 'keep', 'file'), 'keep me');
    mkdirSync(join(dir, 'data'));
    renameSync(join(dir, 'data'), join(dir, 'data.old'));
    symlinkSync(outside, join(dir, 'data'));
    expect((await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } })).status).toBe(200);
    expect((await execa('cat', [join(outside, 'keep', 'file')])).stdout).toBe('keep me');
  });
});
