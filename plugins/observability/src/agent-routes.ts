/**
 * Routes of the in-process part, for the app (which calls them with its system token; admins may too). The app is a
 * separate process: what only the agent knows reaches it through the agent's API.
 * - Deployment deletions: `deployment.deleted` is recorded here (bounded, persisted), and the app reads what it has
 *   not seen yet, so a deletion while the app was down or restarting is not missed. The app then removes the
 *   deployment's alert rules: a new deployment of the same name must not inherit them.
 * - Authorization of a rule's creator at fire time (alert actions re-check their principal at every run).
 */
import { deploymentName, Nullable, principalFrom, Type, type PluginContext, type PrincipalDirectory, type PrincipalInfo } from '@agent/sdk';
import type {} from '@agent/plugin-deployments/api';

/** Deletions kept for the app (it reads them within seconds; this only bounds the file). */
const KEEP = 1000;

export const DeletionView = Type.Object({
  seq: Type.Integer({ description: 'increasing number of the deletion' }),
  name: Type.String(),
  retired_as: Type.String({ description: '`<name>~<time>`: what the deployment left is kept under this name' }),
  deleted_at: Type.String(),
});
type Deletion = typeof DeletionView.static;

/** The principal behind `user:<id>` / `api_key:<id>` as the core would build it now; null when it cannot act. */
function current(principals: PrincipalDirectory, id: string): PrincipalInfo | null {
  const m = /^(user|api_key):([0-9]{1,15})$/.exec(id);
  if (!m) return null;
  return principals.principalById(id);
}

/** Why the principal may not run a rule's action on a container of `deployment` (null: of no deployment), or null. */
export function actionRefusal(principals: PrincipalDirectory, principalId: string, deployment: string | null): string | null {
  if (principalId.startsWith('system:')) return `its creator ${principalId} is a system principal, which does not run alert actions`;
  const info = current(principals, principalId);
  if (!info) return `its creator ${principalId} can no longer act (deleted or deactivated, or the key was revoked or has expired)`;
  const p = principalFrom(info);
  const who = `its creator ${info.name} (${principalId})`;
  if (!p.can('alerts:write')) return `${who} no longer holds 'alerts:write'`;
  if (deployment === null) return p.isGlobal ? null : `${who} is limited to its deployments and the container belongs to none`;
  if (!p.canAccessDeployment(deployment, 'write')) return `${who} no longer has write access to deployment '${deployment}'`;
  return null;
}

export async function registerAgentRoutes(ctx: PluginContext, principals: PrincipalDirectory): Promise<void> {
  const deletions = await ctx.store.document({ seq: 0, items: [] as Deletion[] }, 'deployment-deletions');

  ctx.events.on('deployment.deleted', async ({ name, retired_as }) => {
    await deletions.update((d) => {
      d.seq += 1;
      d.items.push({ seq: d.seq, name, retired_as, deleted_at: new Date().toISOString() });
      if (d.items.length > KEEP) d.items = d.items.slice(-KEEP);
    });
  });

  ctx.route({
    method: 'GET',
    path: '/observability/deployment-deletions',
    permission: 'observability:read',
    operationId: 'observability.deploymentDeletions',
    summary: 'Deployments deleted since a point (the observability app removes their alert rules)',
    description: 'Global: names of deleted deployments are not for principals limited to their deployments. The last 1000 deletions are kept.',
    query: Type.Object({
      after: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0, description: '`seq` of the last deletion already seen' })),
    }),
    response: Type.Object({ seq: Type.Integer({ description: 'the last deletion recorded' }), items: Type.Array(DeletionView) }),
    handler: (req) => ({ seq: deletions.data.seq, items: deletions.data.items.filter((d) => d.seq > (req.query.after ?? 0)) }),
  });

  ctx.route({
    // Tells whether another principal may act: admins (and the app's system principal) only.
    method: 'POST',
    path: '/observability/authorize-action',
    permission: 'observability:write',
    operationId: 'observability.authorizeAction',
    summary: "Whether an alert rule's creator may still run its action on a container of a deployment",
    body: Type.Object({
      principal: Type.String({ pattern: '^(user|api_key|system):[A-Za-z0-9_.-]{1,64}$', description: '`user:<id>`, `api_key:<id>`' }),
      deployment: Nullable(deploymentName({ description: "the container's deployment; null for a container of no deployment" })),
    }),
    audit: false,
    response: Type.Object({ allowed: Type.Boolean(), reason: Nullable(Type.String()) }),
    handler: (req) => {
      const reason = actionRefusal(principals, req.body.principal, req.body.deployment);
      return { allowed: reason === null, reason };
    },
  });
}
