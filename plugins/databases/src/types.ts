/** What the routes need from a database server, whatever its engine. */

export type DbType = 'mysql' | 'mariadb' | 'postgres';

/** A resolved connection: where to connect and as whom. */
export interface ConnectionSpec {
  type: DbType;
  /** As the caller named it (shown in answers and errors). */
  host: string;
  /** The address checked when the connection was resolved: the only one the driver connects to. */
  address: string;
  port: number;
  username: string;
  password: string;
  /** Database to connect to (PostgreSQL) or to select (MySQL); null = the server default. */
  database: string | null;
  /** Seconds to wait for the TCP connection and the login. */
  connectTimeout: number;
}

export interface ServerInfo {
  /** `mariadb`, `mysql` or `postgres`: what the server says it is (may differ from the requested type). */
  flavor: DbType;
  version: string;
}

export interface DatabaseInfo {
  name: string;
  /** Bytes (data + indexes), null when the login may not see it. */
  size_bytes: number | null;
  /** Schemas of the server itself (mysql, information_schema, template databases, …). */
  system: boolean;
}

export interface TableInfo {
  /** PostgreSQL schema or MySQL database the table belongs to. */
  schema: string;
  name: string;
  /** `table`, `view`, `materialized_view`, `partitioned_table`, `foreign_table`, `system_view`. */
  type: string;
  /** The planner's estimate (not an exact count); null when unknown (never analysed, views). */
  rows_estimate: number | null;
  size_bytes: number | null;
  engine: string | null;
}

export interface QueryOptions {
  params: unknown[] | undefined;
  /** Rows returned at most; one more is read to know whether the result was truncated. */
  limit: number;
  timeoutMs: number;
  /** When false the statement runs in a read-only transaction. */
  write: boolean;
  /** Stops reading when the answer exceeds this many bytes of JSON. */
  maxBytes: number;
}

export interface QueryResult {
  columns: string[];
  rows: unknown[][];
  truncated: boolean;
  /** Rows changed by a write (INSERT/UPDATE/DELETE), null for reads. */
  affected_rows: number | null;
  /** The statement's command tag (SELECT, INSERT, …) when the server reports it. */
  command: string | null;
}

export interface GrantInput {
  user: string;
  /** MySQL/MariaDB account host part. */
  host: string;
  database: string;
  /** PostgreSQL schema for table privileges. */
  schema: string;
  /** A single table, or every table of the database/schema. */
  table: string | null;
  privileges: string[];
  with_grant_option: boolean;
}

/** An open session on one server (one connection), closed after each request. */
export interface DbSession {
  readonly info: ServerInfo;
  listDatabases(): Promise<DatabaseInfo[]>;
  listTables(database: string): Promise<TableInfo[]>;
  query(sql: string, options: QueryOptions): Promise<QueryResult>;
  createDatabase(name: string, options: { charset: string | null; collation: string | null; owner: string | null }): Promise<void>;
  createUser(name: string, password: string, host: string): Promise<void>;
  /** Grants and returns the statements it ran (they hold no secret). */
  grant(input: GrantInput): Promise<string[]>;
  close(): Promise<void>;
}
