/** POST /deployments/:name/scale: the replicas of a service of a swarm deployment (an operation, plannable, audited). */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { ENGINE_ERRORS } from '@agent/plugin-docker/api';
import { ScaleBody, type ScaleOperations } from '../operations/scale.js';
import { NameParams } from '../schemas.js';

export function scaleRoutes(ctx: PluginContext, ops: ScaleOperations): void {
  ctx.route(
    operationRoute(ops.scale, {
      method: 'POST',
      path: '/deployments/:name/scale',
      permission: 'deployments:write',
      tag: 'deployments',
      summary: 'Set the replicas of a service of a swarm deployment',
      description:
        "Swarm deployments only (409 `NOT_SWARM_DEPLOYMENT` for compose ones). The engine starts or stops tasks as the service's `update_config` says; the deployment's `services[].replicas` shows them converge. A later start or update deploys the compose file again, whose `deploy.replicas` then holds.",
      params: NameParams,
      deployment: 'name',
      body: ScaleBody,
      response: Type.Object({ name: Type.String(), service: Type.String(), replicas: Type.Integer() }),
      plannable: true,
      errors: mergeErrors(ENGINE_ERRORS, { 409: ['NOT_SWARM_DEPLOYMENT', 'NOT_SWARM_MANAGER', 'DEPLOYMENT_NOT_RUNNING', 'NOT_REPLICATED'] }),
      input: (req) => ({ ...req.body, name: req.params.name }),
      respond: (r) => reply.ok(r, `${r.name}/${r.service} scaled to ${r.replicas} replica(s)`),
    }),
  );
}
