/** The scheduler routes' schemas: each input declared once, the operations' inputs derived from them. */
import { DEPLOYMENT_OR_RETIRED, deploymentName, Pagination, RecordId, Type } from '@agent/sdk';
import { TASK_TYPES } from './tasks.js';

const SERVICE_NAME = '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$';
/** Offsets beyond this are refused (400): executions are merged per task for a principal limited to deployments. */
const MAX_OFFSET = 10_000;
const Page = { ...Pagination(50, 500), offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0 })) };
const TaskType = () => Type.Union(TASK_TYPES.map((t) => Type.Literal(t)));
const Command = Type.Array(Type.String({ maxLength: 4096 }), { minItems: 1, maxItems: 64, description: 'argv, run without a shell' });

export const TaskId = Type.Object({ id: RecordId('task id') });

export const CreateTask = Type.Object({
  deployment_name: deploymentName(),
  task_type: TaskType(),
  cron_expr: Type.String({ minLength: 1, maxLength: 120, description: 'cron expression, 5 or 6 fields' }),
  action: Type.Optional(Type.String({ maxLength: 500, description: 'free text (may be empty)' })),
  description: Type.Optional(Type.String({ maxLength: 500 })),
  enabled: Type.Optional(Type.Boolean({ default: true })),
  service: Type.Optional(Type.String({ pattern: SERVICE_NAME })),
  command: Type.Optional(Command),
  retention: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
});

/** The fields given are changed; `null` clears a service, command or retention. */
export const UpdateTask = Type.Object({
  task_type: Type.Optional(TaskType()),
  cron_expr: Type.Optional(Type.String({ minLength: 1, maxLength: 120 })),
  action: Type.Optional(Type.String({ maxLength: 500 })),
  description: Type.Optional(Type.String({ maxLength: 500 })),
  enabled: Type.Optional(Type.Boolean()),
  service: Type.Optional(Type.Union([Type.String({ pattern: SERVICE_NAME }), Type.Null()])),
  command: Type.Optional(Type.Union([Command, Type.Null()])),
  retention: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1000 }), Type.Null()])),
});
export const UpdateTaskInput = Type.Composite([TaskId, UpdateTask]);

export const ListTasksQuery = Type.Object({ deployment: Type.Optional(deploymentName()) });
export const ExecutionsPage = Type.Object(Page);
export const RecentExecutionsQuery = Type.Object({
  deployment: Type.Optional(Type.String({ pattern: DEPLOYMENT_OR_RETIRED, description: 'only executions of tasks of this deployment (or retired name)' })),
  ...Page,
});
