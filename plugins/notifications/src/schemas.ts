/** The notification routes' schemas: each input declared once (the operations take them as their inputs). */
import { DEPLOYMENT_OR_RETIRED, deploymentName, Pagination, Secret, Type, type Static } from '@agent/sdk';
import { NOTIFICATION_EVENTS } from './api.js';
import type { Target } from './dispatcher.js';
import { maskTargetUrl } from './targets.js';

export const TARGET_ID = '^[a-z0-9][a-z0-9_-]{0,62}$';
const SEVERITIES = ['info', 'warning', 'critical'] as const;
const EventName = Type.Union(NOTIFICATION_EVENTS.map((e) => Type.Literal(e)));
const Severity = Type.Union(SEVERITIES.map((s) => Type.Literal(s)));
/** In target filters also the retired name of a deleted deployment (`<name>~<time>`), so a target read back can be saved. */
const FilterDeployment = Type.String({ pattern: DEPLOYMENT_OR_RETIRED });

export const TargetView = Type.Object({
  id: Type.String(),
  name: Type.String(),
  url: Type.String({ description: 'the target URL with its secrets masked as ****' }),
  scheme: Type.String(),
  enabled: Type.Boolean(),
  events: Type.Array(Type.String()),
  severities: Type.Array(Type.String()),
  deployments: Type.Array(Type.String()),
});

export const targetView = (t: Target): Static<typeof TargetView> => ({
  id: t.id,
  name: t.name,
  url: maskTargetUrl(t.url),
  scheme: t.url.slice(0, t.url.indexOf('://')),
  enabled: t.enabled,
  events: t.events,
  severities: t.severities,
  deployments: t.deployments,
});

const TargetInput = Type.Object({
  id: Type.Optional(Type.String({ pattern: TARGET_ID, description: 'kept from a previous read; generated when absent' })),
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

/** The body of a replacement: the whole list. */
export const Targets = Type.Array(TargetInput, { maxItems: 100 });
export type TargetsInput = Static<typeof Targets>;

export const TestMessage = Type.Object({
  url: Type.Optional(Secret({ minLength: 1, maxLength: 2048 })),
  target_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'id or name of a stored target' })),
  message: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
});
export const TestResult = Type.Object({ delivered: Type.Boolean(), target: Type.String(), duration_ms: Type.Integer() });

export const Message = Type.Object({
  event: EventName,
  severity: Severity,
  title: Type.String({ minLength: 1, maxLength: 300 }),
  message: Type.String({ minLength: 1, maxLength: 5000 }),
  deployment: Type.Optional(Type.Union([deploymentName(), Type.Null()])),
  targets: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 })),
});
export const Queued = Type.Object({ queued: Type.Array(Type.String()) });

export const DeliveriesQuery = Type.Object({
  target: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'target id or name' })),
  status: Type.Optional(Type.Union([Type.Literal('delivered'), Type.Literal('failed'), Type.Literal('dropped')])),
  ...Pagination(50, 1000),
});

export const Delivery = Type.Object({
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
