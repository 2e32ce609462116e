/** POST /api/notifications/send (an operation): a message for the targets that receive it. */
import { operationRoute, reply, type PluginContext } from '@agent/sdk';
import type { MessageOperations } from '../operations/messages.js';
import { Queued } from '../schemas.js';

export function messageRoutes(ctx: PluginContext, ops: MessageOperations): void {
  ctx.route(
    operationRoute(ops.send, {
      method: 'POST',
      path: '/notifications/send',
      permission: 'notifications:write',
      summary: 'Queue a message for the targets that receive it (used by apps such as the observability app)',
      description:
        'With `targets` (ids or names) the message goes to those enabled targets whatever their filters; otherwise to every enabled target whose events, severities and deployments match. ' +
        'Global, also with a `deployment`: the targets belong to everyone, a principal limited to its deployments may not message them (403 GLOBAL_SCOPE_REQUIRED).',
      // Not bound to `deployment`: naming one's own deployment must not open the global targets to a scoped principal.
      body: ops.send.input,
      response: Queued,
      status: 202,
      input: (req) => req.body,
      respond: (queued) => reply.accepted(queued),
    }),
  );
}
