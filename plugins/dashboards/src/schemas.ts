/** The dashboards' schemas: each input declared once, the operations' inputs derived from them. */
import { deploymentName, Type, type Static } from '@agent/sdk';
import { CONTAINER_METRICS, SERVING_METRICS } from '@agent/plugin-observability/api';

export const SERIES: Record<'container' | 'serving', string[]> = {
  container: CONTAINER_METRICS.map((m) => m.name),
  serving: SERVING_METRICS.map((m) => m.name),
};

const PanelInput = Type.Object({
  id: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$', description: 'generated when absent' })),
  title: Type.String({ minLength: 1, maxLength: 100 }),
  source: Type.Union([Type.Literal('container'), Type.Literal('serving')]),
  series: Type.String({
    minLength: 1,
    maxLength: 100,
    description: `a metric of the source: container: ${SERIES.container.join(', ')}; serving: ${SERIES.serving.join(', ')}`,
  }),
  deployment: Type.Optional(deploymentName()),
  type: Type.Union([Type.Literal('line'), Type.Literal('stat')]),
  width: Type.Integer({ minimum: 1, maximum: 12, description: 'columns of a 12-column grid' }),
});

/** The body of a create and of an update (which replaces the dashboard). */
export const DashboardInput = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  panels: Type.Array(PanelInput, { maxItems: 50 }),
  shared: Type.Optional(Type.Boolean({ default: false, description: 'visible to every user who may read dashboards' })),
});
export type DashboardInput = Static<typeof DashboardInput>;

export const IdParams = Type.Object({ id: Type.String({ format: 'uuid' }) });
export const UpdateDashboardInput = Type.Composite([IdParams, DashboardInput]);

export const Panel = Type.Object({
  id: Type.String(),
  title: Type.String(),
  source: Type.String(),
  series: Type.String(),
  deployment: Type.Optional(Type.String()),
  type: Type.String(),
  width: Type.Integer(),
});
export type Panel = Static<typeof Panel>;

export const DashboardView = Type.Object({
  id: Type.String(),
  name: Type.String(),
  panels: Type.Array(Panel),
  shared: Type.Boolean(),
  owner: Type.Object({ id: Type.Union([Type.Integer(), Type.Null()]), name: Type.String() }),
  created_at: Type.String(),
  updated_at: Type.String(),
});
