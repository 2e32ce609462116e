/**
 * Connections given by a deployment's database service: real deployments (deployments + docker plugins) run
 * PostgreSQL and MariaDB images built locally from the host's binaries; the agent finds the container address and
 * takes the login from its environment. Also: a principal with databases:read only cannot use allow_write; and the
 * tenancy of the routes (issue #14): two tenants (each a scoped user and a scoped key) reach their own deployment's
 * database by {deployment, service}, never the other's (404) and never by host (403 GLOBAL_SCOPE_REQUIRED, whatever
 * the address); read access connects with an explicit login only; a global operator keeps the host form.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { ensurePostgresImage } from '../../backups/test/helpers/postgres-image.js';
import { ensureMariaDbImage } from './mariadb-image.js';
import { createGlobalUser, createTenant, expectGlobalOnly, principals, type Tenant } from '../../docker/test/tenants.js';

const RUN = `t${randomBytes(3).toString('hex')}`;
const DEPLOYMENT = `${RUN}-dbapp`;
const MARIA_DEPLOYMENT = `${RUN}-mariaapp`;
const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;
let agent: TestAgent;

const compose = (image: string) => `services:
  db:
    image: ${image}
    environment:
      POSTGRES_PASSWORD: \${DB_PASSWORD}
      POSTGRES_DB: appdata
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
  web:
    image: agent-test/busybox:latest
    command: ["httpd", "-f", "-p", "80", "-h", "/www"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

const mariaCompose = (image: string) => `services:
  mariadb:
    image: ${image}
    environment:
      MARIADB_ROOT_PASSWORD: \${DB_PASSWORD}
      MARIADB_DATABASE: shop
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

beforeAll(async () => {
  const [pgImage, mariaImage] = [ensurePostgresImage(), ensureMariaDbImage()];
  agent = await startAgent({ plugins: ['docker', 'deployments', 'databases', 'access'] });
  for (const [name, content] of [
    [DEPLOYMENT, compose(pgImage)],
    [MARIA_DEPLOYMENT, mariaCompose(mariaImage)],
  ] as const) {
    const created = await agent.api('POST', '/deployments', {
      body: { name, compose_content: content, env_vars: [{ key: 'DB_PASSWORD', value: PASSWORD }], auto_start: true },
    });
    expect(created.status, created.text).toBe(201);
  }
});

afterAll(async () => {
  for (const name of [DEPLOYMENT, MARIA_DEPLOYMENT]) await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } });
  await agent?.stop();
  for (const name of [DEPLOYMENT, MARIA_DEPLOYMENT]) {
    const ids = spawnSync('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${name}`], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean);
    if (ids.length) spawnSync('docker', ['rm', '-f', '-v', ...ids]);
    spawnSync('docker', ['network', 'rm', `${name}_default`]);
  }
});

/** Polls `test` until the server in the container listens (it initialises first: 424 meanwhile). */
async function whenReady(body: Record<string, unknown>) {
  const end = Date.now() + 60_000;
  let res = await post('test', body);
  while (res.status !== 200 && Date.now() < end) {
    expect([424, 409, 404]).toContain(res.status);
    await new Promise((r) => setTimeout(r, 300));
    res = await post('test', body);
  }
  return res;
}

const post = (path: string, body: Record<string, unknown>, token?: string) => agent.api('POST', `/databases/${path}`, { body, token });

describe('databases of a deployment', () => {
  it("connects to the deployment's database service with the login of its environment", async () => {
    const res = await whenReady({ deployment: DEPLOYMENT });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ type: 'postgres', port: 5432, database: 'appdata', host: expect.stringMatching(/^\d+\.\d+\.\d+\.\d+$/) });
    expect(res.text).not.toContain(PASSWORD);

    const list = await post('list', { deployment: DEPLOYMENT, service: 'db' });
    expect(list.body.data.map((d: { name: string }) => d.name)).toContain('appdata');
    const write = await post('query', { deployment: DEPLOYMENT, query: 'CREATE TABLE notes (id int)', allow_write: true });
    expect(write.status, write.text).toBe(200);
    const tables = await post('tables', { deployment: DEPLOYMENT, database: 'appdata' });
    expect(tables.body.data.map((t: { name: string }) => t.name)).toEqual(['notes']);

    // Writing queries are audited with the statement kind, never the text or the login.
    const audit = await agent.api('GET', '/audit/events', { query: { action: 'databases.query.write' } });
    expect(audit.status).toBe(200);
    expect(audit.body.data.filter((e: { deployment: string }) => e.deployment === DEPLOYMENT)).toHaveLength(1);
    expect(audit.body.data[0]).toMatchObject({
      deployment: DEPLOYMENT,
      success: true,
      detail: { statement: 'CREATE', length: 'CREATE TABLE notes (id int)'.length },
    });
    expect(JSON.stringify(audit.body.data)).not.toContain(PASSWORD);
  });

  it('finds a MariaDB service by its image and logs in as root with MARIADB_ROOT_PASSWORD', async () => {
    const res = await whenReady({ deployment: MARIA_DEPLOYMENT });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ type: 'mariadb', port: 3306, database: 'shop' });
    const write = await post('query', { deployment: MARIA_DEPLOYMENT, query: 'CREATE TABLE orders (id INT)', allow_write: true });
    expect(write.status, write.text).toBe(200);
    const tables = await post('tables', { deployment: MARIA_DEPLOYMENT, database: 'shop' });
    expect(tables.body.data.map((t: { name: string }) => t.name)).toEqual(['orders']);
    const user = await post('users/create', { deployment: MARIA_DEPLOYMENT, user: 'shop_app', user_password: 'Sh0p-app-pass' });
    expect(user.status, user.text).toBe(201);
  });

  it('answers clear errors for unknown deployments, non-database services and mixed fields', async () => {
    const unknown = await post('test', { deployment: `${RUN}-nothing` });
    expect(unknown.status).toBe(404);
    const web = await post('test', { deployment: DEPLOYMENT, service: 'web' });
    expect(web.status).toBe(400);
    expect(web.body.error).toContain('type');
    const both = await post('test', { deployment: DEPLOYMENT, host: '127.0.0.1' });
    expect(both.status).toBe(400);
    const wrong = await post('test', { deployment: DEPLOYMENT, username: 'postgres', password: 'wrong' });
    expect(wrong.status).toBe(422);
    expect(wrong.body.code).toBe('DB_AUTH_FAILED');
  });

  it('refuses allow_write and database changes to a principal with databases:read only', async () => {
    const user = await agent.api('POST', '/users', {
      body: { username: `reader${RUN}`, email: `reader${RUN}@example.org`, password: 'Reader-Pass-2024!x', role: 'viewer', permissions: ['databases:read'] },
    });
    expect(user.status, user.text).toBe(201);
    const scoped = await agent.login(`reader${RUN}`, 'Reader-Pass-2024!x');
    // A viewer limited to its deployments (the default) has no access to this one: 404, as for a deployment it
    // cannot see; and no host form at all.
    expect((await post('test', { deployment: DEPLOYMENT }, scoped)).status).toBe(404);
    expect((await post('test', { type: 'postgres', host: '127.0.0.1', port: 1, username: 'x', password: 'y' }, scoped)).body.code).toBe(
      'GLOBAL_SCOPE_REQUIRED',
    );

    // The host form needs global scope: the same viewer, global.
    const global = await agent.api('POST', '/users', {
      body: {
        username: `greader${RUN}`,
        email: `greader${RUN}@example.org`,
        password: 'Reader-Pass-2024!x',
        role: 'viewer',
        permissions: ['databases:read'],
        scope: 'global',
      },
    });
    expect(global.status, global.text).toBe(201);
    const token = await agent.login(`greader${RUN}`, 'Reader-Pass-2024!x');
    const conn = { type: 'postgres', host: '127.0.0.1', port: 1, username: 'x', password: 'y' };
    const write = await post('query', { ...conn, query: 'DELETE FROM t', allow_write: true }, token);
    expect(write.status).toBe(403);
    expect(write.body.error).toContain('databases:write');
    expect((await post('create', { ...conn, name: 'x_db' }, token)).status).toBe(403);
    expect((await post('users/create', { ...conn, user: 'u', user_password: 'p' }, token)).status).toBe(403);
    expect((await post('privileges/grant', { ...conn, user: 'u', database: 'd', privileges: ['SELECT'] }, token)).status).toBe(403);
    // Reading is allowed: the request reaches the (absent) server.
    expect((await post('test', conn, token)).body.code).toBe('DB_UNREACHABLE');
  });
});

describe('databases and tenants', () => {
  let alice: Tenant; // write on the PostgreSQL deployment
  let bob: Tenant; // write on the MariaDB deployment
  let rita: Tenant; // read on the PostgreSQL deployment
  let operator: string;
  let mariaIp: string;

  beforeAll(async () => {
    [alice, bob, rita] = await Promise.all([
      createTenant(agent, `alice${RUN}`, [DEPLOYMENT]),
      createTenant(agent, `bob${RUN}`, [MARIA_DEPLOYMENT]),
      createTenant(agent, `rita${RUN}`, [DEPLOYMENT], 'read'),
    ]);
    operator = await createGlobalUser(agent, `gop${RUN}`);
    expect((await whenReady({ deployment: DEPLOYMENT })).status).toBe(200);
    const maria = await whenReady({ deployment: MARIA_DEPLOYMENT });
    expect(maria.status).toBe(200);
    mariaIp = maria.body.data.host;
  });

  const every = (connection: Record<string, unknown>): [string, Record<string, unknown>][] => [
    ['test', connection],
    ['list', connection],
    ['tables', { ...connection, database: 'shop' }],
    ['query', { ...connection, query: 'SELECT 1' }],
    ['query', { ...connection, query: 'DROP DATABASE shop', allow_write: true }],
    ['create', { ...connection, name: 'stolen' }],
    ['users/create', { ...connection, user: 'intruder', user_password: 'Intruder-1' }],
    ['privileges/grant', { ...connection, user: 'intruder', database: 'shop', privileges: ['ALL'] }],
  ];

  it("connects each tenant to its own deployment's database by {deployment, service}", async () => {
    for (const [who, token] of principals(alice)) {
      const res = await post('test', { deployment: DEPLOYMENT, service: 'db' }, token);
      expect(res.status, `${who}: ${res.text}`).toBe(200);
      expect(res.body.data).toMatchObject({ type: 'postgres', database: 'appdata' });
      // The explicit form: {type, deployment, service, port?, username, password, database?}.
      const explicit = await post(
        'query',
        {
          type: 'postgres',
          deployment: DEPLOYMENT,
          service: 'db',
          port: 5432,
          username: 'postgres',
          password: PASSWORD,
          database: 'appdata',
          query: 'SELECT 1 AS one',
        },
        token,
      );
      expect(explicit.status, `${who}: ${explicit.text}`).toBe(200);
      expect(explicit.body.data.rows).toEqual([[1]]);
    }
    const created = await post('create', { deployment: DEPLOYMENT, name: 'alice_db' }, alice.key);
    expect(created.status, created.text).toBe(201);
    for (const [who, token] of principals(bob)) expect((await post('test', { deployment: MARIA_DEPLOYMENT }, token)).status, who).toBe(200);
  });

  it("answers 404 for the other tenant's deployment on every route", async () => {
    for (const [who, token] of principals(alice)) {
      for (const [path, body] of [
        ...every({ deployment: MARIA_DEPLOYMENT }),
        ...every({ deployment: MARIA_DEPLOYMENT, service: 'mariadb', username: 'root', password: PASSWORD }),
      ]) {
        const res = await post(path, body, token);
        expect(res.status, `${who} ${path} ${JSON.stringify(body)}`).toBe(404);
      }
    }
    for (const [who, token] of principals(bob)) expect((await post('list', { deployment: DEPLOYMENT }, token)).status, who).toBe(404);
    // Nothing reached the other tenant's server.
    const databases = await post('list', { deployment: MARIA_DEPLOYMENT }, bob.user);
    expect(databases.body.data.map((d: { name: string }) => d.name)).toContain('shop');
    expect(databases.body.data.map((d: { name: string }) => d.name)).not.toContain('stolen');
  });

  it('refuses the host form to scoped principals, whatever the address', async () => {
    for (const [who, token] of [...principals(alice), ...principals(bob)]) {
      for (const host of [mariaIp, '127.0.0.1', 'localhost', '169.254.169.254', '10.0.0.1', '::1', 'db.example.com', '93.184.215.14']) {
        for (const [path, body] of every({ type: 'mariadb', host, port: 3306, username: 'root', password: PASSWORD })) {
          expectGlobalOnly(await post(path, body, token), `${who} ${path} host ${host}`);
        }
      }
    }
  });

  it('connects with read access only with an explicit login, and changes nothing', async () => {
    for (const [who, token] of principals(rita)) {
      const fromEnv = await post('test', { deployment: DEPLOYMENT }, token);
      expect(fromEnv.status, who).toBe(403);
      expect(fromEnv.body.error, who).toContain('environment');
      const login = { deployment: DEPLOYMENT, username: 'postgres', password: PASSWORD, database: 'appdata' };
      expect((await post('test', login, token)).status, who).toBe(200);
      expect((await post('query', { ...login, query: 'SELECT 1' }, token)).status, who).toBe(200);
      const write = await post('query', { ...login, query: 'CREATE TABLE rita (id int)', allow_write: true }, token);
      expect(write.status, who).toBe(403);
      for (const [path, body] of every(login).slice(5)) expect((await post(path, body, token)).status, `${who} ${path}`).toBe(403);
    }
  });

  it('keeps the host form for a global operator, private ranges included', async () => {
    const direct = await post('test', { type: 'mariadb', host: mariaIp, username: 'root', password: PASSWORD, database: 'shop' }, operator);
    expect(direct.status, direct.text).toBe(200);
    expect(direct.body.data).toMatchObject({ type: 'mariadb', host: mariaIp, database: 'shop' });
    // A name is resolved once; the answer names it as given.
    const byName = await post('test', { type: 'postgres', host: 'localhost', port: 1, username: 'x', password: 'y' }, operator);
    expect(byName.body.code).toBe('DB_UNREACHABLE');
    const unknown = await post('test', { type: 'postgres', host: 'no-such-host.invalid', username: 'x', password: 'y' }, operator);
    expect(unknown.status).toBe(424);
    expect(unknown.body.code).toBe('DB_UNREACHABLE');
  });
});
