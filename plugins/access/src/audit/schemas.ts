/** Schemas of the audit endpoints: the filters (shared by list, stats and export), the answers, the settings. */
import { MAX_INTEGER, Seconds, Type } from '@agent/sdk';

const ActorType = Type.Union([Type.Literal('user'), Type.Literal('api_key'), Type.Literal('system')]);
const Text = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: 256, description }));
const Time = (description: string) => Type.Optional(Type.String({ format: 'date-time', description }));

export const filterFields = {
  actor_id: Text('e.g. `user:3`, `api_key:5`, `system:backups`'),
  actor_type: Type.Optional(ActorType),
  action: Text('operation id, e.g. `deployments.create`'),
  resource_type: Text('e.g. `deployments`'),
  resource_id: Text('e.g. a deployment name or an id'),
  deployment: Text('events about this deployment'),
  success: Type.Optional(Type.Boolean()),
  client_ip: Text('client IP address'),
  start_time: Time('from this time (RFC 3339, inclusive)'),
  end_time: Time('up to this time (RFC 3339, inclusive)'),
};

/** `GET /audit/events`. */
export const ListQuery = Type.Object({
  ...filterFields,
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INTEGER, default: 0 })),
});

/** `GET /audit/stats`. */
export const StatsQuery = Type.Object({
  ...filterFields,
  top: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 20, description: 'entries per ranking' })),
});

/** `POST /audit/export`. */
export const ExportBody = Type.Object({
  format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')], { default: 'json' })),
  ...filterFields,
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000, default: 100_000 })),
});

/** `DELETE /audit/cleanup`. */
export const CleanupQuery = Type.Object({ older_than: Seconds({ description: 'seconds' }) });

const Count = Type.Integer({ minimum: 0 });
export const CleanupView = Type.Object({ events_deleted: Count, older_than: Type.String() });
export const StatsView = Type.Object({
  total: Count,
  succeeded: Count,
  failed: Count,
  by_action: Type.Array(Type.Object({ action: Type.String(), count: Count, failed: Count })),
  by_actor: Type.Array(Type.Object({ actor_id: Type.String(), actor_type: Type.String(), actor_name: Type.Union([Type.String(), Type.Null()]), count: Count })),
  by_resource: Type.Array(Type.Object({ resource_type: Type.String(), count: Count })),
  by_success: Type.Array(Type.Object({ success: Type.Boolean(), count: Count })),
  per_day: Type.Array(Type.Object({ day: Type.String(), count: Count, failed: Count })),
});
export const ExecutionView = Type.Object({ status: Type.String(), output: Type.String(), error: Type.Union([Type.String(), Type.Null()]) });

export const AuditSettings = Type.Object({
  retention_days: Type.Integer({
    minimum: 0,
    maximum: 36500,
    default: 365,
    description: 'audit events older than this are deleted daily; 0 keeps them forever',
  }),
});
