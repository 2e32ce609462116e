/** 4.2 deployments: list and details (reads), create, update, delete, start, stop, restart (operations, plannable). */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import type { DeploymentOperations } from '../operations/deployments.js';
import {
  CreateDeploymentRequest,
  CreatedDeployment,
  DeleteDeployment,
  DeletedDeployment,
  Deployment,
  DeploymentDetails,
  NameParams,
  Status,
  UpdateDeployment,
  UpdatedDeployment,
} from '../schemas.js';
import { deploymentDetails } from '../details.js';
import { COMPOSE_RUN_ERRORS } from './answers.js';
import { TEMPLATE_CREATE_ERRORS } from '../template-create.js';

export function deploymentRoutes(ctx: PluginContext<any>, manager: DeploymentManager, ops: DeploymentOperations): void {
  readRoutes(ctx, manager);
  changeRoutes(ctx, ops);
  lifecycleRoutes(ctx, ops);
}

function readRoutes(ctx: PluginContext<any>, manager: DeploymentManager): void {
  ctx.route({
    method: 'GET',
    path: '/deployments',
    permission: 'deployments:read',
    operationId: 'deployments.list',
    tenancy: 'filtered',
    tag: 'deployments',
    summary: 'List deployments',
    description: 'From the state cache (fed by engine events, reconciled periodically): no engine call per request.',
    query: Type.Object({ status: Type.Optional(Status) }),
    response: Type.Array(Deployment),
    handler: (req) => {
      // A principal that sees every deployment gets the list serialised once per change (the hot path).
      if (!req.query.status && req.principal.deploymentLevel('*') !== null)
        return reply.stream(manager.listJson(), { contentType: 'application/json; charset=utf-8' });
      return manager.list().filter((d) => req.principal.canAccessDeployment(d.name) && (!req.query.status || d.status === req.query.status));
    },
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name',
    permission: 'deployments:read',
    operationId: 'deployments.get',
    tag: 'deployments',
    summary: 'One deployment: services, compose content, env (secrets redacted), containers and ports',
    params: NameParams,
    deployment: 'name',
    response: DeploymentDetails,
    handler: (req) => deploymentDetails(manager, manager.require(req.params.name)),
  });
}

function changeRoutes(ctx: PluginContext<any>, ops: DeploymentOperations): void {
  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/deployments',
      permission: 'deployments:write',
      tenancy: 'create',
      tag: 'deployments',
      status: 201,
      creates: 'name',
      summary: 'Create a deployment (from a compose file or a template)',
      description:
        'From a compose file (`compose_content`, `env_vars`) or from a template in one call (`template`, `variables`: its compose file with its variables filled in), not both (400 `COMPOSE_OR_TEMPLATE`); 404 `TEMPLATE_NOT_FOUND` for a template the catalogue lacks, 400 `TEMPLATE_VARIABLE_UNKNOWN` / `TEMPLATE_VARIABLE_REQUIRED` naming the variable. Validates the YAML (400 `INVALID_YAML` with line and column) and the compose structure (400 `INVALID_COMPOSE`), applies the host-safety policy (400 `HOST_SAFETY`), writes the files atomically, grants the creator admin access, and starts it when `auto_start`. 409 `DEPLOYMENT_EXISTS` when the name is taken. If starting fails the deployment is kept and `start_error` says why.',
      body: CreateDeploymentRequest,
      // The compose checks and the engine answer 400s of their own (the description lists them "among others").
      errors: mergeErrors(COMPOSE_RUN_ERRORS, {
        400: [...TEMPLATE_CREATE_ERRORS[400], 'NAME_RESERVED', '*'],
        404: TEMPLATE_CREATE_ERRORS[404],
        409: ['DEPLOYMENT_EXISTS', 'NAME_IN_USE'],
      }),
      response: CreatedDeployment,
      plannable: true,
      input: (req) => req.body,
      respond: ({ info, start_error, revision }, req) =>
        reply.created(
          { ...info, start_error, revision },
          start_error
            ? `deployment ${info.name} created, but starting it failed`
            : `deployment ${info.name} created${req.body.auto_start ? ' and started' : ''}`,
        ),
    }),
  );

  ctx.route(
    operationRoute(ops.update, {
      method: 'PUT',
      path: '/deployments/:name',
      permission: 'deployments:write',
      tag: 'deployments',
      summary: 'Update the compose file and/or the environment',
      description:
        '`env_vars` replaces the whole `.env`. When the deployment runs, services whose configuration changed are recreated (`up -d`). Recorded as a revision (`reason`); with `backup: true` a backup of the deployment is taken first and linked from it. A new compose file ends the image pins of an earlier rollback; an update of the `.env` alone keeps them.',
      params: NameParams,
      deployment: 'name',
      body: UpdateDeployment,
      response: UpdatedDeployment,
      // A running deployment is brought up to date: compose may fail (the change is then a failed revision).
      errors: mergeErrors(COMPOSE_RUN_ERRORS, { 503: ['BACKUPS_UNAVAILABLE', '*'] }),
      plannable: true,
      input: (req) => ({ ...req.body, name: req.params.name }),
      respond: ({ info, recreated, revision, backup_id }) =>
        reply.ok(
          { ...info, recreated, revision, backup_id },
          `deployment ${info.name} updated${recreated ? ' and its services brought up to date' : ''} (revision ${revision})`,
        ),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/deployments/:name',
      permission: 'deployments:write',
      tag: 'deployments',
      deploymentLevel: 'admin',
      summary: 'Delete a deployment',
      description:
        'Compose down (containers and networks). The folder is kept unless `remove_files=true`; named volumes are kept unless `remove_volumes=true`. A kept folder is not rediscovered and can be reused by creating the same name.',
      params: NameParams,
      deployment: 'name',
      query: DeleteDeployment,
      response: DeletedDeployment,
      errors: COMPOSE_RUN_ERRORS,
      plannable: true,
      input: (req) => ({ ...req.query, name: req.params.name }),
      respond: (deleted) => reply.ok(deleted, `deployment ${deleted.name} deleted`),
    }),
  );
}

function lifecycleRoutes(ctx: PluginContext<any>, ops: DeploymentOperations): void {
  const lifecycle = [
    [ops.start, 'started', 'Start a deployment (409 `DEPLOYMENT_RUNNING` when it already runs)', ['DEPLOYMENT_RUNNING']],
    [ops.stop, 'stopped', 'Stop a deployment (409 `DEPLOYMENT_NOT_RUNNING` when it does not run)', ['DEPLOYMENT_NOT_RUNNING']],
    [ops.restart, 'restarted', 'Restart a deployment (starts what is not running)', []],
  ] as const;
  for (const [op, done, summary, refusals] of lifecycle) {
    ctx.route(
      operationRoute(op, {
        method: 'POST',
        path: `/deployments/:name/${op.name.slice('deployments.'.length)}`,
        permission: 'deployments:write',
        tag: 'deployments',
        summary,
        params: NameParams,
        deployment: 'name',
        response: Deployment,
        errors: mergeErrors(COMPOSE_RUN_ERRORS, { 409: refusals }),
        plannable: true,
        input: (req) => req.params,
        respond: (info) => reply.ok(info, `deployment ${info.name} ${done}`),
      }),
    );
  }
}
