/** /api/databases/users/create and /api/databases/privileges/grant: a server's users and their privileges (operations). */
import { operationRoute, reply, type PluginContext } from '@agent/sdk';
import type { DatabaseOperations } from '../operations/databases.js';
import { CreatedUser, GrantResponse } from '../schemas.js';
import { writing } from './scope.js';

export function userRoutes(ctx: PluginContext, ops: DatabaseOperations): void {
  ctx.route(
    operationRoute(ops.createUser, {
      ...writing,
      method: 'POST',
      path: '/databases/users/create',
      permission: 'databases:write',
      status: 201,
      creates: 'user',
      summary: 'Create a database user (409 DB_USER_EXISTS when it exists)',
      body: ops.createUser.input,
      response: CreatedUser,
      input: (req) => req.body,
      respond: (created) => reply.created(created, `user '${created.user}' created`),
    }),
  );

  ctx.route(
    operationRoute(ops.grant, {
      ...writing,
      method: 'POST',
      path: '/databases/privileges/grant',
      permission: 'databases:write',
      summary: 'Grant privileges on a database (or one table) to a user',
      description:
        'PostgreSQL: CONNECT/CREATE/TEMPORARY apply to the database, table privileges to every table of `schema` ' +
        '(default public) or to `table`; ALL covers both. MySQL/MariaDB: privileges on `database`.* or `database`.`table`.',
      body: ops.grant.input,
      response: GrantResponse,
      // The drivers' own checks of a grant (drivers/*.ts), besides what a statement answers.
      errors: { 400: ['DB_PRIVILEGE_UNSUPPORTED'], 404: ['DB_NOT_FOUND', 'DB_USER_NOT_FOUND', 'DB_SCHEMA_NOT_FOUND', 'DB_TABLE_NOT_FOUND'] },
      input: (req) => req.body,
    }),
  );
}
