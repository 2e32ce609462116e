/** The shape of a plan as the API shows it (`plans.view`): described once, for the plan routes and every `?plan=true`. */
import { Type } from '@agent/sdk';

const Actor = Type.Object({ type: Type.String(), id: Type.String(), name: Type.String() });

export const PlanChangeView = Type.Object({
  type: Type.String(),
  id: Type.String(),
  actions: Type.Array(Type.Union([Type.Literal('create'), Type.Literal('update'), Type.Literal('delete'), Type.Literal('no-op')])),
  before: Type.Optional(Type.Unknown({ description: 'the resource before (redacted when sensitive)' })),
  after: Type.Optional(Type.Unknown({ description: 'the resource after (redacted when sensitive)' })),
  diff: Type.Optional(Type.Unknown({ description: 'a unified diff of text content (redacted when sensitive)' })),
  sensitive: Type.Optional(Type.Boolean()),
});

export const PlanView = Type.Object({
  id: Type.String({ format: 'uuid' }),
  action: Type.String({ description: "the operation, e.g. 'deployments.create'" }),
  status: Type.Union(['available', 'applying', 'applied', 'failed', 'obsolete', 'expired'].map((s) => Type.Literal(s))),
  resource: Type.Object({ type: Type.String(), id: Type.String() }),
  request: Type.Object({
    method: Type.String(),
    path: Type.String(),
    query: Type.Record(Type.String(), Type.Unknown()),
    body: Type.Optional(Type.Unknown({ description: 'secrets redacted' })),
  }),
  changes: Type.Array(PlanChangeView),
  summary: Type.String(),
  snapshot: Type.Object({ files: Type.Record(Type.String(), Type.String()), records: Type.Record(Type.String(), Type.String()) }),
  created_by: Actor,
  created_at: Type.String(),
  expires_at: Type.String(),
  applied_at: Type.Optional(Type.String()),
  applied_by: Type.Optional(Actor),
  apply_error: Type.Optional(Type.Object({ code: Type.String(), error: Type.String() })),
});
