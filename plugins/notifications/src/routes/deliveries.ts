/** GET /api/notifications/deliveries: the delivery log (a read, global). */
import { reply, Type, type PluginContext } from '@agent/sdk';
import type { Dispatcher } from '../dispatcher.js';
import { DeliveriesQuery, Delivery } from '../schemas.js';

export function deliveryRoutes(ctx: PluginContext, dispatcher: Dispatcher): void {
  ctx.route({
    method: 'GET',
    path: '/notifications/deliveries',
    permission: 'notifications:read',
    operationId: 'notifications.listDeliveries',
    summary: 'The delivery log, newest first (bounded)',
    query: DeliveriesQuery,
    response: Type.Array(Delivery),
    handler: (req) => {
      const limit = req.query.limit ?? 50;
      const offset = req.query.offset ?? 0;
      const { items, total } = dispatcher.deliveries({ target: req.query.target, status: req.query.status, limit, offset });
      return reply.page(items, { total, limit, offset });
    },
  });
}
