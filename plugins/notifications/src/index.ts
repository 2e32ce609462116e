/**
 * notifications: delivery targets given as URLs (webhooks, Slack, Discord, Telegram, e-mail), the `notify`
 * service, and delivery of agent events (alerts, health recoveries, failed backups/deployments/renewals,
 * expiring certificates, auto-blocked IPs) to the targets that subscribe to them.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type {} from '@agent/plugin-deployments/api';
import { definePlugin, DEPLOYMENT_OR_RETIRED, deploymentName, errors, HttpError, Pagination, reply, Secret, Type, type Static } from '@agent/sdk';
import { NOTIFICATION_EVENTS, notificationsService, type NotificationMessage } from './api.js';
import { Dispatcher, type Target } from './dispatcher.js';
import { subscribeToEvents } from './subscriptions.js';
import { DeliveryError } from './senders.js';
import { MASK, maskTargetUrl, parseTargetUrl, TargetUrlError } from './targets.js';

const ID = '^[a-z0-9][a-z0-9_-]{0,62}$';
const SEVERITIES = ['info', 'warning', 'critical'] as const;
const EventName = Type.Union(NOTIFICATION_EVENTS.map((e) => Type.Literal(e)));
const Severity = Type.Union(SEVERITIES.map((s) => Type.Literal(s)));
const DeploymentName = deploymentName();
/** In target filters also the retired name of a deleted deployment (`<name>~<time>`), so a target read back can be saved. */
const FilterDeployment = Type.String({ pattern: DEPLOYMENT_OR_RETIRED });

const TargetView = Type.Object({
  id: Type.String(),
  name: Type.String(),
  url: Type.String({ description: 'the target URL with its secrets masked as ****' }),
  scheme: Type.String(),
  enabled: Type.Boolean(),
  events: Type.Array(Type.String()),
  severities: Type.Array(Type.String()),
  deployments: Type.Array(Type.String()),
});

const TargetInput = Type.Object({
  id: Type.Optional(Type.String({ pattern: ID, description: 'kept from a previous read; generated when absent' })),
  name: Type.String({ minLength: 1, maxLength: 100 }),
  url: Secret({
    minLength: 1,
    maxLength: 2048,
    description: 'generic+https://…, generic+http://…, slack://…, discord://…, telegram://…, smtp://…; a masked URL read back unchanged keeps the stored one',
  }),
  enabled: Type.Optional(Type.Boolean({ default: true })),
  events: Type.Optional(Type.Array(EventName, { uniqueItems: true, default: [], description: 'events this target receives; empty: all' })),
  severities: Type.Optional(Type.Array(Severity, { uniqueItems: true, default: [], description: 'severities it receives; empty: all' })),
  deployments: Type.Optional(
    Type.Array(FilterDeployment, {
      uniqueItems: true,
      default: [],
      description: 'deployments it receives messages about; empty: all. A deleted deployment stays here under its retired name (`<name>~<time>`)',
    }),
  ),
});
type TargetInput = Static<typeof TargetInput>;

const Delivery = Type.Object({
  id: Type.Integer(),
  time: Type.String(),
  target_id: Type.Union([Type.String(), Type.Null()]),
  target_name: Type.String(),
  event: Type.String(),
  severity: Type.String(),
  title: Type.String(),
  deployment: Type.Union([Type.String(), Type.Null()]),
  status: Type.String(),
  attempts: Type.Integer(),
  error: Type.Union([Type.String(), Type.Null()]),
  duration_ms: Type.Integer(),
});

const view = (t: Target) => ({
  id: t.id,
  name: t.name,
  url: maskTargetUrl(t.url),
  scheme: t.url.slice(0, t.url.indexOf('://')),
  enabled: t.enabled,
  events: t.events,
  severities: t.severities,
  deployments: t.deployments,
});

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

    /** Validates the new list; a masked URL equal to the stored target's masked URL keeps the stored URL. */
    const resolveTargets = (input: TargetInput[]): Target[] => {
      const names = new Set<string>();
      const ids = new Set<string>();
      return input.map((t, i) => {
        const label = `targets[${i}] '${t.name}'`;
        if (names.has(t.name)) throw errors.badRequest(`${label}: duplicate name`, 'VALIDATION_FAILED', { field: `[${i}].name`, target: t.name });
        names.add(t.name);
        const previous = t.id ? doc.data.targets.find((p) => p.id === t.id) : undefined;
        let url = t.url;
        if (url.includes(MASK)) {
          if (!previous || maskTargetUrl(previous.url) !== url) {
            throw errors.badRequest(`${label}: the url contains a masked secret (****); send the full URL`, 'INVALID_TARGET_URL', {
              field: `[${i}].url`,
              target: t.name,
            });
          }
          url = previous.url;
        }
        try {
          parseTargetUrl(url);
        } catch (err) {
          if (!(err instanceof TargetUrlError)) throw err;
          throw errors.badRequest(`${label}: invalid url: ${err.message}`, 'INVALID_TARGET_URL', { field: `[${i}].url`, target: t.name });
        }
        const id = t.id ?? randomUUID().slice(0, 8);
        if (ids.has(id)) throw errors.badRequest(`${label}: duplicate id '${id}'`, 'VALIDATION_FAILED', { field: `[${i}].id`, target: t.name });
        ids.add(id);
        return {
          id,
          name: t.name,
          url,
          enabled: t.enabled ?? true,
          events: t.events ?? [],
          severities: t.severities ?? [],
          deployments: t.deployments ?? [],
        };
      });
    };

    ctx.route({
      method: 'GET',
      path: '/notifications/targets',
      permission: 'notifications:read',
      operationId: 'notifications.listTargets',
      summary: 'Delivery targets (secrets in URLs masked)',
      response: Type.Array(TargetView),
      handler: () => doc.data.targets.map(view),
    });

    ctx.route({
      method: 'PUT',
      path: '/notifications/targets',
      permission: 'notifications:write',
      operationId: 'notifications.replaceTargets',
      summary: 'Replace the delivery targets (the whole array)',
      description:
        'Each target is a URL plus filters. An invalid URL is refused with 400 naming the target. To keep a stored secret, send back the masked URL from GET unchanged (with the target id).',
      body: Type.Array(TargetInput, { maxItems: 100 }),
      response: Type.Array(TargetView),
      handler: async (req) => {
        const targets = resolveTargets(req.body);
        await doc.update((d) => {
          d.targets = targets;
        });
        return reply.ok(targets.map(view), `${targets.length} target(s) saved`);
      },
    });

    ctx.route({
      method: 'POST',
      path: '/notifications/test',
      permission: 'notifications:write',
      operationId: 'notifications.test',
      audit: true,
      summary: 'Send a test message to a URL or a stored target (one attempt, now)',
      body: Type.Object({
        url: Type.Optional(Secret({ minLength: 1, maxLength: 2048 })),
        target_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'id or name of a stored target' })),
        message: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
      }),
      response: Type.Object({ delivered: Type.Boolean(), target: Type.String(), duration_ms: Type.Integer() }),
      handler: async (req) => {
        const { url, target_id, message } = req.body;
        if ((url === undefined) === (target_id === undefined)) throw errors.badRequest('send either {url} or {target_id}');
        let target: string;
        if (target_id !== undefined) {
          const t = doc.data.targets.find((x) => x.id === target_id || x.name === target_id);
          if (!t) throw errors.notFound(`notification target '${target_id}' not found`);
          target = t.url;
        } else {
          target = url!;
          try {
            parseTargetUrl(target);
          } catch (err) {
            if (err instanceof TargetUrlError) throw errors.badRequest(`body.url: invalid url: ${err.message}`, 'INVALID_TARGET_URL', { field: 'url' });
            throw err;
          }
        }
        const started = Date.now();
        try {
          await dispatcher.sendOnce(target, {
            event: 'test',
            severity: 'info',
            title: 'Test notification',
            message: message ?? `This is a test message from the agent on ${hostname()}.`,
            deployment: null,
            time: new Date().toISOString(),
            agent: hostname(),
          });
        } catch (err) {
          if (err instanceof DeliveryError) throw new HttpError(502, 'NOTIFICATION_FAILED', `delivery to ${maskTargetUrl(target)} failed: ${err.message}`);
          throw err;
        }
        return { delivered: true, target: maskTargetUrl(target), duration_ms: Date.now() - started };
      },
    });

    ctx.route({
      method: 'POST',
      path: '/notifications/send',
      permission: 'notifications:write',
      operationId: 'notifications.send',
      summary: 'Queue a message for the targets that receive it (used by apps such as the observability app)',
      description:
        'With `targets` (ids or names) the message goes to those enabled targets whatever their filters; otherwise to every enabled target whose events, severities and deployments match. ' +
        'Global, also with a `deployment`: the targets belong to everyone, a principal limited to its deployments may not message them (403 GLOBAL_SCOPE_REQUIRED).',
      // Not bound to `deployment`: naming one's own deployment must not open the global targets to a scoped principal.
      body: Type.Object({
        event: EventName,
        severity: Severity,
        title: Type.String({ minLength: 1, maxLength: 300 }),
        message: Type.String({ minLength: 1, maxLength: 5000 }),
        deployment: Type.Optional(Type.Union([DeploymentName, Type.Null()])),
        targets: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 })),
      }),
      response: Type.Object({ queued: Type.Array(Type.String()) }),
      status: 202,
      handler: async (req) => {
        const about = req.body.deployment;
        if (about && !req.principal.canAccessDeployment(about)) throw errors.notFound(`deployment '${about}' not found`);
        return reply.accepted(await send(req.body as NotificationMessage));
      },
    });

    ctx.route({
      method: 'GET',
      path: '/notifications/deliveries',
      permission: 'notifications:read',
      operationId: 'notifications.listDeliveries',
      summary: 'The delivery log, newest first (bounded)',
      query: Type.Object({
        target: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'target id or name' })),
        status: Type.Optional(Type.Union([Type.Literal('delivered'), Type.Literal('failed'), Type.Literal('dropped')])),
        ...Pagination(50, 1000),
      }),
      response: Type.Array(Delivery),
      handler: (req) => {
        const limit = req.query.limit ?? 50;
        const offset = req.query.offset ?? 0;
        const { items, total } = dispatcher.deliveries({ target: req.query.target, status: req.query.status, limit, offset });
        return reply.page(items, { total, limit, offset });
      },
    });
    return { provides: { notifications: { send } } };
  },
});
