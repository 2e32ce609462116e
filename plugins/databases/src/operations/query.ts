/**
 * One SQL statement as an operation. `prepare` runs every check before anything connects: `allow_write` needs
 * `databases:write` (and write access to the deployment), a read must look like one, and the connection resolves;
 * `apply` runs the statement in the request's one session. The route is a read-like POST (not audited as a
 * mutation): a writing statement is audited here instead, with its keyword and length, never its text.
 */
import { defineOperation, errors, type PluginContext, type Principal } from '@agent/sdk';
import { withSession, type Connect } from '../session.js';
import { QueryBody } from '../schemas.js';
import { assertReadStatement, firstKeyword } from '../statement.js';
import type { ConnectionSpec } from '../types.js';

/** Bytes of row data one answer carries at most; beyond it the result is marked truncated. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

export type QueryOperations = ReturnType<typeof queryOperations>;

export function queryOperations(ctx: PluginContext, connect: Connect) {
  /** Writing queries are audited (read-only ones are not, like other reads): the statement kind, never its text. */
  const auditWrite = (
    principal: Principal,
    ip: string | null,
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

  const query = defineOperation({
    name: 'databases.query',
    input: QueryBody,
    resource: (input) => ({ type: 'database', id: input.deployment ?? input.host ?? '' }),
    prepare: async (body, { principal }) => {
      const write = body.allow_write === true;
      if (write && !principal.can('databases:write')) throw errors.forbidden("allow_write needs the permission 'databases:write'");
      if (write && body.deployment && !principal.canAccessDeployment(body.deployment, 'write')) {
        throw errors.forbidden(`allow_write needs write access to deployment '${body.deployment}'`);
      }
      if (!write) assertReadStatement(body.query);
      const spec = await connect(body, principal);
      const statement = firstKeyword(body.query) || null;
      return {
        value: { spec, body, write },
        preview: {
          summary: `run a ${statement ?? 'SQL'} statement`,
          changes: [{ type: 'database', id: spec.database ?? '', actions: [write ? 'update' : 'no-op'] }],
        },
      };
    },
    apply: async ({ spec, body, write }, { principal, ip }) => {
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
          await auditWrite(principal, ip ?? null, spec, body.deployment ?? null, body.query, outcome).catch((err: unknown) => {
            if (outcome.success) throw err;
          });
        }
      }
    },
  });

  return { query };
}
