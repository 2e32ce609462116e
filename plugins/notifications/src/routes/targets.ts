/** /api/notifications/targets: the list (a read), its replacement and test messages (operations). All global. */
import { operationRoute, reply, Type, type Document, type PluginContext } from '@agent/sdk';
import type { Target } from '../dispatcher.js';
import type { TargetOperations } from '../operations/targets.js';
import { TargetView, targetView, TestResult } from '../schemas.js';

export function targetRoutes(ctx: PluginContext, doc: Document<{ targets: Target[] }>, ops: TargetOperations): void {
  ctx.route({
    method: 'GET',
    path: '/notifications/targets',
    permission: 'notifications:read',
    operationId: 'notifications.listTargets',
    summary: 'Delivery targets (secrets in URLs masked)',
    response: Type.Array(TargetView),
    handler: () => doc.data.targets.map(targetView),
  });

  ctx.route(
    operationRoute(ops.replaceTargets, {
      method: 'PUT',
      path: '/notifications/targets',
      permission: 'notifications:write',
      summary: 'Replace the delivery targets (the whole array)',
      description:
        'Each target is a URL plus filters. An invalid URL is refused with 400 naming the target. To keep a stored secret, send back the masked URL from GET unchanged (with the target id).',
      body: ops.replaceTargets.input,
      response: Type.Array(TargetView),
      errors: { 400: ['INVALID_TARGET_URL'] },
      input: (req) => req.body,
      respond: (targets) => reply.ok(targets.map(targetView), `${targets.length} target(s) saved`),
    }),
  );

  ctx.route(
    operationRoute(ops.test, {
      method: 'POST',
      path: '/notifications/test',
      permission: 'notifications:write',
      audit: true,
      summary: 'Send a test message to a URL or a stored target (one attempt, now)',
      body: ops.test.input,
      response: TestResult,
      // 502: the one attempt failed (the target's answer or the connection, in the message).
      errors: { 400: ['INVALID_TARGET_URL'], 502: ['NOTIFICATION_FAILED'] },
      input: (req) => req.body,
    }),
  );
}
