/** Log sources of a deployment: container output, the built-in file sources of its kind, and custom ones (an operation). */
import { operationRoute, Type, type PluginContext } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import type { LogSourceOperations } from '../operations/log-sources.js';
import { NameParams, SetLogSources } from '../schemas.js';
import { sourceViews, type KindSources } from '../log-sources.js';

const SourceSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: Type.Union([Type.Literal('container'), Type.Literal('file')]),
  path: Type.Union([Type.String(), Type.Null()]),
  format: Type.Union([Type.String(), Type.Null()]),
  builtin: Type.Boolean(),
});

export function logSourceRoutes(ctx: PluginContext<any>, manager: DeploymentManager, kinds: KindSources, ops: LogSourceOperations): void {
  ctx.route({
    method: 'GET',
    path: '/deployments/:name/log-sources',
    permission: 'deployments:read',
    operationId: 'deployments.logSources',
    tag: 'deployments',
    summary: 'Log sources: container output, built-in file sources of the deployment kind, custom ones',
    params: NameParams,
    deployment: 'name',
    response: Type.Array(SourceSchema),
    handler: (req) => sourceViews(manager.require(req.params.name), kinds),
  });

  ctx.route(
    operationRoute(ops.setLogSources, {
      method: 'PUT',
      path: '/deployments/:name/log-sources',
      permission: 'deployments:write',
      tag: 'deployments',
      summary: 'Replace the custom file log sources',
      description: 'Paths are relative to the deployment folder; absolute paths and `..` are refused (400 `INVALID_PATH`). The files need not exist yet.',
      params: NameParams,
      deployment: 'name',
      body: SetLogSources,
      response: Type.Array(SourceSchema),
      errors: { 400: ['INVALID_PATH'] },
      input: (req) => ({ ...req.body, name: req.params.name }),
    }),
  );
}
