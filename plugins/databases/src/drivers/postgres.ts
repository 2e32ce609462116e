/**
 * PostgreSQL through pg. Names go through `escapeIdentifier`, values through `$n` parameters; the SQL texts here
 * are constants. Results are read through a cursor, so a huge result is never loaded whole.
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import pg from 'pg';
import Cursor from 'pg-cursor';
import { HttpError } from '@agent/sdk';
import { toHttpError } from '../db-errors.js';
import { POSTGRES_PRIVILEGES, DATABASE_PRIVILEGES, TABLE_PRIVILEGES } from './privileges.js';
import { takeWithinBudget } from '../statement.js';
import type { ConnectionSpec, DatabaseInfo, DbSession, GrantInput, QueryOptions, QueryResult, TableInfo } from '../types.js';

const RELKINDS: Record<string, string> = { r: 'table', v: 'view', m: 'materialized_view', p: 'partitioned_table', f: 'foreign_table' };

/** Dates and times stay in PostgreSQL's text form (no time-zone guessing); everything else as pg parses it. */
const TEXT_OIDS = new Set([1082, 1083, 1114, 1184, 1186, 1266]);
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    TEXT_OIDS.has(oid) ? (v: string) => v : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * The SCRAM-SHA-256 verifier of a password, as PostgreSQL stores it: the clear password never travels in the
 * CREATE ROLE statement (which may be logged). Non-ASCII passwords are left to the server (SASLprep).
 */
export function scramVerifier(password: string): string | null {
  if (!/^[\x20-\x7e]*$/.test(password)) return null;
  const iterations = 4096;
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

const toNumber = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

export async function openPostgres(spec: ConnectionSpec): Promise<DbSession> {
  const where = { host: spec.host, port: spec.port };
  const client = new pg.Client({
    host: spec.address,
    port: spec.port,
    user: spec.username,
    password: spec.password,
    database: spec.database ?? 'postgres',
    connectionTimeoutMillis: spec.connectTimeout * 1000,
    application_name: 'host-agent',
    types,
  });
  let broken = false;
  client.on('error', () => {
    broken = true;
  });
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    throw toHttpError(err, where);
  }
  const wrap = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw toHttpError(err, where);
    }
  };
  let version = '';
  try {
    version = String((await client.query<{ v: string }>('SHOW server_version')).rows[0]?.v ?? '');
  } catch (err) {
    await client.end().catch(() => undefined);
    throw toHttpError(err, where);
  }
  const ident = (name: string) => client.escapeIdentifier(name);

  /** Reads the statement's rows through a cursor until the limit or the byte budget is reached. */
  const readCursor = async (sql: string, opts: QueryOptions): Promise<QueryResult> => {
    const cursor = client.query(new Cursor(sql, opts.params, { rowMode: 'array' }));
    const rows: unknown[][] = [];
    const budget = { bytes: 0 };
    let truncated = false;
    let result: pg.QueryResult | undefined;
    try {
      for (;;) {
        const want = Math.min(500, opts.limit + 1 - rows.length);
        const batch = await new Promise<unknown[][]>((resolve, reject) =>
          cursor.read(want, (err, got, res) => {
            if (err) return reject(err);
            result = res;
            resolve(got as unknown as unknown[][]);
          }),
        );
        const room = opts.limit - rows.length;
        const taken = takeWithinBudget(batch.slice(0, room), opts.maxBytes, budget);
        rows.push(...taken);
        if (taken.length < batch.length) {
          truncated = true;
          break;
        }
        if (batch.length < want) break;
      }
    } finally {
      await cursor.close().catch(() => undefined);
    }
    const columns = (result?.fields ?? []).map((f) => f.name);
    const command = result?.command ?? null;
    const isRead = columns.length > 0;
    return { columns, rows, truncated, affected_rows: isRead ? null : toNumber(result?.rowCount ?? null), command };
  };

  const session: DbSession = {
    info: { flavor: 'postgres', version },

    listDatabases: () =>
      wrap(async () => {
        const { rows } = await client.query<{ name: string; size: string | null; tpl: boolean }>(
          "SELECT datname AS name, CASE WHEN has_database_privilege(datname, 'CONNECT') THEN pg_database_size(datname) END AS size, " +
            'datistemplate AS tpl FROM pg_database WHERE datallowconn ORDER BY datname',
        );
        return rows.map((r): DatabaseInfo => ({ name: r.name, size_bytes: toNumber(r.size), system: r.tpl }));
      }),

    listTables: () =>
      wrap(async () => {
        const { rows } = await client.query<{ s: string; n: string; k: string; r: string | null; b: string | null }>(
          'SELECT n.nspname AS s, c.relname AS n, c.relkind AS k, c.reltuples::bigint AS r, pg_total_relation_size(c.oid) AS b ' +
            'FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace ' +
            "WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' " +
            'ORDER BY 1, 2',
        );
        return rows.map((r): TableInfo => {
          const estimate = toNumber(r.r);
          return {
            schema: r.s,
            name: r.n,
            type: RELKINDS[r.k] ?? r.k,
            // -1 means never analysed; views have no row count.
            rows_estimate: r.k === 'v' || estimate === null || estimate < 0 ? null : estimate,
            size_bytes: toNumber(r.b),
            engine: null,
          };
        });
      }),

    query: (sql, opts) =>
      wrap(async () => {
        const timeout = `${opts.timeoutMs}ms`;
        if (!opts.write) {
          await client.query('SET default_transaction_read_only = on');
          await client.query('BEGIN TRANSACTION READ ONLY');
          await client.query("SELECT set_config('statement_timeout', $1, true)", [timeout]);
          try {
            return await readCursor(sql, opts);
          } finally {
            if (!broken) await client.query('ROLLBACK').catch(() => undefined);
          }
        }
        // Writes run outside a transaction block, so statements like CREATE DATABASE or VACUUM work too.
        await client.query("SELECT set_config('statement_timeout', $1, false)", [timeout]);
        return readCursor(sql, opts);
      }),

    createDatabase: (name, o) =>
      wrap(async () => {
        let sql = `CREATE DATABASE ${ident(name)}`;
        if (o.owner) sql += ` OWNER ${ident(o.owner)}`;
        if (o.charset || o.collation) sql += ' TEMPLATE template0';
        if (o.charset) sql += ` ENCODING ${client.escapeLiteral(o.charset)}`;
        if (o.collation) sql += ` LC_COLLATE ${client.escapeLiteral(o.collation)} LC_CTYPE ${client.escapeLiteral(o.collation)}`;
        await client.query(sql);
      }),

    createUser: (name, password) =>
      wrap(async () => {
        const stored = scramVerifier(password) ?? password;
        try {
          await client.query(`CREATE ROLE ${ident(name)} LOGIN PASSWORD ${client.escapeLiteral(stored)}`);
        } catch (err) {
          if ((err as { code?: string }).code === '42710') throw new HttpError(409, 'DB_USER_EXISTS', `role '${name}' already exists`);
          throw err;
        }
      }),

    grant: (g: GrantInput) =>
      wrap(async () => {
        const unsupported = g.privileges.filter((p) => !POSTGRES_PRIVILEGES.has(p));
        if (unsupported.length) throw new HttpError(400, 'DB_PRIVILEGE_UNSUPPORTED', `privileges not available on PostgreSQL: ${unsupported.join(', ')}`);
        const role = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [g.user]);
        if (role.rowCount === 0) throw new HttpError(404, 'DB_USER_NOT_FOUND', `role '${g.user}' does not exist`);
        const schema = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [g.schema]);
        if (schema.rowCount === 0) throw new HttpError(404, 'DB_SCHEMA_NOT_FOUND', `schema '${g.schema}' does not exist in '${g.database}'`);
        const all = g.privileges.includes('ALL');
        const dbPrivs = all ? ['ALL PRIVILEGES'] : g.privileges.filter((p) => DATABASE_PRIVILEGES.has(p));
        const tablePrivs = all ? ['ALL PRIVILEGES'] : g.privileges.filter((p) => TABLE_PRIVILEGES.has(p));
        const grantOption = g.with_grant_option ? ' WITH GRANT OPTION' : '';
        const who = ident(g.user);
        const statements: string[] = [];
        if (g.table) {
          if (!all && dbPrivs.length) throw new HttpError(400, 'DB_PRIVILEGE_UNSUPPORTED', `${dbPrivs.join(', ')} apply to a database, not a table`);
          const exists = await client.query(
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r','v','m','p','f')",
            [g.schema, g.table],
          );
          if (exists.rowCount === 0) throw new HttpError(404, 'DB_TABLE_NOT_FOUND', `table '${g.schema}.${g.table}' does not exist in '${g.database}'`);
          statements.push(`GRANT USAGE ON SCHEMA ${ident(g.schema)} TO ${who}`);
          statements.push(`GRANT ${tablePrivs.join(', ')} ON TABLE ${ident(g.schema)}.${ident(g.table)} TO ${who}${grantOption}`);
        } else {
          if (dbPrivs.length) statements.push(`GRANT ${dbPrivs.join(', ')} ON DATABASE ${ident(g.database)} TO ${who}${grantOption}`);
          if (tablePrivs.length) {
            statements.push(`GRANT ${all ? 'ALL PRIVILEGES' : 'USAGE'} ON SCHEMA ${ident(g.schema)} TO ${who}${grantOption}`);
            statements.push(`GRANT ${tablePrivs.join(', ')} ON ALL TABLES IN SCHEMA ${ident(g.schema)} TO ${who}${grantOption}`);
            if (all) statements.push(`GRANT ALL PRIVILEGES ON ALL SEQUENCES IN SCHEMA ${ident(g.schema)} TO ${who}${grantOption}`);
            // Tables created later by this login are covered too.
            statements.push(`ALTER DEFAULT PRIVILEGES IN SCHEMA ${ident(g.schema)} GRANT ${tablePrivs.join(', ')} ON TABLES TO ${who}${grantOption}`);
          }
        }
        await client.query('BEGIN');
        try {
          for (const sql of statements) await client.query(sql);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
        return statements;
      }),

    close: async () => {
      await client.end().catch(() => undefined);
    },
  };
  return session;
}
