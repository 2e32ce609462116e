/**
 * The stored dashboards and who sees and changes them: a dashboard is its owner's; admins see every one, global
 * principals shared ones (without the panels of deployments they cannot access).
 */
import { randomUUID } from 'node:crypto';
import { errors, type Document, type Principal } from '@agent/sdk';
import { SERIES, type DashboardInput, type Panel } from './schemas.js';

export interface Dashboard {
  id: string;
  name: string;
  panels: Panel[];
  shared: boolean;
  owner: { id: number | null; principal: string; name: string };
  created_at: string;
  updated_at: string;
}

export interface DashboardsDoc {
  dashboards: Dashboard[];
}

export type DashboardsDocument = Document<DashboardsDoc>;

const isOwner = (p: Principal, d: Dashboard) => d.owner.principal === p.id || (p.user_id !== null && d.owner.id === p.user_id);
/** `isAdmin` is global by definition: admins see other users' dashboards, which no permission expresses. */
export const visible = (p: Principal, d: Dashboard) => p.isAdmin || isOwner(p, d) || (d.shared && p.isGlobal);
export const panelVisible = (p: Principal, panel: Panel) => panel.deployment === undefined || p.canAccessDeployment(panel.deployment);

export const view = (p: Principal, d: Dashboard) => ({
  id: d.id,
  name: d.name,
  shared: d.shared,
  owner: { id: d.owner.id, name: d.owner.name },
  panels: d.panels.filter((panel) => panelVisible(p, panel)),
  created_at: d.created_at,
  updated_at: d.updated_at,
});

/** The dashboard as the principal may see it: 404 for an unknown one and for one it may not see alike. */
export function findVisible(doc: DashboardsDocument, p: Principal, id: string): Dashboard {
  const d = doc.data.dashboards.find((x) => x.id === id);
  if (!d || !visible(p, d)) throw errors.notFound(`dashboard '${id}' not found`);
  return d;
}

export function assertMayChange(p: Principal, d: Dashboard): void {
  if (!p.isAdmin && !isOwner(p, d)) throw errors.forbidden('only the owner of a dashboard (or an admin) may change it');
}

/** Checks the panels of a request (series of their source, deployments the caller reaches, unique ids) and completes them. */
export function panelsOf(p: Principal, input: DashboardInput['panels']): Panel[] {
  const ids = new Set<string>();
  return input.map((panel, i) => {
    const at = `body.panels[${i}]`;
    if (!SERIES[panel.source].includes(panel.series)) {
      throw errors.badRequest(
        `${at}.series: unknown ${panel.source} series '${panel.series}' (known: ${SERIES[panel.source].join(', ')})`,
        'VALIDATION_FAILED',
        { field: `panels[${i}].series` },
      );
    }
    if (panel.deployment !== undefined && !p.canAccessDeployment(panel.deployment)) {
      throw errors.badRequest(`${at}.deployment: unknown deployment '${panel.deployment}'`, 'VALIDATION_FAILED', { field: `panels[${i}].deployment` });
    }
    const id = panel.id ?? `p${i + 1}-${randomUUID().slice(0, 6)}`;
    if (ids.has(id)) throw errors.badRequest(`${at}.id: duplicate panel id '${id}'`, 'VALIDATION_FAILED', { field: `panels[${i}].id` });
    ids.add(id);
    return {
      id,
      title: panel.title,
      source: panel.source,
      series: panel.series,
      ...(panel.deployment !== undefined ? { deployment: panel.deployment } : {}),
      type: panel.type,
      width: panel.width,
    };
  });
}
