/** POST /api/databases/query: one SQL statement (an operation; a read-like POST, audited only when it writes). */
import { operationRoute, type PluginContext } from '@agent/sdk';
import type { QueryOperations } from '../operations/query.js';
import { QueryResponse } from '../schemas.js';
import { reading } from './scope.js';

export function queryRoutes(ctx: PluginContext, ops: QueryOperations): void {
  ctx.route(
    operationRoute(ops.query, {
      ...reading,
      method: 'POST',
      path: '/databases/query',
      permission: 'databases:read',
      audit: false,
      summary: 'Run one SQL statement',
      description:
        'Read-only (a read-only transaction) unless allow_write is true, which needs databases:write. ' +
        'At most `limit` rows (default 1000) and `timeout` seconds (default 30). Values go in `params`, bound by the driver.',
      body: ops.query.input,
      response: QueryResponse,
      input: (req) => req.body,
    }),
  );
}
