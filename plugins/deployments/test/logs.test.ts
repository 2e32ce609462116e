import { appendFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, openStream, uniqueName, until, webCompose } from './helpers.js';

describe('deployment logs, log sources, stats and health', () => {
  let agent: TestAgent;
  const name = uniqueName('logs');
  const sick = uniqueName('sick');

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments'] });
    const res = await agent.api('POST', '/deployments', { body: { name, compose_content: webCompose(), auto_start: true } });
    expect(res.status, res.text).toBe(201);
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
  });

  it('returns container output of every service, one service, with tail and filter', async () => {
    const res = await until(
      () => agent.api('GET', `/deployments/${name}/logs`),
      (r) => r.body.data?.some((l: any) => l.service === 'worker' && /tick-v1-3/.test(l.text)),
    );
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual(expect.arrayContaining([expect.objectContaining({ service: 'web', stream: 'stdout', text: 'web-started-v1' })]));
    const times = res.body.data.map((l: any) => l.time);
    expect([...times].sort()).toEqual(times);
    const web = await agent.api('GET', `/deployments/${name}/logs`, { query: { service: 'web' } });
    expect(web.body.data.every((l: any) => l.service === 'web')).toBe(true);
    const tail = await agent.api('GET', `/deployments/${name}/logs`, { query: { service: 'worker', tail: 2 } });
    expect(tail.body.data).toHaveLength(2);
    const filtered = await agent.api('GET', `/deployments/${name}/logs`, { query: { filter: 'tick-v1-2', tail: 5 } });
    expect(filtered.body.data.map((l: any) => l.text)).toContain('tick-v1-2');
    expect(filtered.body.data.every((l: any) => l.text.includes('tick-v1-2'))).toBe(true);
  });

  it('rejects bad log queries', async () => {
    for (const [query, status] of [
      [{ tail: -1 }, 400],
      [{ tail: 'x' }, 400],
      [{ service: '../x' }, 400],
      [{ service: 'nope' }, 404],
      [{ source: 'nope' }, 404],
      [{ source: '../etc' }, 400],
    ] as const) {
      const res = await agent.api('GET', `/deployments/${name}/logs`, { query: query as never });
      expect(res.status, JSON.stringify(query)).toBe(status);
      expect(res.body.code).toBeTruthy();
    }
  });

  it('streams new lines over the websocket after the token', async () => {
    const stream = openStream(agent, `/deployments/${name}/logs/stream`, { service: 'worker', tail: '1' });
    await until(
      async () => stream.messages.length,
      (n) => n >= 3,
      10_000,
      50,
    );
    expect(stream.messages[0]).toEqual({ type: 'ready' });
    const lines = stream.messages.filter((m) => m.type === 'line');
    expect(lines[0]).toMatchObject({ service: 'worker', stream: 'stdout', text: expect.stringMatching(/^tick-v1-\d+$/) });
    // New lines keep coming (the worker logs every 200 ms).
    const seen = lines.length;
    await until(
      async () => stream.messages.filter((m) => m.type === 'line').length,
      (n) => n >= seen + 2,
      5_000,
      50,
    );
    expect(stream.messages.filter((m) => m.type === 'line').length).toBeGreaterThanOrEqual(seen + 2);
    stream.ws.close();
    await stream.closed;
  });

  it('closes the stream with a policy violation on a bad token', async () => {
    const stream = openStream(agent, `/deployments/${name}/logs/stream`, {}, 'not-a-token');
    const { code } = await stream.closed;
    expect(code).toBe(1008);
  });

  it('ends the stream cleanly when the containers stop', async () => {
    const n = uniqueName('short');
    const created = await agent.api('POST', '/deployments', {
      body: {
        name: n,
        auto_start: true,
        compose_content:
          'services:\n  once:\n    image: agent-test/busybox:latest\n    command: ["sh", "-c", "sleep 1; echo bye; sleep 1"]\n    labels: {agent.test: "1"}\n',
      },
    });
    expect(created.status).toBe(201);
    const stream = openStream(agent, `/deployments/${n}/logs/stream`);
    const { code } = await stream.closed;
    expect(code).toBe(1000);
    expect(stream.messages.map((m) => m.text ?? m.type)).toEqual(['ready', 'bye', 'end']);
    await agent.api('DELETE', `/deployments/${n}`, { query: { remove_files: true } });
  });

  it('manages custom file sources: relative paths only, tailed from the end, followed', async () => {
    const dir = join(agent.dataDir, 'deployments', name);
    mkdirSync(join(dir, 'logs'), { recursive: true });
    writeFileSync(join(dir, 'logs', 'app.log'), Array.from({ length: 500 }, (_, i) => `line ${i}`).join('\n') + '\n');
    symlinkSync('/etc/hostname', join(dir, 'logs', 'escape.log'));
    const initial = await agent.api('GET', `/deployments/${name}/log-sources`);
    expect(initial.body.data).toEqual([expect.objectContaining({ id: 'stdout', type: 'container', builtin: true })]);
    for (const path of ['/etc/passwd', '../x.log', 'logs/../../x', '~/x']) {
      const bad = await agent.api('PUT', `/deployments/${name}/log-sources`, { body: { sources: [{ id: 'bad', name: 'Bad', path }] } });
      expect(bad.status, path).toBe(400);
      expect(bad.body.code).toBe('INVALID_PATH');
    }
    expect((await agent.api('PUT', `/deployments/${name}/log-sources`, { body: { sources: [{ id: 'stdout', name: 'x', path: 'a.log' }] } })).status).toBe(400);
    expect((await agent.api('PUT', `/deployments/${name}/log-sources`, { body: { sources: [{ id: 'a', name: 'x', path: 'a.log', extra: 1 }] } })).status).toBe(
      400,
    );
    const put = await agent.api('PUT', `/deployments/${name}/log-sources`, {
      body: {
        sources: [
          { id: 'app', name: 'App log', path: 'logs/app.log', format: 'text' },
          { id: 'escape', name: 'Escape', path: 'logs/escape.log' },
        ],
      },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data.map((s: any) => s.id)).toEqual(['stdout', 'app', 'escape']);
    const tail = await agent.api('GET', `/deployments/${name}/logs`, { query: { source: 'app', tail: 3 } });
    expect(tail.body.data.map((l: any) => l.text)).toEqual(['line 497', 'line 498', 'line 499']);
    const filtered = await agent.api('GET', `/deployments/${name}/logs`, { query: { source: 'app', tail: 2, filter: 'line 1' } });
    expect(filtered.body.data.map((l: any) => l.text)).toEqual(['line 198', 'line 199']);
    const escape = await agent.api('GET', `/deployments/${name}/logs`, { query: { source: 'escape' } });
    expect(escape.status).toBe(400);
    expect(escape.body.code).toBe('INVALID_PATH');

    const stream = openStream(agent, `/deployments/${name}/logs/stream`, { source: 'app', tail: '1' });
    await until(
      async () => stream.messages.length,
      (n) => n >= 2,
      5_000,
      50,
    );
    appendFileSync(join(dir, 'logs', 'app.log'), 'appended line\n');
    await until(async () => stream.messages.some((m) => m.text === 'appended line'), Boolean, 5_000, 50);
    expect(stream.messages.map((m) => m.text ?? m.type)).toEqual(['ready', 'line 499', 'appended line']);
    stream.ws.close();
    // A line written right after the socket is ready (while the initial tail is read) is not lost.
    const racing = openStream(agent, `/deployments/${name}/logs/stream`, { source: 'app', tail: '1' });
    await until(
      async () => racing.messages.length,
      (n) => n >= 1,
      5_000,
      5,
    );
    appendFileSync(join(dir, 'logs', 'app.log'), 'racing line\n');
    await until(async () => racing.messages.some((m) => m.text === 'racing line'), Boolean, 5_000, 50);
    expect(racing.messages.filter((m) => m.text === 'racing line')).toHaveLength(1);
    racing.ws.close();
  });

  it('reports stats of every running container', async () => {
    const res = await agent.api('GET', `/deployments/${name}/stats`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toHaveLength(2);
    for (const s of res.body.data) {
      expect(s).toMatchObject({
        deployment: name,
        service: expect.stringMatching(/^(web|worker)$/),
        memory_usage: expect.any(Number),
        pids: expect.any(Number),
      });
      expect(s.memory_limit).toBeGreaterThan(0);
      expect(s.pids).toBeGreaterThan(0);
    }
  });

  it('shows a service failing its healthcheck as unhealthy', async () => {
    const compose = `services:
  app:
    image: agent-test/busybox:latest
    command: ["sleep", "3600"]
    stop_signal: SIGKILL
    labels: {agent.test: "1"}
    healthcheck:
      test: ["CMD", "false"]
      interval: 1s
      timeout: 1s
      retries: 1
  fine:
    image: agent-test/busybox:latest
    command: ["sleep", "3600"]
    stop_signal: SIGKILL
    labels: {agent.test: "1"}
    healthcheck:
      test: ["CMD", "true"]
      interval: 1s
      retries: 1
`;
    const res = await agent.api('POST', '/deployments', { body: { name: sick, compose_content: compose, auto_start: true } });
    expect(res.status, res.text).toBe(201);
    const list = await until(
      () => agent.api('GET', '/deployments'),
      (r) => {
        const d = r.body.data.find((x: any) => x.name === sick);
        return d?.services.find((s: any) => s.name === 'app')?.health === 'unhealthy' && d?.services.find((s: any) => s.name === 'fine')?.health === 'healthy';
      },
      20_000,
      200,
    );
    const d = list.body.data.find((x: any) => x.name === sick);
    expect(d.services).toEqual([
      expect.objectContaining({ name: 'app', status: 'running', health: 'unhealthy' }),
      expect.objectContaining({ name: 'fine', status: 'running', health: 'healthy' }),
    ]);
  });
});
