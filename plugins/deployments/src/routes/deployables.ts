/** `POST /api/plugins/:name/deployments`: a deployment from what a plugin offers to deploy (its `deployable`). */
import { mergeErrors, operationRoute, reply, type PluginContext } from '@agent/sdk';
import type { DeployableOperations } from '../operations/deployables.js';
import { DeployFromPlugin, PluginParams } from '../schemas.js';
import { COMPOSE_RUN_ERRORS } from './answers.js';

export function deployableRoutes(ctx: PluginContext<any>, ops: DeployableOperations): void {
  ctx.route(
    operationRoute(ops.deploy, {
      method: 'POST',
      path: '/plugins/:name/deployments',
      permission: 'plugins:write',
      tag: 'plugins',
      tenancy: 'create',
      status: 201,
      summary: 'Create a deployment from a plugin (its `deployable` template, with the given config)',
      description: 'The rendered compose file goes through the same checks as any deployment (host-safety policy included); needs `deployments:write` too.',
      params: PluginParams,
      body: DeployFromPlugin,
      // A deployment created as any other (the create route's answers), from a plugin that may offer none.
      errors: mergeErrors(COMPOSE_RUN_ERRORS, { 400: ['NAME_RESERVED', 'PLUGIN_NOT_DEPLOYABLE'], 409: ['DEPLOYMENT_EXISTS', 'NAME_IN_USE'] }),
      input: (req) => ({ ...req.body, plugin: req.params.name }),
      respond: ({ info, plugin }) => reply.created(info, `deployment ${info.name} created from plugin '${plugin}'`),
    }),
  );
}
