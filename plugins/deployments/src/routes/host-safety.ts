/** What the host-safety policy says about a deployment's files now (a read), and its exceptions (an operation). */
import { isHttpError, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import type { HostSafetyOperations } from '../operations/host-safety.js';
import { HostSafetyReport, NameParams, SetHostSafety } from '../schemas.js';
import { CHECK_ERRORS } from './answers.js';

export function hostSafetyRoutes(ctx: PluginContext<any>, manager: DeploymentManager, ops: HostSafetyOperations): void {
  ctx.route({
    method: 'GET',
    path: '/deployments/:name/host-safety',
    permission: 'deployments:read',
    operationId: 'deployments.hostSafety',
    tag: 'deployments',
    summary: "What the host-safety policy says about the deployment's files now",
    description:
      "Checks the current compose file and `.env` (compose's own model of them) against the policy: the exceptions granted, the ones the files use, and what is refused (`violations`, each with the exception an admin could grant).",
    params: NameParams,
    deployment: 'name',
    response: HostSafetyReport,
    // The files checked as compose reads them (a refusal of the policy is the report's `violations`).
    errors: CHECK_ERRORS,
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      const policy = manager.opts.hostSafety() ? ('enforced' as const) : ('off' as const);
      try {
        const checked = await manager.checkCurrent(entry);
        return { policy, exceptions: entry.record.exceptions, used: [...checked.granted], violations: checked.violations.map((v) => ({ ...v })), passes: true };
      } catch (err) {
        if (!isHttpError(err) || err.code !== 'HOST_SAFETY') throw err;
        return { policy, exceptions: entry.record.exceptions, used: [], violations: (err.extra?.violations ?? []) as never, passes: false };
      }
    },
  });

  ctx.route(
    operationRoute(ops.setHostSafety, {
      method: 'PUT',
      path: '/deployments/:name/host-safety',
      permission: 'host-safety:write',
      tag: 'deployments',
      deploymentLevel: 'admin',
      summary: 'Grant host-safety exceptions to a deployment (replaces the list)',
      description:
        'Each exception lets exactly one refused value through, as named in the `HOST_SAFETY` refusal, e.g. `volumes:/var/run/docker.sock` or `cap_add:NET_ADMIN`. Takes effect at the next start. Audited.',
      params: NameParams,
      deployment: 'name',
      body: SetHostSafety,
      response: Type.Object({ name: Type.String(), exceptions: Type.Array(Type.String()) }),
      plannable: true,
      input: (req) => ({ ...req.body, name: req.params.name }),
      respond: (set) => reply.ok(set, `host-safety exceptions of ${set.name} set (${set.exceptions.length})`),
    }),
  );
}
