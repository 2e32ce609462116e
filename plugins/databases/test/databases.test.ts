/**
 * Every database route against a real MariaDB and a real PostgreSQL (Debian packages, started on random loopback
 * ports with data under a temp folder), through the real agent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { freePort, startMariaDb, startPostgres, type DbServer } from './servers.js';

let agent: TestAgent;
const servers: Partial<Record<'mariadb' | 'postgres', DbServer>> = {};

beforeAll(async () => {
  const [a, m, p] = await Promise.all([startAgent({ plugins: ['databases'] }), startMariaDb(), startPostgres()]);
  agent = a;
  servers.mariadb = m;
  servers.postgres = p;
});

afterAll(async () => {
  await Promise.all([agent?.stop(), servers.mariadb?.stop(), servers.postgres?.stop()]);
});

/** Engine-specific SQL of the scenario. */
const SQL = {
  mariadb: {
    createTable: 'CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), data BLOB, made DATE)',
    fill: "INSERT INTO items (id, name, data, made) SELECT seq, CONCAT('n', seq), NULL, '2024-05-06' FROM seq_1_to_1500",
    byId: 'SELECT name FROM items WHERE id = ?',
    byName: 'SELECT id FROM items WHERE name = ?',
    sleep: 'SELECT SLEEP(5)',
    binary: "SELECT X'DEADBEEF' AS b, NULL AS n, CAST('2024-05-06' AS DATE) AS d, 12345678901234567890 AS big",
    analyze: 'ANALYZE TABLE items',
  },
  postgres: {
    createTable: 'CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), data BYTEA, made DATE)',
    fill: "INSERT INTO items (id, name, data, made) SELECT g, 'n' || g, NULL, DATE '2024-05-06' FROM generate_series(1, 1500) g",
    byId: 'SELECT name FROM items WHERE id = $1',
    byName: 'SELECT id FROM items WHERE name = $1',
    sleep: 'SELECT pg_sleep(5)',
    binary: "SELECT '\\xdeadbeef'::bytea AS b, NULL AS n, DATE '2024-05-06' AS d, 12345678901234567890::numeric AS big",
    analyze: 'ANALYZE items',
  },
} as const;

describe.each(['mariadb', 'postgres'] as const)('databases on %s', (engine) => {
  const conn = (extra: Record<string, unknown> = {}) => {
    const s = servers[engine]!;
    return { type: engine, host: s.host, port: s.port, username: s.username, password: s.password, ...extra };
  };
  const post = (path: string, body: Record<string, unknown>, token?: string) => agent.api('POST', `/databases/${path}`, { body, token });
  const listNames = async () => ((await post('list', conn())).body.data as { name: string }[]).map((d) => d.name).sort();
  const count = async () => (await post('query', conn({ database: 'app_db', query: 'SELECT COUNT(*) AS n FROM items' }))).body.data.rows[0][0];

  it('tests a connection and tells the server type and version', async () => {
    const res = await post('test', conn());
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ type: engine, version: expect.any(String), host: '127.0.0.1', port: servers[engine]!.port });
    if (engine === 'mariadb') {
      // `mysql` speaks to MariaDB too; the answer says what the server is.
      const asMysql = await post('test', conn({ type: 'mysql' }));
      expect(asMysql.body.data.type).toBe('mariadb');
    }
  });

  it('answers distinct 4xx codes for a wrong password, an unreachable server and an unknown database', async () => {
    const wrong = await post('test', conn({ password: 'not-the-password' }));
    expect(wrong.status).toBe(422);
    expect(wrong.body).toEqual({ error: expect.any(String), code: 'DB_AUTH_FAILED' });
    expect(wrong.text).not.toContain('not-the-password');

    const unreachable = await post('test', conn({ port: await freePort() }));
    expect(unreachable.status).toBe(424);
    expect(unreachable.body.code).toBe('DB_UNREACHABLE');

    const unknown = await post('test', conn({ database: 'no_such_db' }));
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('DB_NOT_FOUND');

    const missing = await post('test', { type: engine, username: 'x' });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toContain('host');
  });

  it('creates a database (409 when it exists) and lists it with its size', async () => {
    const created = await post('create', conn({ name: 'app_db' }));
    expect(created.status).toBe(201);
    expect(created.body.data).toEqual({ name: 'app_db', type: engine });
    const again = await post('create', conn({ name: 'app_db' }));
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('DB_EXISTS');

    const list = await post('list', conn());
    expect(list.status).toBe(200);
    const entry = list.body.data.find((d: { name: string }) => d.name === 'app_db');
    expect(entry).toMatchObject({ name: 'app_db', system: false });
    expect(typeof entry.size_bytes).toBe('number');
  });

  it('writes only with allow_write, and reads in a read-only transaction by default', async () => {
    const denied = await post('query', conn({ database: 'app_db', query: SQL[engine].createTable }));
    expect(denied.status).toBe(400);
    expect(denied.body.code).toBe('DB_READ_ONLY');

    const create = await post('query', conn({ database: 'app_db', query: SQL[engine].createTable, allow_write: true }));
    expect(create.status, JSON.stringify(create.body)).toBe(200);
    const fill = await post('query', conn({ database: 'app_db', query: SQL[engine].fill, allow_write: true }));
    expect(fill.status, JSON.stringify(fill.body)).toBe(200);
    expect(fill.body.data).toMatchObject({ affected_rows: 1500, columns: [], rows: [], count: 0 });
    await post('query', conn({ database: 'app_db', query: SQL[engine].analyze, allow_write: true }));

    // A write hidden behind a read keyword is stopped by the read-only transaction itself.
    const hidden =
      engine === 'postgres' ? 'WITH gone AS (DELETE FROM items RETURNING id) SELECT count(*) FROM gone' : 'SELECT * FROM items WHERE id = 1 FOR UPDATE';
    const res = await post('query', conn({ database: 'app_db', query: hidden }));
    if (engine === 'postgres') {
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('DB_READ_ONLY');
    }
    for (const q of [
      'DELETE FROM items',
      'UPDATE items SET name = NULL',
      'DROP TABLE items',
      'CALL nothing()',
      "SELECT 1 INTO OUTFILE '/tmp/x'",
      '/*!DELETE FROM items*/',
    ]) {
      const r = await post('query', conn({ database: 'app_db', query: q }));
      expect(r.status, q).toBe(400);
      expect(r.body.code, q).toBe('DB_READ_ONLY');
    }
    expect(Number(await count())).toBe(1500);
  });

  it('lists tables with row estimates and size', async () => {
    const res = await post('tables', conn({ database: 'app_db' }));
    expect(res.status).toBe(200);
    const items = res.body.data.find((t: { name: string }) => t.name === 'items');
    expect(items).toMatchObject({ name: 'items', type: 'table', schema: engine === 'postgres' ? 'public' : 'app_db' });
    expect(items.rows_estimate).toBeGreaterThan(1000);
    expect(items.size_bytes).toBeGreaterThan(0);
    const unknown = await post('tables', conn({ database: 'nope_db' }));
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('DB_NOT_FOUND');
  });

  it('answers rows with a default limit of 1000, a custom limit, bound params and JSON-safe values', async () => {
    const all = await post('query', conn({ database: 'app_db', query: 'SELECT id, name FROM items ORDER BY id' }));
    expect(all.status).toBe(200);
    expect(all.body.data).toMatchObject({ columns: ['id', 'name'], count: 1000, truncated: true, affected_rows: null });
    expect(all.body.data.rows[0]).toEqual([1, 'n1']);
    expect(all.body.data.duration_ms).toEqual(expect.any(Number));

    const five = await post('query', conn({ database: 'app_db', query: 'SELECT id FROM items ORDER BY id', limit: 5 }));
    expect(five.body.data).toMatchObject({ count: 5, truncated: true, rows: [[1], [2], [3], [4], [5]] });
    const exact = await post('query', conn({ database: 'app_db', query: 'SELECT id FROM items WHERE id <= 3 ORDER BY id', limit: 3 }));
    expect(exact.body.data).toMatchObject({ count: 3, truncated: false });

    const bound = await post('query', conn({ database: 'app_db', query: SQL[engine].byId, params: [7] }));
    expect(bound.body.data.rows).toEqual([['n7']]);
    // A value that looks like SQL stays a value.
    const injected = await post('query', conn({ database: 'app_db', query: SQL[engine].byName, params: ["n7' OR '1'='1"] }));
    expect(injected.status).toBe(200);
    expect(injected.body.data.rows).toEqual([]);

    const values = await post('query', conn({ query: SQL[engine].binary }));
    expect(values.status).toBe(200);
    expect(values.body.data.rows[0]).toEqual(['\\xdeadbeef', null, '2024-05-06', '12345678901234567890']);
  });

  it('reports syntax errors, unknown tables, multiple statements and timeouts with clear codes', async () => {
    const syntax = await post('query', conn({ database: 'app_db', query: 'SELECT FROM WHERE' }));
    expect(syntax.status).toBe(400);
    expect(syntax.body.code).toBe('DB_SYNTAX_ERROR');

    const table = await post('query', conn({ database: 'app_db', query: 'SELECT * FROM no_such_table' }));
    expect(table.status).toBe(400);
    expect(table.body.code).toBe('DB_QUERY_FAILED');

    const two = await post('query', conn({ database: 'app_db', query: 'SELECT 1; DELETE FROM items', allow_write: true }));
    expect(two.status).toBe(400);
    expect(Number(await count())).toBe(1500);

    const started = Date.now();
    const slow = await post('query', conn({ query: SQL[engine].sleep, timeout: 1 }));
    expect(slow.status).toBe(400);
    expect(slow.body.code).toBe('DB_QUERY_TIMEOUT');
    expect(Date.now() - started).toBeLessThan(4500);
  });

  it('creates a user (409 when it exists), grants privileges, and the user can read but not write', async () => {
    const user = await post('users/create', conn({ user: 'app_user', user_password: 'Us3r-pass!' }));
    expect(user.status).toBe(201);
    expect(user.body.data).toMatchObject({ user: 'app_user', type: engine });
    expect(user.text).not.toContain('Us3r-pass!');
    const again = await post('users/create', conn({ user: 'app_user', user_password: 'other' }));
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('DB_USER_EXISTS');

    const asUser = (extra: Record<string, unknown>) => conn({ username: 'app_user', password: 'Us3r-pass!', database: 'app_db', ...extra });
    const before = await post('query', asUser({ query: 'SELECT COUNT(*) FROM items' }));
    expect(before.status).toBe(403);
    expect(before.body.code).toBe('DB_PERMISSION_DENIED');

    const privileges = engine === 'postgres' ? ['CONNECT', 'SELECT'] : ['SELECT'];
    const grant = await post('privileges/grant', conn({ user: 'app_user', database: 'app_db', privileges }));
    expect(grant.status).toBe(200);
    expect(grant.body.data.statements.length).toBeGreaterThan(0);
    expect(grant.body.data.statements.join('\n')).toContain('app_user');

    const read = await post('query', asUser({ query: 'SELECT COUNT(*) FROM items' }));
    expect(read.status).toBe(200);
    expect(Number(read.body.data.rows[0][0])).toBe(1500);
    const write = await post('query', asUser({ query: 'DELETE FROM items', allow_write: true }));
    expect(write.status).toBe(403);
    expect(write.body.code).toBe('DB_PERMISSION_DENIED');

    const table = await post('privileges/grant', conn({ user: 'app_user', database: 'app_db', table: 'items', privileges: ['INSERT'] }));
    expect(table.status).toBe(200);
    const noTable = await post('privileges/grant', conn({ user: 'app_user', database: 'app_db', table: 'ghost', privileges: ['INSERT'] }));
    expect(noTable.status).toBe(404);
    const noUser = await post('privileges/grant', conn({ user: 'ghost_user', database: 'app_db', privileges: ['SELECT'] }));
    expect(noUser.status).toBe(404);
    expect(noUser.body.code).toBe('DB_USER_NOT_FOUND');
    const noDb = await post('privileges/grant', conn({ user: 'app_user', database: 'ghost_db', privileges: ['SELECT'] }));
    expect(noDb.status).toBe(404);
    expect(noDb.body.code).toBe('DB_NOT_FOUND');
  });

  it('creates a database with a character set and only for the right engine-specific options', async () => {
    const charset = engine === 'postgres' ? 'UTF8' : 'utf8mb4';
    const res = await post('create', conn({ name: 'cs_db', charset }));
    expect(res.status).toBe(201);
    if (engine !== 'postgres') {
      const owner = await post('create', conn({ name: 'owner_db', owner: 'admin' }));
      expect(owner.status).toBe(400);
    }
    expect(await listNames()).toContain('cs_db');
  });

  it('grants ALL: the user may create and fill tables in that database only', async () => {
    expect((await post('users/create', conn({ user: 'owner_user', user_password: 'Own3r-pass!' }))).status).toBe(201);
    const grant = await post('privileges/grant', conn({ user: 'owner_user', database: 'app_db', privileges: ['ALL'] }));
    expect(grant.status, grant.text).toBe(200);
    const asOwner = (extra: Record<string, unknown>) => conn({ username: 'owner_user', password: 'Own3r-pass!', ...extra });
    const create = await post('query', asOwner({ database: 'app_db', query: 'CREATE TABLE owned (id INT)', allow_write: true }));
    expect(create.status, create.text).toBe(200);
    const insert = await post('query', asOwner({ database: 'app_db', query: 'INSERT INTO owned VALUES (1), (2)', allow_write: true }));
    expect(insert.body.data.affected_rows).toBe(2);
    const elsewhere = await post('query', asOwner({ database: 'cs_db', query: 'CREATE TABLE nope (id INT)', allow_write: true }));
    expect(elsewhere.status).toBe(403);
  });

  it('refuses SQL injection in every identifier field with 400 and changes nothing', async () => {
    const databases = await listNames();
    const attempts = ['app_db`; DROP DATABASE app_db; --', 'app_db"; DROP DATABASE app_db; --', "app_db' OR '1'='1", 'a b', '../etc', 'x\u0000y', ''];
    const cases: [string, Record<string, unknown>][] = [];
    for (const bad of attempts) {
      cases.push(['create', { name: bad }]);
      cases.push(['create', { name: 'ok_db', owner: bad }]);
      cases.push(['create', { name: 'ok_db', charset: bad }]);
      cases.push(['create', { name: 'ok_db', collation: bad }]);
      cases.push(['tables', { database: bad }]);
      cases.push(['query', { database: bad, query: 'SELECT 1' }]);
      cases.push(['list', { database: bad }]);
      cases.push(['users/create', { user: bad, user_password: 'x' }]);
      cases.push(['users/create', { user: 'ok_user', user_password: 'x', user_host: `%'; DROP USER admin; --${bad}` }]);
      cases.push(['privileges/grant', { user: bad, database: 'app_db', privileges: ['SELECT'] }]);
      cases.push(['privileges/grant', { user: 'app_user', database: bad, privileges: ['SELECT'] }]);
      cases.push(['privileges/grant', { user: 'app_user', database: 'app_db', table: bad, privileges: ['SELECT'] }]);
      cases.push(['privileges/grant', { user: 'app_user', database: 'app_db', schema: bad, privileges: ['SELECT'] }]);
      cases.push(['privileges/grant', { user: 'app_user', database: 'app_db', privileges: [`SELECT ON *.* TO root; --${bad}`] }]);
      cases.push(['test', { username: `admin'--${bad}` }]);
      cases.push(['test', { host: `127.0.0.1; rm -rf /${bad}` }]);
    }
    for (const [path, extra] of cases) {
      const res = await post(path, conn(extra));
      expect(res.status, `${path} ${JSON.stringify(extra)}`).toBe(400);
      expect(res.body, `${path} ${JSON.stringify(extra)}`).toMatchObject({ error: expect.any(String), code: 'VALIDATION_FAILED' });
    }
    const unknownField = await post('query', conn({ query: 'SELECT 1', sql: 'DROP DATABASE app_db' }));
    expect(unknownField.status).toBe(400);
    expect(await listNames()).toEqual(databases);
    expect(Number(await count())).toBe(1500);
  });

  it('refuses huge queries and too many rows asked', async () => {
    const huge = await post('query', conn({ query: `SELECT '${'x'.repeat(70000)}'` }));
    expect(huge.status).toBe(400);
    expect(huge.body.code).toBe('VALIDATION_FAILED');
    const limit = await post('query', conn({ query: 'SELECT 1', limit: 1_000_000 }));
    expect(limit.status).toBe(400);
    const timeout = await post('query', conn({ query: 'SELECT 1', timeout: 100000 }));
    expect(timeout.status).toBe(400);
  });
});
