import { existsSync, readFileSync, writeFileSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, uniqueName, until, webCompose } from './helpers.js';

describe('deployments lifecycle against the real engine', () => {
  let agent: TestAgent;
  let root: string;
  const name = uniqueName('web');

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments'] });
    root = join(agent.dataDir, 'deployments');
  });
  afterAll(async () => {
    await agent?.stop();
    await cleanupDocker();
  });

  const get = (n = name) => agent.api('GET', `/deployments/${n}`);
  const port = async () => {
    const d = await get();
    return d.body.data.ports.find((p: any) => p.service === 'web' && p.host_port)?.host_port as number;
  };

  it('creates with auto_start: containers answer on their published port', async () => {
    const res = await agent.api('POST', '/deployments', {
      body: {
        name,
        compose_content: webCompose(),
        env_vars: [
          { key: 'API_TOKEN', value: 's3cret' },
          { key: 'MODE', value: 'test' },
        ],
        auto_start: true,
      },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ name, status: 'running', path: join(root, name), start_error: null });
    expect(res.body.data.services.map((s: any) => [s.name, s.status])).toEqual([
      ['web', 'running'],
      ['worker', 'running'],
    ]);
    const p = await port();
    const page = await fetch(`http://127.0.0.1:${p}/`);
    expect(await page.text()).toContain('hello from agent-test/busybox');
    expect(readFileSync(join(root, name, '.env'), 'utf8')).toContain('API_TOKEN=s3cret');
  });

  it('lists it with services and health; details redact secrets', async () => {
    const list = await agent.api('GET', '/deployments');
    expect(list.status).toBe(200);
    const item = list.body.data.find((d: any) => d.name === name);
    expect(item).toMatchObject({
      status: 'running',
      created_at: expect.any(String),
      services: [
        { name: 'web', status: 'running', health: 'none' },
        { name: 'worker', status: 'running', health: 'none' },
      ],
    });
    const details = await get();
    expect(details.body.data.compose_content).toBe(webCompose());
    expect(details.body.data.env).toEqual([
      { key: 'API_TOKEN', value: '********', secret: true },
      { key: 'MODE', value: 'test', secret: false },
    ]);
    expect(details.body.data.containers).toHaveLength(2);
    expect(JSON.stringify(details.body)).not.toContain('s3cret');
  });

  it('refuses a second deployment with the same name (409)', async () => {
    const res = await agent.api('POST', '/deployments', { body: { name, compose_content: webCompose() } });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('DEPLOYMENT_EXISTS');
  });

  it('names the deployment in the audit records of its creation and of the refused second one', async () => {
    const events = await agent.api('GET', '/audit/events', { query: { action: 'deployments.create', resource_id: name } });
    expect(events.status).toBe(200);
    expect(events.body.data.map((e: any) => [e.success, e.status, e.resource_id, e.deployment])).toEqual([
      [false, 409, name, name],
      [true, 201, name, name],
    ]);
  });

  it('stops (409 when stopped) and starts (409 when running)', async () => {
    const stop = await agent.api('POST', `/deployments/${name}/stop`);
    expect(stop.status, stop.text).toBe(200);
    expect(stop.body.data.status).toBe('stopped');
    const again = await agent.api('POST', `/deployments/${name}/stop`);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('DEPLOYMENT_NOT_RUNNING');
    const start = await agent.api('POST', `/deployments/${name}/start`);
    expect(start.status, start.text).toBe(200);
    expect(start.body.data.status).toBe('running');
    const twice = await agent.api('POST', `/deployments/${name}/start`);
    expect(twice.status).toBe(409);
    expect(twice.body.code).toBe('DEPLOYMENT_RUNNING');
    const restart = await agent.api('POST', `/deployments/${name}/restart`);
    expect(restart.status).toBe(200);
    expect(restart.body.data.status).toBe('running');
  });

  it('picks up state changes made outside the agent from engine events', async () => {
    const before = await get();
    const worker = before.body.data.containers.find((c: any) => c.service === 'worker');
    const { execa } = await import('execa');
    await execa('docker', ['kill', worker.id]);
    const list = await until(
      () => agent.api('GET', '/deployments'),
      (r) => r.body.data.find((d: any) => d.name === name)?.status === 'partial',
      10_000,
      50,
    );
    expect(list.body.data.find((d: any) => d.name === name).status).toBe('partial');
    await agent.api('POST', `/deployments/${name}/start`);
  });

  it('updates: changed services are recreated, the others kept', async () => {
    const before = await get();
    const ids = Object.fromEntries(before.body.data.containers.map((c: any) => [c.service, c.id]));
    const next = webCompose().replace('tick-v1', 'tick-v2');
    const res = await agent.api('PUT', `/deployments/${name}`, { body: { compose_content: next } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'running', recreated: true });
    const after = await get();
    const now = Object.fromEntries(after.body.data.containers.map((c: any) => [c.service, c.id]));
    expect(now.worker).not.toBe(ids.worker);
    expect(now.web).toBe(ids.web);
    expect(readFileSync(join(root, name, 'docker-compose.yml'), 'utf8')).toBe(next);
  });

  it('deletes without remove_files: containers gone, folder kept, not listed; the name can be reused', async () => {
    const res = await agent.api('DELETE', `/deployments/${name}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({ name, removed_files: false, removed_volumes: false });
    expect(existsSync(join(root, name, 'docker-compose.yml'))).toBe(true);
    expect((await get()).status).toBe(404);
    const containers = await agent.api('GET', '/containers', { query: { deployment: name } });
    expect(containers.body.data).toEqual([]);
    const again = await agent.api('POST', '/deployments', { body: { name, compose_content: webCompose('v3') } });
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.status).toBe('stopped');
  });

  it('deletes with remove_files: the folder is gone', async () => {
    const res = await agent.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
    expect(res.status).toBe(200);
    expect(existsSync(join(root, name))).toBe(false);
    expect((await agent.api('DELETE', `/deployments/${name}`)).status).toBe(404);
  });

  it('rejects bad input with a clear error and writes nothing', async () => {
    const good = webCompose();
    const cases: [unknown, number, string, RegExp?][] = [
      [{ name: 'Bad_Name', compose_content: good }, 400, 'VALIDATION_FAILED', /name/],
      [{ name: '../etc', compose_content: good }, 400, 'VALIDATION_FAILED'],
      [{ name: '-x', compose_content: good }, 400, 'VALIDATION_FAILED'],
      [{ name: uniqueName('bad'), compose_content: good, extra: true }, 400, 'VALIDATION_FAILED', /unknown field 'extra'/],
      [{ name: uniqueName('bad'), compose_content: 'services:\n  web:\n    image: [unclosed\n' }, 400, 'INVALID_YAML', /line \d+, column \d+/],
      [{ name: uniqueName('bad'), compose_content: 'services: {}\n' }, 400, 'INVALID_COMPOSE', /services/],
      [{ name: uniqueName('bad'), compose_content: 'nonsense: 1\nservices:\n  a:\n    image: x\n' }, 400, 'INVALID_COMPOSE', /nonsense.*line 1/],
      [{ name: uniqueName('bad'), compose_content: 'services:\n  a:\n    image: x\n    imagee: y\n' }, 400, 'INVALID_COMPOSE', /imagee.*line 4, column 5/],
      [{ name: uniqueName('bad'), compose_content: 'services:\n  a:\n    command: x\n' }, 400, 'INVALID_COMPOSE', /image/],
      [{ name: uniqueName('bad'), compose_content: good, env_vars: [{ key: '1BAD', value: 'x' }] }, 400, 'VALIDATION_FAILED'],
      [
        {
          name: uniqueName('bad'),
          compose_content: good,
          env_vars: [
            { key: 'A', value: 'x' },
            { key: 'A', value: 'y' },
          ],
        },
        400,
        'VALIDATION_FAILED',
        /twice/,
      ],
      [{ name: uniqueName('bad'), compose_content: 'services:\n  a:\n    image: x\n    privileged: true\n' }, 400, 'HOST_SAFETY', /service 'a': privileged/],
      [{ name: uniqueName('bad'), compose_content: 'services:\n  a:\n    image: x\n    network_mode: host\n' }, 400, 'HOST_SAFETY', /network_mode/],
      [{ name: uniqueName('bad'), compose_content: 'services:\n  a:\n    image: x\n    pid: host\n' }, 400, 'HOST_SAFETY', /pid/],
      [
        { name: uniqueName('bad'), compose_content: 'services:\n  a:\n    image: x\n    volumes: ["/etc:/host-etc"]\n' },
        400,
        'HOST_SAFETY',
        /volumes.*outside/,
      ],
      [{ name: uniqueName('bad'), compose_content: 'services:\n  a:\n    image: x\n    volumes: ["../../:/up"]\n' }, 400, 'HOST_SAFETY', /outside/],
      [
        {
          name: uniqueName('bad'),
          compose_content: 'services:\n  a:\n    image: x\n    volumes: ["${DIR}:/up"]\n',
          env_vars: [{ key: 'DIR', value: '/root' }],
        },
        400,
        'HOST_SAFETY',
        /\/root/,
      ],
      [
        {
          name: uniqueName('bad'),
          compose_content: 'services:\n  a:\n    image: x\n    volumes:\n      - type: bind\n        source: /var/run/docker.sock\n        target: /s\n',
        },
        400,
        'HOST_SAFETY',
        /socket/,
      ],
    ];
    for (const [body, status, code, message] of cases) {
      const res = await agent.api('POST', '/deployments', { body });
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.body.code, res.text).toBe(code);
      if (message) expect(res.body.error).toMatch(message);
    }
    expect(readdirSync(root).filter((f) => f.includes('bad'))).toEqual([]);
    for (const path of ['/deployments/Bad', '/deployments/..%2Fetc', '/deployments/a%20b']) {
      const res = await agent.api('GET', path);
      expect([400, 404]).toContain(res.status);
      expect(res.body.code).toBeTruthy();
    }
    for (const [method, suffix, body] of [
      ['GET', ''],
      ['PUT', '', { compose_content: 'x' }],
      ['DELETE', ''],
      ['POST', '/start'],
      ['POST', '/stop'],
      ['POST', '/restart'],
      ['GET', '/logs'],
      ['GET', '/stats'],
      ['GET', '/log-sources'],
      ['PUT', '/log-sources', { sources: [] }],
    ] as const) {
      const res = await agent.api(method, `/deployments/Bad_Name${suffix}`, body ? { body } : {});
      expect(res.status, `${method} ${suffix}`).toBe(400);
      expect(res.body).toEqual(expect.objectContaining({ error: expect.stringContaining('name'), code: 'VALIDATION_FAILED' }));
    }
    expect((await agent.api('GET', '/deployments/nope-nope')).status).toBe(404);
    expect((await agent.api('POST', '/deployments/nope-nope/start')).status).toBe(404);
    expect((await agent.api('PUT', `/deployments/nope-nope`, { body: {} })).status).toBe(400);
  });

  it('keeps a deployment whose start fails, as failed, with the reason', async () => {
    const n = uniqueName('broken');
    const res = await agent.api('POST', '/deployments', {
      body: {
        name: n,
        auto_start: true,
        compose_content: 'services:\n  a:\n    image: 127.0.0.1:9/agent-test/missing:latest\n    labels: {agent.test: "1"}\n',
      },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.status).toBe('failed');
    expect(res.body.data.start_error).toMatch(/failed/);
    const start = await agent.api('POST', `/deployments/${n}/start`);
    expect(start.status).toBe(502);
    expect(start.body.code).toBe('COMPOSE_FAILED');
    expect((await get(n)).body.data.status).toBe('failed');
    expect((await agent.api('DELETE', `/deployments/${n}`, { query: { remove_files: true } })).status).toBe(200);
  });

  it('allows bind mounts inside the deployment folder', async () => {
    const n = uniqueName('bind');
    const res = await agent.api('POST', '/deployments', {
      body: {
        name: n,
        compose_content: 'services:\n  a:\n    image: agent-test/busybox:latest\n    volumes: ["./data:/data", "named:/named"]\nvolumes:\n  named: {}\n',
      },
    });
    expect(res.status, res.text).toBe(201);
    writeFileSync(join(root, n, 'note.txt'), 'x');
    // A bind-mounted folder turned into a symlink out of the deployment is refused at the next start.
    symlinkSync('/etc', join(root, n, 'data'));
    const start = await agent.api('POST', `/deployments/${n}/start`);
    expect(start.status).toBe(400);
    expect(start.body.code).toBe('HOST_SAFETY');
    expect((await agent.api('DELETE', `/deployments/${n}`, { query: { remove_files: true } })).status).toBe(200);
    expect(existsSync('/etc/hostname')).toBe(true);
  });
});
