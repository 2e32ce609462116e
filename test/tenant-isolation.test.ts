/**
 * Tenant isolation, driven by the live description: tenant B owns a deployment with everything that can hang on it
 * (domain, backup, backup configuration, task, protected route, deployment blocks, log source, alert rule, plan,
 * key); every string of it carries B's marker. Then every operation of `/api/openapi.json` (HTTP, websockets, app
 * routes) is run by tenant A's scoped user and scoped key, and by a default operator and viewer (limited to their
 * deployments, of which they have none), aimed at B's resources by name, by id and through listings:
 * - nothing of B comes back (no answer of 2xx carries B's marker),
 * - no global write (`x-tenancy: global`, not GET) is accepted from any of them.
 * Figures are printed: operations × principals checked, leaks, global writes accepted.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchProxy, startAgent, type TestAgent } from './helpers/agent.js';
import { operationsOf, sampleValue, type Operation } from './helpers/authz-matrix.js';

const RUN = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
const MARK = `tb${RUN}`;
const DEP_A = `ta${RUN}`;
const DEP_B = MARK;
const PASS = 'Tenant-Pass-w0rd!';
const COMPOSE = `services:
  web:
    image: agent-test/busybox:latest
    command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
    stop_signal: SIGKILL
    environment:
      MARKER: \${MARKER}
    volumes: ["data:/data"]
    labels:
      agent.test: "1"
volumes:
  data: {}
`;

type Json = Record<string, any>;

interface Principal {
  name: string;
  token: string;
}

interface Outcome {
  op: Operation;
  who: string;
  url: string;
  status: number;
  leak: boolean;
  detail: string;
}

/** A body that satisfies the schema's required fields, every deployment field naming B. */
function sampleBody(schema: Json | undefined, depth = 0): unknown {
  if (!schema || depth > 5) return {};
  const s = schema.anyOf?.find((x: Json) => x.type !== 'null') ?? schema;
  if (s.type === 'object' || s.properties) {
    const out: Json = {};
    for (const key of (s.required ?? []) as string[]) {
      const prop = s.properties?.[key] ?? {};
      out[key] = /^(deployment|deployment_name|target_name)$/.test(key) ? DEP_B : sampleBody(prop, depth + 1);
    }
    for (const key of ['deployment', 'deployment_name']) if (s.properties?.[key] && !(key in out)) out[key] = DEP_B;
    return out;
  }
  if (s.type === 'array') return (s.minItems ?? 0) > 0 ? [sampleBody(s.items, depth + 1)] : [];
  return sampleValue(s);
}

describe('tenant isolation (all built-in plugins)', () => {
  let agent: TestAgent;
  let ops: Operation[];
  const outcomes: Outcome[] = [];
  /** B's resources by the path template that names them. */
  const ids: Record<string, string> = {};
  const api = (method: string, path: string, body?: unknown, token?: string) => agent.api(method, path, { body, token });
  const must = async (res: Promise<{ status: number; text: string; body: any }>, ...ok: number[]) => {
    const r = await res;
    if (!ok.includes(r.status)) throw new Error(`setup call answered ${r.status}: ${r.text}`);
    return r.body?.data;
  };

  beforeAll(async () => {
    const edgeDir = mkdtempSync(join(tmpdir(), 'tenants-edge-'));
    agent = await startAgent({
      plugins: ['*'],
      config: {
        proxy: scratchProxy(edgeDir),
      },
    });
    const user = async (username: string, role: string, grants: [string, string][] = []) => {
      const u = await must(api('POST', '/api/users', { username, email: `${username}@example.com`, password: PASS, role }), 201);
      for (const [deployment_name, access_level] of grants) await must(api('POST', `/api/users/${u.id}/deployments`, { deployment_name, access_level }), 201);
      return { id: u.id as number, token: await agent.login(username, PASS) };
    };
    // Each tenant creates its own deployment (a scoped user becomes its admin).
    const a = await user(`ta-user-${RUN}`, 'operator');
    const b = await user(`tb-user-${RUN}`, 'operator');
    await must(
      api('POST', '/api/deployments', { name: DEP_A, compose_content: COMPOSE, env_vars: [{ key: 'MARKER', value: 'tenant-a' }], auto_start: true }, a.token),
      201,
    );
    await must(
      api(
        'POST',
        '/api/deployments',
        { name: DEP_B, compose_content: COMPOSE, env_vars: [{ key: 'MARKER', value: `${MARK}-secret` }], auto_start: true },
        b.token,
      ),
      201,
    );
    const keyA = await must(api('POST', '/api/apikeys', { name: 'tenant-a', role: 'operator', deployments: [DEP_A] }, a.token), 201);
    const keyB = await must(api('POST', '/api/apikeys', { name: `${MARK}-key`, role: 'operator', deployments: [DEP_B] }, b.token), 201);
    ids['/api/apikeys/{id}'] = String(keyB.id);
    ids['/api/users/{id}'] = String(b.id);

    // Everything that hangs on B's deployment, made by B itself.
    const asB = (method: string, path: string, body?: unknown, ...ok: number[]) =>
      must(api(method, path, body, b.token), ...(ok.length ? ok : [200, 201, 202]));
    const domain = await asB('POST', `/api/deployments/${DEP_B}/domains`, {
      service: 'web',
      domain: `${MARK}.example.test`,
      container_port: 8080,
      path_prefix: '/',
      strip_prefix: false,
      ssl: { enabled: false },
      aliases: [],
    });
    ids['/api/deployments/{name}/domains/{domainId}'] = String(domain.id);
    ids['/api/certificates/{domain}'] = `${MARK}.example.test`;
    await asB('PUT', `/api/deployments/${DEP_B}/security`, {
      enabled: true,
      blocked_ips: ['198.51.100.7'],
      protected_paths: [{ pattern: `/${MARK}`, enabled: true }],
      rate_limits: [],
    });
    const route = await asB('POST', '/api/security/protected-routes', {
      path: `/${MARK}-admin`,
      method: 'ALL',
      auth_type: 'basic',
      credentials: `${MARK}:pw-${MARK}`,
      deployment: DEP_B,
    });
    ids['/api/security/protected-routes/{id}'] = String(route.id);
    await asB('PUT', `/api/deployments/${DEP_B}/log-sources`, { sources: [{ id: 'applog', name: `${MARK} log`, path: 'app.log' }] });
    await asB('PUT', `/api/deployments/${DEP_B}/backup-config`, { enabled: false, retention: 3 });
    const job = await asB('POST', '/api/backups', { deployment_name: DEP_B, include_database: false, description: `${MARK} backup` });
    ids['/api/backups/jobs/{id}'] = job.job_id;
    for (let i = 0; i < 100; i++) {
      const j = await asB('GET', `/api/backups/jobs/${job.job_id}`);
      if (j.status === 'completed') {
        ids['/api/backups/{id}'] = j.result.backup_id;
        break;
      }
      if (j.status === 'failed') throw new Error(`B's backup failed: ${j.error}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const task = await asB('POST', '/api/scheduler/tasks', {
      deployment_name: DEP_B,
      task_type: 'restart',
      cron_expr: '0 3 * * *',
      action: '',
      description: `${MARK} nightly`,
    });
    ids['/api/scheduler/tasks/{id}'] = String(task.id);
    await asB('PUT', '/api/plugin/observability/alerts/rules', [
      {
        name: `${MARK} cpu`,
        deployment: DEP_B,
        metric: 'container.cpu.usage',
        comparison: 'above',
        threshold: 99,
        for_seconds: 60,
        enabled: true,
        targets: [],
        action: '',
      },
    ]);
    const plan = await must(agent.api('POST', `/api/deployments/${DEP_B}/restart`, { token: b.token, query: { plan: true } }), 201);
    ids['/api/plans/{id}'] = plan.id;
    const containers = await must(api('GET', '/api/containers', undefined, b.token), 200);
    const mine = (containers as Json[]).find((c) => c.deployment === DEP_B);
    if (!mine) throw new Error("B's container is not listed for B");
    ids['/api/containers/{id}'] = mine.id;
    const volumes = await must(api('GET', '/api/volumes', undefined, b.token), 200);
    const volume = (volumes as Json[]).find((v) => v.deployment === DEP_B);
    if (volume) ids['/api/volumes/{name}'] = volume.name;
    ids['/api/networks/{name}'] = `${DEP_B}_default`;
    const audit = await must(agent.api('GET', '/api/audit/events', { query: { resource_id: DEP_B, limit: 1 } }), 200);
    if (audit[0]) ids['/api/audit/events/{id}'] = String(audit[0].id);

    const viewer = await user(`t-viewer-${RUN}`, 'viewer');
    const operator = await user(`t-operator-${RUN}`, 'operator');
    const principals: Principal[] = [
      { name: 'tenant-a-user', token: a.token },
      { name: 'tenant-a-key', token: keyA.key },
      { name: 'default-operator', token: operator.token },
      { name: 'default-viewer', token: viewer.token },
    ];

    ops = operationsOf((await agent.api('GET', '/api/openapi.json')).body).filter((o) => o.permission !== 'public');
    for (const op of ops) {
      let path = op.path;
      const query = new URLSearchParams();
      for (const p of op.params) {
        if (p.in === 'path') {
          const value =
            p.name === op.deploymentParam
              ? DEP_B
              : ids[op.path] && p.name === op.path.match(/\{(\w+)\}(?!.*\{)/)?.[1]
                ? ids[op.path]!
                : String(sampleValue(p.schema, p.name));
          path = path.replace(`{${p.name}}`, encodeURIComponent(value));
        } else if (p.in === 'query') {
          if (/^deployment(_name)?$/.test(p.name)) query.set(p.name, DEP_B);
          else if (p.required) query.set(p.name, String(sampleValue(p.schema, p.name)));
        }
      }
      const url = path + (query.size ? `?${query}` : '');
      for (const who of principals) {
        let status: number;
        let text: string;
        if (op.kind === 'websocket') ({ status, text } = await socket(agent, url, who.token));
        else {
          const body = op.body ? JSON.stringify(sampleBody(op.body)) : undefined;
          const res = await fetch(new URL(url, agent.url), {
            method: op.method,
            body,
            signal: AbortSignal.timeout(30_000),
            headers: { authorization: `Bearer ${who.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
          }).catch((err: Error) => ({ status: 599, text: async () => String(err) }));
          status = res.status;
          text = await res.text().catch(() => '');
        }
        outcomes.push({ op, who: who.name, url, status, leak: status < 300 && text.includes(MARK), detail: text.slice(0, 200) });
      }
    }
  }, 900_000);

  afterAll(async () => {
    for (const name of [DEP_A, DEP_B])
      await agent?.api('DELETE', `/api/deployments/${name}`, { query: { remove_files: true, remove_volumes: true } }).catch(() => undefined);
    await agent?.stop();
  });

  it('shows nothing of tenant B to anyone else limited to deployments', () => {
    const leaks = outcomes.filter((o) => o.leak);
    const globalWrites = outcomes.filter((o) => o.status < 300 && o.op.method !== 'GET' && tenancyOf(o.op) === 'global');
    const principals = new Set(outcomes.map((o) => o.who)).size;
    console.log(
      `tenant isolation: ${ops.length} operations × ${principals} principals = ${outcomes.length} checks; leaks ${leaks.length}; global writes accepted ${globalWrites.length}; B's resources named by id: ${Object.keys(ids).length}`,
    );
    expect(leaks.map((o) => `${o.op.method} ${o.url} × ${o.who}: ${o.status} ${o.detail}`)).toEqual([]);
    expect(globalWrites.map((o) => `${o.op.method} ${o.url} × ${o.who}: ${o.status} ${o.detail}`)).toEqual([]);
  });

  it("never lets them act on B's deployment or B's resources by id", () => {
    const aimed = outcomes.filter((o) => o.op.deploymentParam || Object.keys(ids).includes(o.op.path));
    expect(aimed.length).toBeGreaterThan(50);
    const accepted = aimed.filter((o) => o.status < 300);
    expect(accepted.map((o) => `${o.op.method} ${o.url} × ${o.who}: ${o.status} ${o.detail}`)).toEqual([]);
  });

  it('refuses every global operation to principals limited to deployments', () => {
    const global = outcomes.filter((o) => tenancyOf(o.op) === 'global' && !o.op.deploymentScoped);
    expect(global.length).toBeGreaterThan(100);
    const wrong = global.filter((o) => o.status !== 403);
    expect(wrong.map((o) => `${o.op.method} ${o.url} × ${o.who}: ${o.status} ${o.detail}`)).toEqual([]);
  });

  it('covers every operation for every principal', () => {
    for (const op of ops) expect(outcomes.filter((o) => o.op === op).length, op.id).toBe(4);
    expect(Object.keys(ids)).toEqual(
      expect.arrayContaining([
        '/api/backups/{id}',
        '/api/backups/jobs/{id}',
        '/api/scheduler/tasks/{id}',
        '/api/security/protected-routes/{id}',
        '/api/deployments/{name}/domains/{domainId}',
        '/api/apikeys/{id}',
        '/api/users/{id}',
        '/api/plans/{id}',
        '/api/containers/{id}',
      ]),
    );
  });
});

const tenancyOf = (op: Operation): string => op.tenancy;

/** A websocket outcome as a status: ready → 200 (with the first messages), a refusal → its HTTP equivalent. */
function socket(agent: TestAgent, url: string, token: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(new URL(url, agent.url.replace(/^http/, 'ws')));
    let text = '';
    let status = 0;
    const done = () => {
      clearTimeout(timer);
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
      resolve({ status: status || 408, text });
    };
    const timer = setTimeout(done, 3000);
    ws.on('open', () => ws.send(token));
    ws.on('message', (data) => {
      text += data.toString();
      if (!status && text.includes('"ready"')) status = 200;
    });
    ws.on('close', (code, reason) => {
      if (!status) status = /NOT_FOUND/.test(reason.toString()) ? 404 : code === 1008 ? 403 : 500;
      text += reason.toString();
      done();
    });
    ws.on('error', () => done());
  });
}
