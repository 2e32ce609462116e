/** `POST /api/plugins/:name/deployments`: a deployment from what a plugin offers to deploy (its `deployable`). */
import { DEPLOYMENT_NAME, errors, reply, Type, type PluginContext, type PluginDirectory } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';

export function deployableRoutes(ctx: PluginContext<any>, manager: DeploymentManager, plugins: PluginDirectory): void {
  ctx.route({
    method: 'POST',
    path: '/plugins/:name/deployments',
    permission: 'plugins:write',
    tag: 'plugins',
    operationId: 'plugins.deploy',
    tenancy: 'create',
    status: 201,
    summary: 'Create a deployment from a plugin (its `deployable` template, with the given config)',
    description: 'The rendered compose file goes through the same checks as any deployment (host-safety policy included); needs `deployments:write` too.',
    params: Type.Object({ name: Type.String({ pattern: '^[@a-z0-9][a-z0-9./_-]*$', maxLength: 214 }) }),
    body: Type.Object({
      name: Type.String({ pattern: DEPLOYMENT_NAME, description: 'name of the new deployment' }),
      config: Type.Optional(
        Type.Record(Type.String(), Type.Unknown(), { description: "values for the plugin's deployment config schema (see GET /api/plugins/:name)" }),
      ),
    }),
    handler: async (req) => {
      const offer = plugins.deployable(req.params.name);
      if (offer === undefined) throw errors.notFound(`plugin '${req.params.name}' not found`);
      if (offer === null) throw errors.badRequest(`plugin '${req.params.name}' offers no deployment`, 'PLUGIN_NOT_DEPLOYABLE');
      if (!req.principal.can('deployments:write')) throw errors.forbidden("permission 'deployments:write' required");
      const config = structuredClone(req.body.config ?? {});
      const problem = offer.validate(config);
      if (problem) throw errors.badRequest(problem);
      const rendered = await offer.render(config);
      const info = await manager.create(
        { name: req.body.name, compose_content: rendered.compose_content, env_vars: rendered.env_vars, auto_start: true },
        req.principal,
      );
      return reply.created(info, `deployment ${req.body.name} created from plugin '${offer.plugin}'`);
    },
  });
}
