/** POST /api/databases/test: a connection test (a read-like POST, not audited). */
import type { PluginContext } from '@agent/sdk';
import { withSession, type Connect } from '../session.js';
import { ConnectionBody, TestResponse } from '../schemas.js';
import { reading } from './scope.js';

export function connectionRoutes(ctx: PluginContext, connect: Connect): void {
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
}
