/**
 * databases: administration of MySQL, MariaDB and PostgreSQL servers over their own protocols (mysql2, pg).
 * Every route is a POST whose body carries the connection; one connection per request.
 */
import { definePlugin, errors, optional, reply, Type, type Principal, type RouteRequest } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { dockerService } from '@agent/plugin-docker/api';
import { resolveConnection, type ResolveDeps } from './connection.js';
import {
  ConnectionBody,
  CreateDatabaseBody,
  CreateUserBody,
  CreatedDatabase,
  CreatedUser,
  DatabaseItem,
  GrantBody,
  GrantResponse,
  QueryBody,
  QueryResponse,
  TableItem,
  TablesBody,
  TestResponse,
} from './schemas.js';
import { assertReadStatement, firstKeyword } from './statement.js';
import type { ConnectionSpec, DbSession } from './types.js';
import { databaseChecks } from './doctor.js';

/** Bytes of row data one answer carries at most; beyond it the result is marked truncated. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** The client libraries (pg, mysql2) are loaded with the first connection, not at agent start. */
export async function openSession(spec: ConnectionSpec): Promise<DbSession> {
  return spec.type === 'postgres' ? (await import('./drivers/postgres.js')).openPostgres(spec) : (await import('./drivers/mysql.js')).openMysql(spec);
}

async function withSession<T>(spec: ConnectionSpec, fn: (s: DbSession) => Promise<T>): Promise<T> {
  const session = await openSession(spec);
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

/**
 * The deployment a request connects to. With one, the core checks the caller's level on it (read for the reading
 * routes, write for the others); without one (the host form) the route is global: 403 GLOBAL_SCOPE_REQUIRED to a
 * principal limited to its deployments, whose connections only go to its deployments' services.
 */
const deploymentOf = (req: RouteRequest<any, any, any>) => (req.body as { deployment?: string } | undefined)?.deployment;

export default definePlugin({
  name: 'databases',
  version: '0.1.0',
  description: 'Databases: test, list, tables, query, create database/user, grant (MySQL, MariaDB, PostgreSQL)',
  resources: {
    databases: {
      description:
        "database servers reached through the agent (queries, databases, users, grants): a deployment's database services belong to it, any other server (the host form) is global",
      operator: 'write',
      viewer: 'none',
      owner: 'both',
    },
  },
  deps: { deployments: optional(deploymentsService), docker: optional(dockerService) },

  setup(ctx, deps) {
    const services = (): ResolveDeps => ({ deployments: deps.deployments, docker: deps.docker });
    const connect = (body: ConnectionBody, principal: Principal) => resolveConnection(body, services(), principal);
    const reading = { tag: 'databases', deployment: deploymentOf, deploymentLevel: 'read' as const };
    const writing = { tag: 'databases', deployment: deploymentOf, deploymentLevel: 'write' as const };
    for (const check of databaseChecks()) ctx.doctor(check);

    ctx.route({
      ...reading,
      method: 'POST',
      path: '/databases/test',
      permission: 'databases:read',
      operationId: 'databases.test',
      audit: false,
      summary: 'Test a database connection',
      description: 'Connects and logs in; answers the server type and version. Failures: 424 DB_UNREACHABLE, 422 DB_AUTH_FAILED, 404 DB_NOT_FOUND.',
      body: ConnectionBody,
      response: TestResponse,
      handler: async (req) => {
        const spec = await connect(req.body, req.principal);
        const started = performance.now();
        return withSession(spec, async (s) => ({
          type: s.info.flavor,
          version: s.info.version,
          host: spec.host,
          port: spec.port,
          database: spec.database,
          latency_ms: Math.round((performance.now() - started) * 10) / 10,
        }));
      },
    });

    ctx.route({
      ...reading,
      method: 'POST',
      path: '/databases/list',
      permission: 'databases:read',
      operationId: 'databases.list',
      audit: false,
      summary: 'List the databases of a server with their size',
      body: ConnectionBody,
      response: Type.Array(DatabaseItem),
      handler: async (req) => withSession(await connect(req.body, req.principal), (s) => s.listDatabases()),
    });

    ctx.route({
      ...reading,
      method: 'POST',
      path: '/databases/tables',
      permission: 'databases:read',
      operationId: 'databases.tables',
      audit: false,
      summary: 'List the tables of a database with row estimates and size',
      body: TablesBody,
      response: Type.Array(TableItem),
      handler: async (req) => {
        const spec = await connect(req.body, req.principal);
        // PostgreSQL lists the tables of the database it is connected to.
        return withSession({ ...spec, database: req.body.database }, (s) => s.listTables(req.body.database));
      },
    });

    ctx.route({
      ...reading,
      method: 'POST',
      path: '/databases/query',
      permission: 'databases:read',
      operationId: 'databases.query',
      audit: false,
      summary: 'Run one SQL statement',
      description:
        'Read-only (a read-only transaction) unless allow_write is true, which needs databases:write. ' +
        'At most `limit` rows (default 1000) and `timeout` seconds (default 30). Values go in `params`, bound by the driver.',
      body: QueryBody,
      response: QueryResponse,
      handler: async (req) => {
        const { body, principal } = req;
        const write = body.allow_write === true;
        if (write && !principal.can('databases:write')) throw errors.forbidden("allow_write needs the permission 'databases:write'");
        if (write && body.deployment && !principal.canAccessDeployment(body.deployment, 'write')) {
          throw errors.forbidden(`allow_write needs write access to deployment '${body.deployment}'`);
        }
        if (!write) assertReadStatement(body.query);
        const spec = await connect(body, principal);
        const started = performance.now();
        let outcome: { success: boolean; status: number } = { success: false, status: 500 };
        try {
          const result = await withSession(spec, (s) =>
            s.query(body.query, {
              params: body.params,
              limit: body.limit ?? 1000,
              timeoutMs: (body.timeout ?? 30) * 1000,
              write,
              maxBytes: MAX_ANSWER_BYTES,
            }),
          );
          outcome = { success: true, status: 200 };
          return { ...result, count: result.rows.length, duration_ms: Math.round((performance.now() - started) * 10) / 10 };
        } catch (err) {
          outcome = { success: false, status: (err as { status?: number }).status ?? 500 };
          throw err;
        } finally {
          // Answered once the record is durable, like the requests the core audits; a failed query keeps its own error.
          if (write) {
            await auditWrite(principal, req.ip, spec, body.deployment ?? null, body.query, outcome).catch((err: unknown) => {
              if (outcome.success) throw err;
            });
          }
        }
      },
    });

    /** Writing queries are audited (read-only ones are not, like other reads): the statement kind, never its text. */
    const auditWrite = (
      principal: Principal,
      ip: string,
      spec: ConnectionSpec,
      deployment: string | null,
      sql: string,
      outcome: { success: boolean; status: number },
    ) =>
      ctx.audit({
        actor_type: principal.type,
        actor_id: principal.id,
        actor_name: principal.name,
        action: 'databases.query.write',
        resource_type: 'databases',
        resource_id: `${spec.type}://${spec.host}:${spec.port}/${spec.database ?? ''}`,
        deployment,
        success: outcome.success,
        status: outcome.status,
        client_ip: ip,
        detail: { statement: firstKeyword(sql) || null, length: sql.length },
      });

    ctx.route({
      ...writing,
      method: 'POST',
      path: '/databases/create',
      permission: 'databases:write',
      operationId: 'databases.createDatabase',
      status: 201,
      creates: 'name',
      summary: 'Create a database (409 DB_EXISTS when it exists)',
      body: CreateDatabaseBody,
      response: CreatedDatabase,
      handler: async (req) => {
        const spec = await connect(req.body, req.principal);
        const { name, charset, collation, owner } = req.body;
        if (owner && spec.type !== 'postgres') throw errors.badRequest('owner: only for PostgreSQL', 'VALIDATION_FAILED', { field: 'owner' });
        await withSession(spec, async (s) => {
          const existing = await s.listDatabases();
          if (existing.some((d) => d.name === name)) throw errors.conflict(`database '${name}' already exists`, 'DB_EXISTS');
          await s.createDatabase(name, { charset: charset ?? null, collation: collation ?? null, owner: owner ?? null });
        });
        return reply.created({ name, type: spec.type }, `database '${name}' created`);
      },
    });

    ctx.route({
      ...writing,
      method: 'POST',
      path: '/databases/users/create',
      permission: 'databases:write',
      operationId: 'databases.createUser',
      status: 201,
      creates: 'user',
      summary: 'Create a database user (409 DB_USER_EXISTS when it exists)',
      body: CreateUserBody,
      response: CreatedUser,
      handler: async (req) => {
        const spec = await connect(req.body, req.principal);
        const { user, user_password } = req.body;
        if (user_password.includes('\0'))
          throw errors.badRequest('user_password: must not contain NUL characters', 'VALIDATION_FAILED', { field: 'user_password' });
        const host = spec.type === 'postgres' ? null : (req.body.user_host ?? '%');
        await withSession(spec, (s) => s.createUser(user, user_password, host ?? ''));
        return reply.created({ user, host, type: spec.type }, `user '${user}' created`);
      },
    });

    ctx.route({
      ...writing,
      method: 'POST',
      path: '/databases/privileges/grant',
      permission: 'databases:write',
      operationId: 'databases.grant',
      summary: 'Grant privileges on a database (or one table) to a user',
      description:
        'PostgreSQL: CONNECT/CREATE/TEMPORARY apply to the database, table privileges to every table of `schema` ' +
        '(default public) or to `table`; ALL covers both. MySQL/MariaDB: privileges on `database`.* or `database`.`table`.',
      body: GrantBody,
      response: GrantResponse,
      handler: async (req) => {
        const spec = await connect(req.body, req.principal);
        const b = req.body;
        const host = spec.type === 'postgres' ? null : (b.user_host ?? '%');
        // PostgreSQL table grants are made from inside the target database.
        const target = spec.type === 'postgres' ? { ...spec, database: b.database } : spec;
        const statements = await withSession(target, (s) =>
          s.grant({
            user: b.user,
            host: host ?? '',
            database: b.database,
            schema: b.schema ?? 'public',
            table: b.table ?? null,
            privileges: b.privileges,
            with_grant_option: b.with_grant_option ?? false,
          }),
        );
        return { user: b.user, host, database: b.database, table: b.table ?? null, privileges: b.privileges, statements };
      },
    });
  },
});
