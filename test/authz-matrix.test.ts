/**
 * The authorization matrix: every operation of `/api/openapi.json` (agent with all built-in plugins) × every kind
 * of principal → the class of answer it must get: 401 (anonymous, expired token, expired or revoked key), 403 (permission or
 * deployment level missing), 404/403 (a deployment it may not see) or anything but 401/403 (holds the right).
 * Operations come from the live description, so routes added by later plugins are covered without editing this.
 * Inputs are harmless (see `buildVariant`): throwaway ids, no valid creation bodies.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt, SignJWT } from 'jose';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, scratchProxy, startAgent, type TestAgent } from './helpers/agent.js';
import {
  buildVariant,
  expectationFor,
  matrixPrincipal,
  operationsOf,
  satisfies,
  type Expectation,
  type MatrixPrincipal,
  type Operation,
  type Variant,
} from './helpers/authz-matrix.js';

const PASS = 'Matrix-Pass-w0rd!';
// Unique per run: the deployments are real compose projects on the shared Docker engine.
const RUN = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
const DEP_A = `mxa-${RUN}`;
const DEP_B = `mxb-${RUN}`;
const COMPOSE = `services:
  web:
    image: agent-test/busybox:latest
    command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
    # httpd as PID 1 ignores SIGTERM: stop at once instead of after the grace period.
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;
const REQUEST_TIMEOUT_MS = 30_000;
const METHOD_ORDER = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

interface Cell {
  op: Operation;
  who: string;
  variant: Variant;
  expected: Expectation;
  status: number | 'timeout';
  detail: string;
  ms: number;
}

async function httpStatus(agent: TestAgent, op: Operation, who: MatrixPrincipal, v: Variant): Promise<{ status: number | 'timeout'; detail: string }> {
  const headers: Record<string, string> = {};
  if (who.token) headers.authorization = `Bearer ${who.token}`;
  let body: string | undefined;
  if (v.body !== undefined) {
    body = JSON.stringify(v.body);
    headers['content-type'] = 'application/json';
  }
  try {
    const res = await fetch(new URL(v.url, agent.url), { method: op.method, headers, body, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    const text = await res.text().catch(() => '');
    return { status: res.status, detail: text.slice(0, 160) };
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') return { status: 'timeout', detail: 'no answer in time' };
    throw err;
  }
}

/** A websocket outcome as the status the same refusal has over HTTP (ready → 200). */
function wsStatus(agent: TestAgent, who: MatrixPrincipal, v: Variant): Promise<{ status: number | 'timeout'; detail: string }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(new URL(v.url, agent.url.replace(/^http/, 'ws')));
    const done = (status: number | 'timeout', detail: string) => {
      clearTimeout(timer);
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
      resolve({ status, detail });
    };
    const timer = setTimeout(() => done('timeout', 'no answer in time'), REQUEST_TIMEOUT_MS);
    ws.on('unexpected-response', (_req, res) => done(res.statusCode ?? 500, 'upgrade refused'));
    ws.on('open', () => ws.send(who.token ?? ''));
    ws.on('message', (data) => {
      const text = data.toString();
      done(text.includes('"ready"') ? 200 : 500, text.slice(0, 160));
    });
    ws.on('close', (code, reasonBuf) => {
      const reason = reasonBuf.toString();
      const m = /^([A-Z_]+):/.exec(reason);
      const byCode: Record<string, number> = { FORBIDDEN: 403, NOT_FOUND: 404, UNAUTHORIZED: 401, INVALID_TOKEN: 401, VALIDATION_FAILED: 400 };
      let status = code === 1011 ? 500 : m ? (byCode[m[1]!] ?? 400) : /token|authentication/.test(reason) ? 401 : 400;
      if (code === 1000) status = 200;
      done(status, `close ${code} ${reason}`);
    });
    ws.on('error', (err) => done(500, String(err)));
  });
}

describe('authorization matrix (all built-in plugins)', () => {
  let agent: TestAgent;
  let doc: Record<string, any>;
  let ops: Operation[];
  const principals: MatrixPrincipal[] = [];
  const cells: Cell[] = [];
  let hasDeployments = false;
  let ensureDeployments: () => Promise<void> = async () => undefined;

  beforeAll(async () => {
    // The edge plugin defaults to the host's nginx (/etc/nginx/agent, nginx -s reload): point it at a scratch
    // folder with no-op commands, the matrix is about who may call what, not about nginx.
    const edgeDir = mkdtempSync(join(tmpdir(), 'authz-edge-'));
    agent = await startAgent({
      plugins: ['*'],
      config: {
        proxy: scratchProxy(edgeDir),
      },
    });
    const api = (method: string, path: string, body?: unknown, token?: string) => agent.api(method, path, { body, token });
    const must = async (res: Promise<{ status: number; text: string; body: any }>, status: number) => {
      const r = await res;
      if (r.status !== status) throw new Error(`setup call answered ${r.status}: ${r.text}`);
      return r.body.data;
    };
    doc = (await agent.api('GET', '/api/openapi.json')).body;
    // With the deployments plugin, grants name real deployments (created stopped, removed in afterAll).
    hasDeployments = !!doc.paths['/api/deployments']?.post;
    const grants: [number, string, string][] = [];
    ensureDeployments = async () => {
      if (!hasDeployments) return;
      for (const name of [DEP_A, DEP_B]) {
        if ((await api('GET', `/api/deployments/${name}`)).status === 404) {
          await must(api('POST', '/api/deployments', { name, compose_content: COMPOSE, auto_start: false }), 201);
          for (const [id, deployment_name, access_level] of grants.filter((g) => g[1] === name)) {
            await must(api('POST', `/api/users/${id}/deployments`, { deployment_name, access_level }), 201);
          }
        }
      }
    };
    await ensureDeployments();
    const user = async (username: string, role: string, own: [string, string][], scope: 'global' | 'deployments' = 'deployments') => {
      const u = await must(api('POST', '/api/users', { username, email: `${username}@example.com`, password: PASS, role, scope }), 201);
      for (const [deployment_name, access_level] of own) {
        await must(api('POST', `/api/users/${u.id}/deployments`, { deployment_name, access_level }), 201);
        grants.push([u.id, deployment_name, access_level]);
      }
      return agent.login(username, PASS);
    };
    const infoOf = async (token: string) => (await must(api('GET', '/api/auth/validate', undefined, token), 200)).principal;

    const operator = await user('m-operator', 'operator', [[DEP_A, 'admin']]);
    const globalOperator = await user('m-global-operator', 'operator', [], 'global');
    const viewer = await user('m-viewer', 'viewer', []);
    const reader = await user('m-reader', 'operator', [[DEP_A, 'read']]);
    const scopedKey = (await must(api('POST', '/api/apikeys', { name: 'matrix-scoped', role: 'operator', deployments: [DEP_A] }, operator), 201)).key as string;
    const revoked = await must(api('POST', '/api/apikeys', { name: 'matrix-revoked', role: 'admin' }), 201);
    await must(api('POST', `/api/apikeys/${revoked.id}/revoke`), 200);
    const expiring = await must(api('POST', '/api/apikeys', { name: 'matrix-expiring', role: 'admin', expires_in: 1 }), 201);
    // The admin's own session token, correctly signed with the agent's key, but expired a minute ago.
    const jwtKey = Buffer.from(readFileSync(join(agent.dataDir, 'secrets', 'jwt.key'), 'utf8').trim(), 'base64');
    const adminClaims = decodeJwt(agent.token);
    const expiredToken = await new SignJWT({ tv: adminClaims.tv })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer('agent')
      .setSubject(adminClaims.sub!)
      .setIssuedAt(Math.floor(Date.now() / 1000) - 120)
      .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
      .sign(new Uint8Array(jwtKey));

    // Least privileged first: a destructive operation a stronger principal may run comes after the weaker ones'
    // refusals were recorded, and `ensureDeployments` restores what it removed before the next operation.
    principals.push(
      matrixPrincipal('anonymous', null, null),
      matrixPrincipal('expired-token', expiredToken, null),
      matrixPrincipal('expired-key', expiring.key, null),
      matrixPrincipal('revoked-key', revoked.key, null),
      matrixPrincipal('viewer', viewer, await infoOf(viewer)),
      matrixPrincipal('reader-one-deployment', reader, await infoOf(reader)),
      matrixPrincipal('key-one-deployment', scopedKey, await infoOf(scopedKey)),
      matrixPrincipal('operator', operator, await infoOf(operator)),
      matrixPrincipal('global-operator', globalOperator, await infoOf(globalOperator)),
      matrixPrincipal('admin', agent.token, await infoOf(agent.token)),
    );
    // The same token unexpired works: only the expiry makes the difference.
    const fresh = await new SignJWT({ tv: adminClaims.tv })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer('agent')
      .setSubject(adminClaims.sub!)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(new Uint8Array(jwtKey));
    if ((await request(agent.url, 'GET', '/auth/validate', { token: fresh })).status !== 200) throw new Error("a token signed like the agent's is refused");
    // The expiring key must really be expired before the matrix runs.
    const deadline = Date.now() + 5000;
    while ((await request(agent.url, 'GET', '/auth/validate', { token: expiring.key })).status !== 401) {
      if (Date.now() > deadline) throw new Error('the expiring key did not expire');
      await new Promise((r) => setTimeout(r, 100));
    }
    // Deleting the deployment itself comes last: an admin's call deletes it for real, and the routes below it
    // (`DELETE /deployments/{name}/hook`, …) are judged on a deployment that still exists.
    const last = (o: Operation) => (o.method === 'DELETE' && o.path === '/api/deployments/{name}' ? 1 : 0);
    ops = operationsOf(doc).sort(
      (a, b) => last(a) - last(b) || METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method) || a.path.localeCompare(b.path),
    );

    for (const op of ops) {
      const variants =
        op.deploymentScoped && (op.deploymentParam || op.deploymentQuery) ? [buildVariant(op, DEP_A), buildVariant(op, DEP_B)] : [buildVariant(op, null)];
      for (const variant of variants) {
        for (const who of principals) {
          const expected = expectationFor(op, who, variant);
          const started = Date.now();
          const { status, detail } = op.kind === 'websocket' ? await wsStatus(agent, who, variant) : await httpStatus(agent, op, who, variant);
          cells.push({ op, who: who.name, variant, expected, status, detail, ms: Date.now() - started });
        }
        if (op.method !== 'GET') await ensureDeployments();
      }
    }
  }, 900_000);

  afterAll(async () => {
    if (agent && hasDeployments) {
      for (const name of [DEP_A, DEP_B]) await agent.api('DELETE', `/api/deployments/${name}`, { query: { remove_files: true } }).catch(() => undefined);
    }
    await agent?.stop();
  });

  it('covers every operation of the live description for every principal', async () => {
    const plugins = (await agent.api('GET', '/api/plugins')).body.data as { name: string; status: string; route_count: number }[];
    const running = plugins.filter((p) => p.status === 'running');
    const core = ops.filter((o) => o.plugin === 'core').length;
    // The description lists every registered route: the plugins' own counts add up to it.
    expect(ops.length).toBe(core + running.reduce((n, p) => n + p.route_count, 0));
    expect(new Set(ops.map((o) => o.id)).size).toBe(ops.length);
    for (const op of ops) {
      for (const who of principals) {
        expect(
          cells.some((c) => c.op === op && c.who === who.name),
          `${op.id} × ${who.name}`,
        ).toBe(true);
      }
    }
    const failed = plugins.filter((p) => p.status !== 'running').map((p) => p.name);
    console.log(
      `authorization matrix: ${ops.length} operations (${running.length} plugins running${failed.length ? `; not running: ${failed.join(', ')}` : ''}) × ${principals.length} principals = ${cells.length} checks`,
    );
    expect(running.map((p) => p.name)).toEqual(expect.arrayContaining(['access', 'system', 'credentials']));
  });

  it('answers every cell as expected', () => {
    const wrong = cells.filter((c) => (c.status === 'timeout' ? c.expected.kind !== 'allowed' : !satisfies(c.expected, c.status)));
    const slow = cells.filter((c) => c.status === 'timeout' && c.expected.kind === 'allowed');
    if (slow.length) console.log(`answered late (allowed, not judged): ${slow.map((c) => `${c.op.id}/${c.who}`).join(', ')}`);
    const lines = wrong.map((c) => {
      const exp =
        c.expected.kind === 'allowed'
          ? 'not 401/403'
          : c.expected.kind === 'unauthenticated'
            ? '401'
            : c.expected.kind === 'forbidden'
              ? `403 (${c.expected.why})`
              : `404/403 (${c.expected.why})`;
      return `${c.op.method} ${c.variant.url} [${c.op.id}] × ${c.who}: got ${c.status}, expected ${exp} — ${c.detail}`;
    });
    expect(lines, lines.join('\n')).toEqual([]);
    // Sanity: each class of expectation actually occurred.
    const kinds = new Set(cells.map((c) => c.expected.kind));
    expect([...kinds].sort()).toEqual(['allowed', 'forbidden', 'hidden', 'unauthenticated']);
  });

  it('answers plain reads (GET without ids or required query) with success to every principal holding the right', () => {
    // A principal that may read a collection gets it (possibly empty, filtered to what it may see), never a
    // client error; a 5xx from a missing external service (DNS server, …) is not an authorization matter.
    const plain = (op: Operation) => op.method === 'GET' && op.kind === 'http' && !op.params.some((p) => p.in === 'path' || p.required);
    const bad = cells.filter((c) => plain(c.op) && c.expected.kind === 'allowed' && typeof c.status === 'number' && c.status >= 400 && c.status < 500);
    expect(bad.map((c) => `${c.op.method} ${c.variant.url} × ${c.who}: ${c.status} ${c.detail}`)).toEqual([]);
  });

  it('summarises the matrix per principal', () => {
    const columns = ['2xx', '400', '401', '403', '404', '409', 'other 4xx', '5xx', 'timeout'];
    const table: Record<string, Record<string, number>> = {};
    for (const c of cells) {
      const row = (table[c.who] ??= Object.fromEntries(columns.map((k) => [k, 0])));
      const s = c.status;
      const key = s === 'timeout' ? 'timeout' : s < 300 ? '2xx' : s >= 500 ? '5xx' : columns.includes(String(s)) ? String(s) : 'other 4xx';
      row[key]!++;
    }
    console.table(table);
    // Not authorization failures, but worth a look: server errors on harmless inputs, and the slowest answers.
    const errors = cells.filter((c) => typeof c.status === 'number' && c.status >= 500);
    if (errors.length)
      console.log(`5xx answers (harmless inputs):\n${errors.map((c) => `  ${c.status} ${c.op.method} ${c.variant.url} × ${c.who}: ${c.detail}`).join('\n')}`);
    const slowest = [...cells].sort((a, b) => b.ms - a.ms).slice(0, 8);
    console.log(`slowest: ${slowest.map((c) => `${c.op.id}/${c.who} ${c.ms} ms`).join(', ')}`);
    expect(Object.keys(table)).toHaveLength(principals.length);
  });
});
