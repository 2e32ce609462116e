/**
 * notifications: delivery targets given as URLs (webhooks, Slack, Discord, Telegram, e-mail), the `notify`
 * service, and delivery of agent events (alerts, health recoveries, failed backups/deployments/renewals,
 * expiring certificates, auto-blocked IPs) to the targets that subscribe to them.
 */
import { hostname } from 'node:os';
import type {} from '@agent/plugin-deployments/api';
import { definePlugin, Type } from '@agent/sdk';
import { notificationsService, type NotificationMessage } from './api.js';
import { Dispatcher, type Target } from './dispatcher.js';
import { subscribeToEvents } from './subscriptions.js';
import { targetOperations } from './operations/targets.js';
import { messageOperations } from './operations/messages.js';
import { targetRoutes } from './routes/targets.js';
import { messageRoutes } from './routes/messages.js';
import { deliveryRoutes } from './routes/deliveries.js';

export default definePlugin({
  name: 'notifications',
  version: '0.1.0',
  description: 'Notification targets (webhooks, Slack, Discord, Telegram, e-mail) and delivery of agent events',
  config: Type.Object({
    notifications: Type.Object(
      {
        retries: Type.Integer({ minimum: 0, maximum: 10, default: 3, description: 'extra attempts after a failed delivery' }),
        retry_backoff_ms: Type.Integer({ minimum: 1, maximum: 600_000, default: 2000, description: 'wait before the first retry; doubles each time' }),
        log_max: Type.Integer({ minimum: 10, maximum: 100_000, default: 1000, description: 'delivery log entries kept' }),
        queue_max: Type.Integer({ minimum: 1, maximum: 10_000, default: 200, description: 'messages waiting per target before the oldest is dropped' }),
        endpoints: Type.Object(
          {
            slack: Type.String({ pattern: '^https?://', default: 'https://hooks.slack.com' }),
            discord: Type.String({ pattern: '^https?://', default: 'https://discord.com' }),
            telegram: Type.String({ pattern: '^https?://', default: 'https://api.telegram.org' }),
          },
          { default: {}, description: 'API base URLs of the chat services (for a relay or a test double)' },
        ),
      },
      { default: {} },
    ),
  }),
  resources: {
    // Global: the targets are everyone's (a team channel, an on-call address); only principals with global scope reach them.
    notifications: { description: 'notification targets, test messages and the delivery log (global)', operator: 'write', viewer: 'none', owner: 'global' },
  },
  provides: { notifications: notificationsService },

  async setup(ctx) {
    const cfg = ctx.config.notifications;
    // Target URLs carry credentials: the document is encrypted at rest.
    const doc = await ctx.store.secureDocument({ targets: [] as Target[] }, 'targets');
    const dispatcher = new Dispatcher(
      ctx.store.journal(),
      () => doc.data.targets,
      {
        retries: cfg.retries,
        backoffMs: cfg.retry_backoff_ms,
        logMax: cfg.log_max,
        queueMax: cfg.queue_max,
        endpoints: cfg.endpoints,
        agentName: hostname(),
      },
      ctx.log,
    );
    ctx.onClose(() => dispatcher.stop());

    const send = async (m: NotificationMessage) => ({ queued: dispatcher.send(m) });
    subscribeToEvents(ctx.events, send, ctx.log);

    // A filter naming a deleted deployment must not pass to a new deployment of that name (someone else's, maybe):
    // it is kept under the retired name. Dropping it instead could leave the filter empty, which means "everything".
    ctx.events.on('deployment.deleted', async ({ name, retired_as }) => {
      if (!doc.data.targets.some((t) => t.deployments.includes(name))) return;
      await doc.update((d) => {
        for (const t of d.targets) t.deployments = t.deployments.map((x) => (x === name ? retired_as : x));
      });
      ctx.log.info('notification target filters of a deleted deployment retired', { deployment: name, retired_as });
    });

    // Each change is an operation (src/operations); the routes (src/routes) run them.
    const notify = { send };
    targetRoutes(ctx, doc, targetOperations(doc, dispatcher));
    messageRoutes(ctx, messageOperations(notify));
    deliveryRoutes(ctx, dispatcher);
    return { provides: { notifications: notify } };
  },
});
