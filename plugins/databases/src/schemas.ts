/** Request and response schemas of the database routes; every name that reaches SQL has a strict pattern. */
import { Nullable, Secret, Type, deploymentName, type Static } from '@agent/sdk';
import { MYSQL_PRIVILEGES, POSTGRES_PRIVILEGES } from './drivers/privileges.js';
import type { DbType } from './types.js';

/** Database, user, schema and table names: quoted by the driver, and still limited to plain characters. */
export const DB_IDENTIFIER = '^[A-Za-z_][A-Za-z0-9_-]{0,62}$';
/** The login name only travels in the protocol handshake, never in SQL text. */
const LOGIN_USER = '^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,79}$';
/** Host part of a MySQL account: `%`, a name, an address or a pattern such as `10.0.%`. */
const ACCOUNT_HOST = '^[A-Za-z0-9%_][A-Za-z0-9.%_:-]{0,59}$';
const CHARSET = '^[A-Za-z0-9_.-]{1,64}$';
const COMPOSE_SERVICE = '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$';

const identifier = (description: string) => Type.String({ pattern: DB_IDENTIFIER, description });

export const DB_TYPES: DbType[] = ['mysql', 'mariadb', 'postgres'];
const dbType = Type.Unsafe<DbType>({ type: 'string', enum: DB_TYPES, description: 'server type' });

export const PRIVILEGES = [...new Set([...MYSQL_PRIVILEGES, ...POSTGRES_PRIVILEGES])].sort();

/**
 * The connection every database route takes: by a deployment's database service (`deployment`,
 * `service`), or directly by `host`/`port` (global scope only).
 */
export const connectionFields = {
  type: Type.Optional(dbType),
  host: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 253,
      description: 'server host name or IP address (not with deployment); needs global scope. A name is resolved once and the agent connects to that address',
    }),
  ),
  port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'default 3306 (MySQL/MariaDB) or 5432 (PostgreSQL)' })),
  username: Type.Optional(
    Type.String({
      pattern: LOGIN_USER,
      description: 'login; with deployment, defaults to the one in the container environment (which needs write access to the deployment)',
    }),
  ),
  password: Type.Optional(
    Secret({
      maxLength: 256,
      description: 'login password; with deployment, defaults to the one in the container environment (which needs write access to the deployment)',
    }),
  ),
  deployment: Type.Optional(deploymentName({ description: "connect to this deployment's database service instead of host/port" })),
  service: Type.Optional(
    Type.String({ pattern: COMPOSE_SERVICE, description: 'compose service of the database (default: the first database image of the deployment)' }),
  ),
  connect_timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 60, default: 10, description: 'seconds to wait for the server' })),
};

export const ConnectionBody = Type.Object({
  ...connectionFields,
  database: Type.Optional(identifier('database to connect to')),
});
export type ConnectionBody = Static<typeof ConnectionBody>;

export const TablesBody = Type.Object({
  ...connectionFields,
  database: identifier('database whose tables are listed'),
});

const Param = Type.Union([Type.String({ maxLength: 65536 }), Type.Number(), Type.Boolean(), Type.Null()]);

export const QueryBody = Type.Object({
  ...connectionFields,
  database: Type.Optional(identifier('database the statement runs in')),
  query: Type.String({ minLength: 1, maxLength: 65536, description: 'one SQL statement' }),
  params: Type.Optional(Type.Array(Param, { maxItems: 1000, description: 'values bound to `?` (MySQL) or `$1…` (PostgreSQL) placeholders' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000, default: 1000, description: 'rows returned at most' })),
  timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 300, default: 30, description: 'statement timeout in seconds' })),
  allow_write: Type.Optional(Type.Boolean({ default: false, description: 'run outside a read-only transaction (needs databases:write)' })),
});

export const CreateDatabaseBody = Type.Object({
  ...connectionFields,
  database: Type.Optional(identifier('database to connect to (PostgreSQL: default postgres)')),
  name: identifier('name of the new database'),
  charset: Type.Optional(Type.String({ pattern: CHARSET, description: 'character set (MySQL) or encoding (PostgreSQL)' })),
  collation: Type.Optional(Type.String({ pattern: CHARSET, description: 'collation (MySQL) or locale (PostgreSQL)' })),
  owner: Type.Optional(identifier('owner role (PostgreSQL)')),
});

export const CreateUserBody = Type.Object({
  ...connectionFields,
  database: Type.Optional(identifier('database to connect to')),
  user: identifier('name of the new user'),
  user_password: Secret({ minLength: 1, maxLength: 256, description: 'password of the new user' }),
  user_host: Type.Optional(Type.String({ pattern: ACCOUNT_HOST, default: '%', description: 'MySQL/MariaDB account host part (default %)' })),
});

export const GrantBody = Type.Object({
  ...connectionFields,
  database: identifier('database the privileges are on'),
  user: identifier('user (role) receiving the privileges'),
  user_host: Type.Optional(Type.String({ pattern: ACCOUNT_HOST, default: '%', description: 'MySQL/MariaDB account host part (default %)' })),
  schema: Type.Optional(identifier('PostgreSQL schema of the tables (default public)')),
  table: Type.Optional(identifier('one table (default: every table)')),
  privileges: Type.Array(Type.Unsafe<string>({ type: 'string', enum: PRIVILEGES }), { minItems: 1, maxItems: PRIVILEGES.length, uniqueItems: true }),
  with_grant_option: Type.Optional(Type.Boolean({ default: false })),
});

export const TestResponse = Type.Object({
  type: dbType,
  version: Type.String(),
  host: Type.String(),
  port: Type.Integer(),
  database: Nullable(Type.String()),
  latency_ms: Type.Number(),
});

export const DatabaseItem = Type.Object({
  name: Type.String(),
  size_bytes: Nullable(Type.Integer()),
  system: Type.Boolean(),
});

export const TableItem = Type.Object({
  schema: Type.String(),
  name: Type.String(),
  type: Type.String(),
  rows_estimate: Nullable(Type.Integer()),
  size_bytes: Nullable(Type.Integer()),
  engine: Nullable(Type.String()),
});

export const QueryResponse = Type.Object({
  columns: Type.Array(Type.String()),
  rows: Type.Array(Type.Array(Type.Unknown())),
  count: Type.Integer(),
  truncated: Type.Boolean(),
  duration_ms: Type.Number(),
  affected_rows: Nullable(Type.Integer()),
  command: Nullable(Type.String()),
});

export const CreatedDatabase = Type.Object({ name: Type.String(), type: dbType });
export const CreatedUser = Type.Object({ user: Type.String(), host: Nullable(Type.String()), type: dbType });
export const GrantResponse = Type.Object({
  user: Type.String(),
  host: Nullable(Type.String()),
  database: Type.String(),
  table: Nullable(Type.String()),
  privileges: Type.Array(Type.String()),
  statements: Type.Array(Type.String()),
});
