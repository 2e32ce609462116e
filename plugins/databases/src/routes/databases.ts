/** /api/databases: list the databases and the tables of one (read-like POSTs, not audited), create one (an operation). */
import { operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import type { DatabaseOperations } from '../operations/databases.js';
import { withSession, type Connect } from '../session.js';
import { ConnectionBody, CreatedDatabase, DatabaseItem, TableItem, TablesBody } from '../schemas.js';
import { reading, writing } from './scope.js';

export function databaseRoutes(ctx: PluginContext, connect: Connect, ops: DatabaseOperations): void {
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

  ctx.route(
    operationRoute(ops.createDatabase, {
      ...writing,
      method: 'POST',
      path: '/databases/create',
      permission: 'databases:write',
      status: 201,
      creates: 'name',
      summary: 'Create a database (409 DB_EXISTS when it exists)',
      body: ops.createDatabase.input,
      response: CreatedDatabase,
      input: (req) => req.body,
      respond: (created) => reply.created(created, `database '${created.name}' created`),
    }),
  );
}
