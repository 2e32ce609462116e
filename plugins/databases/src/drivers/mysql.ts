/**
 * MySQL and MariaDB through mysql2. Names go through `escapeId`, values through the driver's placeholder
 * binding (`?`); the SQL texts here are constants. One connection per request, closed (or destroyed) at the end.
 */
import { createHash } from 'node:crypto';
import mysql from 'mysql2';
import { HttpError } from '@agent/sdk';
import { toHttpError } from '../db-errors.js';
import { MYSQL_PRIVILEGES } from './privileges.js';
import { takeWithinBudget } from '../statement.js';
import type { ConnectionSpec, DatabaseInfo, DbSession, GrantInput, QueryOptions, QueryResult, ServerInfo, TableInfo } from '../types.js';

type Conn = mysql.Connection;

const SYSTEM_SCHEMAS = new Set(['mysql', 'information_schema', 'performance_schema', 'sys']);

/** Privileges a MySQL/MariaDB GRANT accepts (the keywords come from this list, never from the request). */

const TABLE_TYPES: Record<string, string> = { 'BASE TABLE': 'table', VIEW: 'view', 'SYSTEM VIEW': 'system_view', SEQUENCE: 'sequence' };

function run<T = unknown>(conn: Conn, sql: string, values?: unknown[]): Promise<T> {
  return new Promise((resolve, reject) => {
    conn.query({ sql, values }, (err, rows) => (err ? reject(err) : resolve(rows as T)));
  });
}

const toNumber = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** `mysql_native_password` hash, so the clear password never appears in a statement (MariaDB). */
const nativeHash = (password: string) => '*' + createHash('sha1').update(createHash('sha1').update(password, 'utf8').digest()).digest('hex').toUpperCase();

export async function openMysql(spec: ConnectionSpec): Promise<DbSession> {
  const where = { host: spec.host, port: spec.port };
  const options: mysql.ConnectionOptions = {
    host: spec.address,
    port: spec.port,
    user: spec.username,
    password: spec.password,
    database: spec.database ?? undefined,
    connectTimeout: spec.connectTimeout * 1000,
    charset: 'utf8mb4',
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: true,
    multipleStatements: false,
    // A server must not be able to ask the agent for local files.
    flags: ['-LOCAL_FILES'],
  };
  const conn = mysql.createConnection(options);
  let broken = false;
  conn.on('error', () => {
    broken = true;
  });
  const drop = () => {
    broken = true;
    conn.destroy();
  };
  try {
    await new Promise<void>((resolve, reject) => conn.connect((err) => (err ? reject(err) : resolve())));
  } catch (err) {
    conn.destroy();
    throw toHttpError(err, where);
  }
  let info: ServerInfo;
  try {
    const [row] = await run<{ v: string }[]>(conn, 'SELECT VERSION() AS v');
    const version = String(row?.v ?? '');
    info = { flavor: /mariadb/i.test(version) ? 'mariadb' : 'mysql', version };
  } catch (err) {
    conn.destroy();
    throw toHttpError(err, where);
  }

  const wrap = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw toHttpError(err, where);
    }
  };

  /** Asks the server to stop the running statement from a second connection (when the session timer fires). */
  const killRunning = async (threadId: number) => {
    const killer = mysql.createConnection({ ...options, database: undefined });
    try {
      await new Promise<void>((resolve, reject) => killer.connect((err) => (err ? reject(err) : resolve())));
      await run(killer, 'KILL QUERY ?', [threadId]);
    } catch {
      // best effort: the connection is destroyed anyway
    } finally {
      killer.destroy();
    }
  };

  const streamQuery = (sql: string, opts: QueryOptions): Promise<QueryResult> =>
    new Promise((resolve, reject) => {
      const columns: string[] = [];
      const pending: unknown[][] = [];
      const rows: unknown[][] = [];
      const budget = { bytes: 0 };
      let affected: number | null = null;
      let settled = false;
      let truncated = false;
      const finish = (err: unknown, result?: QueryResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve(result!);
      };
      const flush = () => {
        if (pending.length === 0) return;
        const room = opts.limit - rows.length;
        const batch = pending.splice(0, pending.length);
        const taken = takeWithinBudget(batch.slice(0, room), opts.maxBytes, budget);
        rows.push(...taken);
        if (taken.length < batch.length) truncated = true;
      };
      const query = conn.query({ sql, values: opts.params, rowsAsArray: true });
      const timer = setTimeout(() => {
        void killRunning(conn.threadId ?? 0);
        finish(new HttpError(400, 'DB_QUERY_TIMEOUT', `the statement ran longer than ${opts.timeoutMs} ms and was cancelled`));
        drop();
      }, opts.timeoutMs + 2000);
      // Statements without a result set report `undefined` fields.
      query.on('fields', (fields: { name: string }[] | undefined) => {
        columns.splice(0, columns.length, ...(fields ?? []).map((f) => f.name));
      });
      query.on('result', (row: unknown) => {
        if (settled) return;
        if (!Array.isArray(row)) {
          affected = toNumber((row as { affectedRows?: number }).affectedRows);
          return;
        }
        pending.push(row);
        if (pending.length >= 200) flush();
        if (truncated || rows.length >= opts.limit) {
          flush();
          // Enough rows: stop reading; the session is dropped rather than drained.
          truncated = true;
          conn.pause();
          finish(null, { columns, rows, truncated, affected_rows: null, command: 'SELECT' });
          drop();
        }
      });
      query.on('error', (err: unknown) => finish(err));
      query.on('end', () => {
        flush();
        const isRead = columns.length > 0;
        finish(null, { columns, rows, truncated, affected_rows: isRead ? null : affected, command: isRead ? 'SELECT' : null });
      });
    });

  return {
    info,
    listDatabases: () =>
      wrap(async () => {
        const rows = await run<{ name: string; size: string | null }[]>(
          conn,
          'SELECT s.SCHEMA_NAME AS name, SUM(t.DATA_LENGTH + t.INDEX_LENGTH) AS size FROM information_schema.SCHEMATA s ' +
            'LEFT JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = s.SCHEMA_NAME GROUP BY s.SCHEMA_NAME ORDER BY s.SCHEMA_NAME',
        );
        return rows.map((r): DatabaseInfo => ({ name: r.name, size_bytes: toNumber(r.size) ?? 0, system: SYSTEM_SCHEMAS.has(r.name) }));
      }),

    listTables: (database) =>
      wrap(async () => {
        const found = await run<unknown[]>(conn, 'SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?', [database]);
        if (found.length === 0) throw new HttpError(404, 'DB_NOT_FOUND', `database '${database}' does not exist (or this login cannot see it)`);
        const rows = await run<Record<string, string | null>[]>(
          conn,
          'SELECT TABLE_SCHEMA AS s, TABLE_NAME AS n, TABLE_TYPE AS t, ENGINE AS e, TABLE_ROWS AS r, DATA_LENGTH + INDEX_LENGTH AS b ' +
            'FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME',
          [database],
        );
        return rows.map((r): TableInfo => ({
          schema: String(r.s),
          name: String(r.n),
          type: TABLE_TYPES[String(r.t)] ?? String(r.t).toLowerCase(),
          rows_estimate: toNumber(r.r),
          size_bytes: toNumber(r.b),
          engine: r.e ?? null,
        }));
      }),

    query: (sql, opts) =>
      wrap(async () => {
        if (info.flavor === 'mariadb') await run(conn, 'SET SESSION max_statement_time = ?', [opts.timeoutMs / 1000]);
        else await run(conn, 'SET SESSION max_execution_time = ?', [opts.timeoutMs]);
        if (!opts.write) {
          // The session default too, so a COMMIT inside the statement cannot leave a writable transaction behind.
          await run(conn, 'SET SESSION TRANSACTION READ ONLY');
          await run(conn, 'START TRANSACTION READ ONLY');
        }
        const result = await streamQuery(sql, opts);
        if (!opts.write && !broken) await run(conn, 'ROLLBACK');
        return result;
      }),

    createDatabase: (name, o) =>
      wrap(async () => {
        let sql = `CREATE DATABASE ${mysql.escapeId(name)}`;
        const values: string[] = [];
        if (o.charset) {
          sql += ' CHARACTER SET ?';
          values.push(o.charset);
        }
        if (o.collation) {
          sql += ' COLLATE ?';
          values.push(o.collation);
        }
        await run(conn, sql, values);
      }),

    createUser: (name, password, host) =>
      wrap(async () => {
        try {
          if (info.flavor === 'mariadb') await run(conn, 'CREATE USER ?@? IDENTIFIED BY PASSWORD ?', [name, host, nativeHash(password)]);
          else await run(conn, 'CREATE USER ?@? IDENTIFIED BY ?', [name, host, password]);
        } catch (err) {
          if ((err as { errno?: number }).errno === 1396) throw new HttpError(409, 'DB_USER_EXISTS', `user '${name}'@'${host}' already exists`);
          throw err;
        }
      }),

    grant: (g: GrantInput) =>
      wrap(async () => {
        const unsupported = g.privileges.filter((p) => !MYSQL_PRIVILEGES.has(p));
        if (unsupported.length) throw new HttpError(400, 'DB_PRIVILEGE_UNSUPPORTED', `privileges not available on ${info.flavor}: ${unsupported.join(', ')}`);
        const exists = await run<unknown[]>(conn, 'SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?', [g.database]);
        if (exists.length === 0) throw new HttpError(404, 'DB_NOT_FOUND', `database '${g.database}' does not exist`);
        const privileges = g.privileges.includes('ALL') ? 'ALL PRIVILEGES' : g.privileges.join(', ');
        // At database level `_` and `%` are wildcards in GRANT: escape them so the grant covers this database only.
        const target = g.table
          ? `${mysql.escapeId(g.database)}.${mysql.escapeId(g.table)}`
          : `${mysql.escapeId(g.database.replace(/[_%]/g, (c) => `\\${c}`))}.*`;
        const sql = `GRANT ${privileges} ON ${target} TO ?@?${g.with_grant_option ? ' WITH GRANT OPTION' : ''}`;
        try {
          await run(conn, sql, [g.user, g.host]);
        } catch (err) {
          const errno = (err as { errno?: number }).errno;
          if (errno === 1133) throw new HttpError(404, 'DB_USER_NOT_FOUND', `user '${g.user}'@'${g.host}' does not exist`);
          if (errno === 1146) throw new HttpError(404, 'DB_TABLE_NOT_FOUND', `table '${g.database}.${g.table}' does not exist`);
          throw err;
        }
        return [mysql.format(sql, [g.user, g.host])];
      }),

    close: async () => {
      if (broken) {
        conn.destroy();
        return;
      }
      await new Promise<void>((resolve) => conn.end(() => resolve()));
      conn.destroy();
    },
  };
}
