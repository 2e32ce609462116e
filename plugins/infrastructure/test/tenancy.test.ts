/**
 * Tenancy of the infrastructure routes (issue #14): everything is global. Principals limited to their deployments
 * (a scoped user and a scoped key of each of two tenants) are refused every route with 403 GLOBAL_SCOPE_REQUIRED,
 * including attaching their own deployment to a shared network (it would reach the shared database, cache and DNS
 * server of everyone) and changing a service's settings or image; nothing changes on the engine. A global operator
 * lists, configures, attaches and detaches (with write access to the deployment, which a global viewer lacks).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobalUser, createTenant, expectGlobalOnly, principals, type Tenant } from '../../docker/test/tenants.js';

const RUN = `ti${randomBytes(3).toString('hex')}`;
const NETWORK_PREFIX = `${RUN}-net`;
const SHARED = `${NETWORK_PREFIX}-shared`;
const A = `${RUN}-a`;
const B = `${RUN}-b`;
const BOX_A = `${RUN}-a-web`;

function docker(...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('docker', args, { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ status: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}
const networksOf = async (container: string) =>
  Object.keys(JSON.parse((await docker('inspect', '-f', '{{json .NetworkSettings.Networks}}', container)).stdout));

describe('infrastructure and tenants', () => {
  let agent: TestAgent;
  let alice: Tenant;
  let bob: Tenant;
  let operator: string;
  let viewer: string;

  beforeAll(async () => {
    agent = await startAgent({
      plugins: ['access', 'docker', 'infrastructure'],
      config: { infrastructure: { project_prefix: `${RUN}-infra`, network_prefix: NETWORK_PREFIX, labels: { 'agent.test': '1' } } },
    });
    // Tenant A's deployment: a running container of its compose project.
    const started = await docker(
      'run',
      '-d',
      '--name',
      BOX_A,
      '--label',
      'agent.test=1',
      '--label',
      `com.docker.compose.project=${A}`,
      '--label',
      'com.docker.compose.service=web',
      'agent-test/busybox:latest',
      'sh',
      '-c',
      'while true; do sleep 1; done',
    );
    expect(started.status, started.stderr).toBe(0);
    [alice, bob] = await Promise.all([createTenant(agent, `alice${RUN}`, [A]), createTenant(agent, `bob${RUN}`, [B])]);
    operator = await createGlobalUser(agent, `gop${RUN}`);
    viewer = await createGlobalUser(agent, `gview${RUN}`, 'viewer', { permissions: ['infrastructure:write'] });
  });

  afterAll(async () => {
    await agent?.stop();
    await docker('rm', '-f', BOX_A);
    for (const n of ['proxy', 'shared']) await docker('network', 'rm', `${NETWORK_PREFIX}-${n}`);
  });

  it('refuses every infrastructure route to scoped principals, attaching their own deployment included', async () => {
    for (const [who, token] of [...principals(alice), ...principals(bob)]) {
      const own = who.startsWith('alice') ? A : B;
      for (const [method, path, body] of [
        ['GET', '/infrastructure', undefined],
        ['GET', '/infrastructure/cache', undefined],
        ['GET', '/infrastructure/cache/logs', undefined],
        ['GET', '/infrastructure/networks', undefined],
        ['PUT', '/infrastructure/cache/settings', { settings: { image: 'agent-test/busybox:latest' } }],
        ['PUT', '/infrastructure/database/settings', { settings: { port: 5432 } }],
        ['POST', '/infrastructure/cache/start', {}],
        ['POST', '/infrastructure/cache/stop', undefined],
        ['POST', '/infrastructure/cache/restart', undefined],
        ['POST', `/infrastructure/networks/${SHARED}/attach`, { deployment: own }],
        ['POST', `/infrastructure/networks/${SHARED}/detach`, { deployment: own }],
        ['POST', `/infrastructure/networks/${SHARED}/attach`, { deployment: own === A ? B : A }],
      ] as const)
        expectGlobalOnly(await agent.api(method, path, { token, body }), `${who} ${method} ${path} ${JSON.stringify(body ?? '')}`);
    }
    // Nothing was created or changed: the shared network does not exist, A's container is on its own network only.
    expect((await docker('network', 'inspect', SHARED)).status).not.toBe(0);
    expect(await networksOf(BOX_A)).toEqual(['bridge']);
    const cache = await agent.api('GET', '/infrastructure/cache', { token: operator });
    expect(cache.body.data).toMatchObject({ status: 'not_created' });
    expect(cache.body.data.settings.image).not.toBe('agent-test/busybox:latest');
  });

  it('lets a global operator configure services and attach or detach a deployment', async () => {
    const list = await agent.api('GET', '/infrastructure', { token: operator });
    expect(list.status).toBe(200);
    expect(list.body.data.map((s: { name: string }) => s.name)).toEqual(expect.arrayContaining(['cache', 'database', 'dns', 'proxy-network']));
    const configured = await agent.api('PUT', '/infrastructure/cache/settings', { token: operator, body: { settings: { max_memory_mb: 64 } } });
    expect(configured.status, configured.text).toBe(200);
    expect(configured.body.data.settings.max_memory_mb).toBe(64);

    // A global principal still needs write access to the deployment it attaches.
    const asViewer = await agent.api('POST', `/infrastructure/networks/${SHARED}/attach`, { token: viewer, body: { deployment: A } });
    expect(asViewer.status, asViewer.text).toBe(403);
    expect(asViewer.body.code).toBe('FORBIDDEN');

    const attached = await agent.api('POST', `/infrastructure/networks/${SHARED}/attach`, { token: operator, body: { deployment: A } });
    expect(attached.status, attached.text).toBe(200);
    expect(attached.body.data).toEqual({ network: SHARED, deployment: A, containers: [BOX_A] });
    expect(await networksOf(BOX_A)).toContain(SHARED);
    const detached = await agent.api('POST', `/infrastructure/networks/${SHARED}/detach`, { token: operator, body: { deployment: A } });
    expect(detached.status, detached.text).toBe(200);
    expect(await networksOf(BOX_A)).not.toContain(SHARED);
  });

  it('bounds integer query parameters (400, never 500)', async () => {
    for (const tail of ['100000000000000000000', '-1', '1.5']) {
      const res = await agent.api('GET', '/infrastructure/cache/logs', { token: operator, query: { tail } });
      expect(res.status, tail).toBe(400);
    }
  });
});
