/**
 * The description is true to the wire, checked by a validator that is not ours: Stoplight Prism, run as a validating
 * proxy in front of real agents, validates every answer of a representative set of requests — successes and errors
 * of every kind: validation, 401, 403, 404, 409, 410 (a plan expired), 413, 415, 424, 429 (a login lockout), 502,
 * 503 (a component missing), plans of plannable creates and their apply — against the agent's own
 * `/api/openapi.json`. Prism reports what does not match in the `sl-violations` header of each proxied answer: an
 * undocumented status, a body outside the schema of its status (a `code` outside its enum included).
 *
 * Two agents: A with most plugins and what they need (Docker engine, a scratch proxy folder), B with the Docker
 * engine and nginx missing and plans that expire after a second. The answers of plugins whose declarations other
 * engineers are still changing (PENDING) are sent and reported, not asserted; every other answer must match.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, request, scratchProxy, startAgent, type ApiResponse, type RequestOptions, type TestAgent } from './helpers/agent.js';
// The plugins whose engineers are still declaring their answers (reported, not asserted): the helper's list.
import { DescriptionCheck, isPending } from './helpers/description.js';
import { freePort, waitFor } from './helpers/net.js';

type Json = Record<string, any>;

const PRISM = resolve(REPO_ROOT, 'node_modules/@stoplight/prism-cli/dist/index.js');
const HELLO = resolve(REPO_ROOT, 'examples/hello-plugin');
const BUSYBOX = `services:
  web:
    image: agent-test/busybox:latest
    # Containers the suite leaves behind are removed by test/env (by this label).
    labels:
      agent.test: "1"
    stop_signal: SIGKILL
    command: ["httpd", "-f", "-p", "80", "-h", "/"]
`;

/** One Prism proxy in front of one agent, with the agent's description as its document. */
interface Prism {
  url: string;
  process: ChildProcess;
  output: () => string;
}

async function startPrism(agent: TestAgent, dir: string, name: string): Promise<{ prism: Prism; doc: Json }> {
  const doc = (await request(agent.url, 'GET', '/openapi.json', { token: agent.token })).body as Json;
  const file = join(dir, `${name}.openapi.json`);
  writeFileSync(file, JSON.stringify(doc));
  const port = await freePort();
  // --validate-request=false: invalid requests are part of the set, and the agent must answer them itself.
  const child = spawn(
    process.execPath,
    [PRISM, 'proxy', file, agent.url, '--host', '127.0.0.1', '--port', String(port), '--errors=false', '--validate-request=false', '-v', 'warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`prism exited with ${child.exitCode}:\n${output}`);
      return fetch(`${url}/api/health`).then(
        (r) => r.ok,
        () => false,
      );
    },
    'prism listening',
    60_000,
    200,
  );
  return { prism: { url, process: child, output: () => output }, doc };
}

interface Finding {
  request: string;
  status: number;
  operation: string | null;
  pending: boolean;
  /** What Prism said about the answer (or that it could not match the request to an operation). */
  prism: string[];
  /** What the suite's own check (test/helpers/description.ts) said: the two must agree. */
  own: string | null;
}

/** Sends requests through a Prism proxy and keeps what it and the suite's own check found. */
class Checked {
  readonly findings: Finding[] = [];
  readonly sent: string[] = [];
  private readonly own: DescriptionCheck;

  constructor(
    private readonly prism: Prism,
    doc: Json,
    private token: string,
  ) {
    this.own = new DescriptionCheck(doc);
  }

  async send(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
    const res = await request(this.prism.url, method, path, { ...options, defaultToken: this.token });
    const pathname = (path.startsWith('/api') ? path : `/api${path}`).split('?')[0]!;
    const op = this.own.operation(method, pathname);
    const reported = JSON.parse(res.headers.get('sl-violations') ?? '[]') as { location: string[]; message: string; severity: string }[];
    // Prism validates the request too (its security among others): only what it says about the answer counts, and
    // a request it could not match to an operation, since its answer was then not checked at all.
    const prism = reported
      .filter((v) => v.location[0] === 'response' || /route not (found|resolved)/i.test(v.message))
      .map((v) => `${v.location.join('.')}: ${v.message}`);
    const own = this.own.check(method, pathname, res.status, res.headers.get('content-type'), res.text);
    this.sent.push(`${method} ${path} ${res.status}`);
    if (prism.length || own) {
      this.findings.push({ request: `${method} ${path}`, status: res.status, operation: op?.operationId ?? null, pending: isPending(op), prism, own });
    }
    return res;
  }

  /**
   * A request Prism cannot pass on (a body that is not JSON: Prism parses it and answers itself), sent to the agent
   * directly: only the suite's own check sees its answer.
   */
  async direct(agent: TestAgent, method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
    const res = await request(agent.url, method, path, { ...options, defaultToken: this.token });
    const pathname = (path.startsWith('/api') ? path : `/api${path}`).split('?')[0]!;
    const own = this.own.check(method, pathname, res.status, res.headers.get('content-type'), res.text);
    const op = this.own.operation(method, pathname);
    this.sent.push(`${method} ${path} ${res.status} (direct)`);
    if (own)
      this.findings.push({ request: `${method} ${path}`, status: res.status, operation: op?.operationId ?? null, pending: isPending(op), prism: [], own });
    return res;
  }

  as(token: string): Checked {
    const other = Object.create(this) as Checked;
    other.token = token;
    return other;
  }

  /** What must be empty: findings about operations of the plugins that declare their answers, since the last call. */
  asserted(): Finding[] {
    const fresh = this.findings.slice(this.seen);
    this.seen = this.findings.length;
    return fresh.filter((f) => !f.pending);
  }

  private seen = 0;
}

describe('the live description, validated by Stoplight Prism in front of real agents', () => {
  let dir: string;
  let a: TestAgent;
  let b: TestAgent;
  let prismA: Prism;
  let prismB: Prism;
  let A: Checked;
  let B: Checked;
  const app = `desc-${process.pid}`;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agent-description-'));
    [a, b] = await Promise.all([
      startAgent({
        plugins: [
          'docker',
          'deployments',
          'jobs',
          'edge',
          'security',
          'backups',
          'scheduler',
          'system',
          'databases',
          'notifications',
          'dashboards',
          'observability',
          HELLO,
        ],
        config: {
          proxy: scratchProxy(join(dir, 'proxy-a')),
          api: { body_limit: '64kb' },
          auth: { login_max_failures: 2, login_max_failures_per_ip: 1000, lockout: '60s' },
        },
      }),
      startAgent({
        plugins: ['docker', 'deployments', 'edge', 'security', 'backups'],
        config: {
          docker: { host: `unix://${join(dir, 'no-docker.sock')}` },
          // The proxy's commands name a program that does not exist: nginx is missing.
          proxy: {
            ...scratchProxy(join(dir, 'proxy-b')),
            test_command: [join(dir, 'no-nginx'), '-t'],
            reload_command: [join(dir, 'no-nginx'), '-s', 'reload'],
          },
          plans: { ttl: '1s' },
        },
      }),
    ]);
    const [pa, pb] = await Promise.all([startPrism(a, dir, 'a'), startPrism(b, dir, 'b')]);
    prismA = pa.prism;
    prismB = pb.prism;
    A = new Checked(prismA, pa.doc, a.token);
    B = new Checked(prismB, pb.doc, b.token);
  });

  afterAll(async () => {
    for (const p of [prismA, prismB]) p?.process.kill('SIGTERM');
    if (a) await a.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } }).catch(() => undefined);
    await Promise.all([a?.stop(), b?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('core: health, description, plugins, authentication, validation, bodies', async () => {
    expect((await A.send('GET', '/health', { token: null })).status).toBe(200);
    expect((await A.send('GET', '/openapi.json')).status).toBe(200);
    expect((await A.send('GET', '/plugins')).status).toBe(200);
    expect((await A.send('GET', '/plugins/edge')).status).toBe(200);
    expect((await A.send('GET', '/plugins/observability')).status).toBe(200);
    expect((await A.send('GET', '/plugins/nope')).status).toBe(404);
    expect((await A.send('GET', '/plugins', { token: null })).status).toBe(401);
    expect((await A.send('GET', '/plugins', { token: 'not-a-token' })).body.code).toBe('INVALID_TOKEN');
    expect((await A.send('GET', '/jobs', { query: { limit: 0 } })).status).toBe(400);
    expect((await A.direct(a, 'POST', '/dashboards', { raw: '{"name":', headers: { 'content-type': 'application/json' } })).body.code).toBe('INVALID_JSON');
    expect((await A.send('POST', '/dashboards', { raw: 'name=x', headers: { 'content-type': 'text/plain' } })).body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect((await A.send('POST', '/dashboards', { body: { name: 'x'.repeat(70_000), panels: [] } })).status).toBe(413);
    // A multipart route refuses any other body with 415.
    expect((await A.send('POST', '/backups/upload', { body: { deployment: 'x' } })).status).toBe(415);
    expect((await A.send('GET', '/plans')).status).toBe(200);
    expect((await A.send('POST', '/dashboards', { query: { plan: 'true' }, body: { name: 'p', panels: [] } })).body.code).toBe('PLAN_NOT_SUPPORTED');
    expect(A.asserted()).toEqual([]);
  });

  it('403 for a principal without the permission or outside its scope, 429 after failed logins', async () => {
    const created = await A.send('POST', '/users', {
      body: { username: 'desc-viewer', email: 'viewer@example.test', password: 'Viewer-Pass-123', role: 'viewer' },
    });
    expect(created.status, created.text).toBe(201);
    const viewer = A.as(await a.login('desc-viewer', 'Viewer-Pass-123'));
    expect((await viewer.send('PUT', '/settings', { body: {} })).status).toBe(403);
    expect((await viewer.send('GET', '/object-stores')).body.code).toBe('GLOBAL_SCOPE_REQUIRED');
    expect((await viewer.send('GET', '/plugins')).status).toBe(200);
    for (let i = 0; i < 2; i++)
      expect((await A.send('POST', '/auth/login', { token: null, body: { username: 'desc-viewer', password: 'wrong' } })).status).toBe(401);
    expect((await A.send('POST', '/auth/login', { token: null, body: { username: 'desc-viewer', password: 'wrong' } })).status).toBe(429);
    expect(A.asserted()).toEqual([]);
  });

  it('docker, system, jobs, databases, notifications, dashboards and the example plugin', async () => {
    for (const path of [
      '/containers',
      '/volumes',
      '/networks',
      '/settings',
      '/stats',
      '/system/doctor',
      '/jobs',
      '/notifications/targets',
      '/notifications/deliveries',
      '/dashboards',
      '/hello/greetings',
    ])
      expect((await A.send('GET', path)).status, path).toBe(200);
    const volume = `desc-vol-${process.pid}`;
    expect((await A.send('POST', '/volumes', { body: { name: volume } })).status).toBe(201);
    expect((await A.send('POST', '/volumes', { body: { name: volume } })).body.code).toBe('VOLUME_EXISTS');
    expect((await A.send('DELETE', `/volumes/${volume}`)).status).toBe(200);
    expect((await A.send('DELETE', '/networks/bridge')).body.code).toBe('NETWORK_BUILTIN');
    expect((await A.send('DELETE', '/containers/desc-no-such-container')).status).toBe(404);
    expect((await A.send('PUT', '/settings', { body: {} })).status).toBe(200);
    expect((await A.send('POST', '/jobs/job_nosuchjob/cancel')).status).toBe(404);

    const db = await A.send('POST', '/databases/test', {
      body: { type: 'postgres', host: '127.0.0.1', port: 1, username: 'x', password: 'y', connect_timeout: 2 },
    });
    expect(db.body.code).toBe('DB_UNREACHABLE');

    expect((await A.send('PUT', '/notifications/targets', { body: [{ name: 'broken', url: 'ftp://example.test/x' }] })).body.code).toBe('INVALID_TARGET_URL');
    expect((await A.send('PUT', '/notifications/targets', { body: [{ name: 'hook', url: 'generic+http://127.0.0.1:1/hook' }] })).status).toBe(200);
    expect((await A.send('POST', '/notifications/test', { body: { target_id: 'hook' } })).body.code).toBe('NOTIFICATION_FAILED');
    expect((await A.send('POST', '/notifications/test', { body: { target_id: 'nope' } })).status).toBe(404);

    const panel = { title: 'CPU', source: 'container', series: 'container.cpu.usage', type: 'line', width: 6 };
    const dash = await A.send('POST', '/dashboards', { body: { name: 'd', panels: [panel] } });
    expect(dash.status, dash.text).toBe(201);
    expect((await A.send('PUT', `/dashboards/${dash.body.data.id}`, { body: { name: 'e', panels: [] } })).status).toBe(200);
    expect((await A.send('POST', '/dashboards', { body: { name: 'x', panels: [{ ...panel, series: 'bogus' }] } })).status).toBe(400);
    expect((await A.send('DELETE', `/dashboards/${dash.body.data.id}`)).status).toBe(200);
    expect((await A.send('GET', `/dashboards/${dash.body.data.id}`)).status).toBe(404);

    const plan = await A.send('POST', '/hello/greetings', { query: { plan: 'true' }, body: { name: 'Ada' } });
    expect(plan.status).toBe(201);
    expect((await A.send('GET', `/plans/${plan.body.data.id}`)).status).toBe(200);
    expect((await A.send('POST', `/plans/${plan.body.data.id}/apply`)).status).toBe(201);
    expect((await A.send('POST', '/hello/greetings', { body: { name: 'Ada' } })).body.code).toBe('GREETING_EXISTS');
    expect(A.asserted()).toEqual([]);
  });

  it('a deployment: domains (plans too), security rules, backups, schedules', async () => {
    // The deployments plugin is pending: its answers are reported, the ones below on what it made are asserted.
    const created = await A.send('POST', '/deployments', { body: { name: app, compose_content: BUSYBOX, auto_start: false } });
    expect(created.status, created.text).toBe(201);

    const domain = { domain: `${app}.example.test`, service: 'web', container_port: 80 };
    const preview = await A.send('POST', `/deployments/${app}/domains`, { query: { plan: 'true' }, body: domain });
    expect(preview.status, preview.text).toBe(201);
    expect((await A.send('DELETE', `/plans/${preview.body.data.id}`)).status).toBe(200);
    const added = await A.send('POST', `/deployments/${app}/domains`, { body: domain });
    expect(added.status, added.text).toBe(201);
    expect((await A.send('POST', `/deployments/${app}/domains`, { body: domain })).status).toBe(409);
    for (const path of [
      `/deployments/${app}/domains`,
      `/proxy/status/${app}`,
      '/proxy/vhosts',
      '/certificates',
      '/traffic/logs',
      '/traffic/stats',
      '/system/logs/sources',
    ])
      expect((await A.send('GET', path)).status, path).toBe(200);
    expect((await A.send('GET', '/traffic/logs', { query: { path: `/${'x*'.repeat(20)}` } })).body.code).toBe('INVALID_PATTERN');

    for (const path of [
      '/security/blocked-ips',
      '/security/whitelist',
      '/security/protected-routes',
      '/security/events',
      '/security/stats',
      '/settings/security',
      `/deployments/${app}/security`,
    ])
      expect((await A.send('GET', path)).status, path).toBe(200);
    expect((await A.send('POST', '/security/blocked-ips', { body: { ip: '203.0.113.7', reason: 'description test' } })).status).toBe(201);
    expect((await A.send('DELETE', '/security/blocked-ips/203.0.113.7')).status).toBe(200);
    expect((await A.send('DELETE', '/security/blocked-ips/203.0.113.7')).status).toBe(404);
    const wl = { type: 'cidr', value: '198.51.100.0/24', description: 'doc' };
    const entry = await A.send('POST', '/security/whitelist', { body: wl });
    expect(entry.status).toBe(201);
    expect((await A.send('POST', '/security/whitelist', { body: wl })).body.code).toBe('WHITELIST_EXISTS');
    expect((await A.send('DELETE', `/security/whitelist/${entry.body.data.id}`)).status).toBe(200);
    const route = { path: '/private', method: 'ALL', auth_type: 'basic', credentials: 'a:b', deployment: app };
    expect((await A.send('POST', '/security/protected-routes', { body: route })).status).toBe(201);
    expect((await A.send('POST', '/security/protected-routes', { body: route })).body.code).toBe('PROTECTED_ROUTE_EXISTS');
    expect((await A.send('GET', '/security/events/999999')).status).toBe(404);

    expect((await A.send('GET', `/deployments/${app}/backup-config`)).status).toBe(200);
    expect((await A.send('PUT', `/deployments/${app}/backup-config`, { body: { schedule: 'not cron' } })).body.code).toBe('INVALID_CRON');
    const backup = await A.send('POST', `/deployments/${app}/backups`);
    expect(backup.status, backup.text).toBe(202);
    const job = await waitFor(
      async () => {
        const r = await A.send('GET', `/backups/jobs/${backup.body.data.job_id}`);
        return r.body.data.status === 'completed' || r.body.data.status === 'failed' ? r.body.data : null;
      },
      'backup job',
      60_000,
      250,
    );
    expect(job.status).toBe('completed');
    const backups = await A.send('GET', `/deployments/${app}/backups`);
    expect(backups.body.data.length).toBeGreaterThan(0);
    expect((await A.send('GET', `/backups/${backups.body.data[0].id}`)).status).toBe(200);
    expect((await A.send('GET', '/backups')).status).toBe(200);
    expect((await A.send('GET', '/backups/jobs')).status).toBe(200);
    expect((await A.send('GET', '/backups/bkp_20000101000000_00000000')).body.code).toBe('BACKUP_NOT_FOUND');
    expect((await A.send('POST', '/backups', { body: { deployment_name: app, exclude_patterns: ['../x'] } })).body.code).toBe('INVALID_PATTERN');

    const task = await A.send('POST', '/scheduler/tasks', { body: { deployment_name: app, task_type: 'restart', cron_expr: '0 4 * * *' } });
    expect(task.status, task.text).toBe(201);
    expect((await A.send('POST', '/scheduler/tasks', { body: { deployment_name: app, task_type: 'restart', cron_expr: 'nope' } })).body.code).toBe(
      'INVALID_CRON',
    );
    expect((await A.send('GET', '/scheduler/tasks/999999')).body.code).toBe('TASK_NOT_FOUND');
    expect((await A.send('POST', `/scheduler/tasks/${task.body.data.id}/run`)).status).toBe(200);
    expect((await A.send('GET', `/scheduler/tasks/${task.body.data.id}/executions`)).status).toBe(200);
    expect((await A.send('GET', '/scheduler/executions')).status).toBe(200);
    expect((await A.send('DELETE', `/scheduler/tasks/${task.body.data.id}`)).status).toBe(200);
    expect(A.asserted()).toEqual([]);
  });

  it('object stores: plans of a plannable create and their apply, conflicts, a store that does not answer', async () => {
    const store = { name: 'offsite', endpoint: 'http://127.0.0.1:1', access_key_id: 'AKIDDESCRIPTION', secret_access_key: 'description-secret-1' };
    const plan = await A.send('POST', '/object-stores', { query: { plan: 'true' }, body: store });
    expect(plan.status, plan.text).toBe(201);
    const other = await A.send('POST', '/object-stores', { query: { plan: 'true' }, body: store });
    const applied = await A.send('POST', `/plans/${plan.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(201);
    // Applying a plan obsoletes the others on the same resource.
    expect((await A.send('POST', `/plans/${other.body.data.id}/apply`)).body.code).toBe('PLAN_NOT_AVAILABLE');
    expect((await A.send('POST', '/object-stores', { body: store })).body.code).toBe('OBJECT_STORE_EXISTS');
    expect((await A.send('GET', '/object-stores/offsite')).status).toBe(200);
    expect((await A.send('GET', '/object-stores/nope')).body.code).toBe('OBJECT_STORE_NOT_FOUND');
    expect((await A.send('GET', '/object-stores/offsite/buckets')).body.code).toBe('OBJECT_STORE_UNREACHABLE');
    expect((await A.send('GET', '/backup-destinations')).status).toBe(200);
    expect((await A.send('DELETE', '/object-stores/offsite')).status).toBe(200);
    expect(A.asserted()).toEqual([]);
  });

  it('the observability app behind the plugin proxy', async () => {
    await waitFor(async () => (await request(a.url, 'GET', '/plugin/observability/config', { token: a.token })).status === 200, 'observability app', 30_000);
    for (const path of [
      '/plugin/observability/config',
      '/plugin/observability/metrics/latest',
      '/plugin/observability/alerts/rules',
      '/plugin/observability/health',
    ])
      expect((await A.send('GET', path)).status, path).toBe(200);
    expect((await A.send('GET', '/plugin/observability/metrics/series', { query: { container: 'desc-nope', metric: 'container.memory.usage' } })).status).toBe(
      404,
    );
    expect((await A.direct(a, 'PUT', '/plugin/observability/alerts/rules', { raw: '[', headers: { 'content-type': 'application/json' } })).body.code).toBe(
      'INVALID_JSON',
    );
    expect((await A.send('PUT', '/plugin/observability/config', { body: { raw_retention: 0 } })).status).toBe(400);
    expect(A.asserted()).toEqual([]);
  });

  it('503 for a missing Docker engine and nginx, 410 for an expired plan', async () => {
    expect((await B.send('GET', '/containers')).body.code).toBe('DOCKER_UNAVAILABLE');
    expect((await B.send('POST', '/volumes', { body: { name: 'desc-vol' } })).body.code).toBe('DOCKER_UNAVAILABLE');
    expect((await B.send('POST', '/security/blocked-ips', { body: { ip: '203.0.113.8', reason: 'no nginx' } })).body.code).toBe('NGINX_UNAVAILABLE');
    const plan = await B.send('POST', '/object-stores', {
      query: { plan: 'true' },
      body: { name: 'late', endpoint: 'http://127.0.0.1:1', access_key_id: 'AKIDLATE', secret_access_key: 'late-secret-123' },
    });
    expect(plan.status).toBe(201);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await B.send('POST', `/plans/${plan.body.data.id}/apply`)).body.code).toBe('PLAN_EXPIRED');
    expect(B.asserted()).toEqual([]);
  });

  it('every answer was checked, and the pending plugins are reported', () => {
    // Prism matched every request to an operation of the description (else it says so, and that is a finding).
    expect(A.sent.length + B.sent.length).toBeGreaterThan(100);
    const pendingFindings = [...A.findings, ...B.findings].filter((f) => f.pending);
    if (pendingFindings.length) console.info(`answers of pending plugins outside the description:\n${JSON.stringify(pendingFindings, null, 2)}`);
    expect([...A.asserted(), ...B.asserted()]).toEqual([]);
  });
});
