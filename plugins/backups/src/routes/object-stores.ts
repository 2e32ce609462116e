/**
 * Routes of object stores: registration, managed stores, attach, replicate. Every object-store route is global (a
 * principal limited to its deployments gets 403 GLOBAL_SCOPE_REQUIRED from the core); inside them, backups of
 * deployments stay behind the same checks as on the backup routes.
 */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { Accepted } from '../operations/common.js';
import { AttachOptions, CreateStoreInput, ProvisionInput, ReplicateOptions, type storeOperations } from '../operations/object-stores.js';
import { STORE_NAME, StoreView, storeView, type StoreRegistry } from '../s3/stores.js';
import { DEPLOYMENT_CHANGE_ERRORS, STORE_ERRORS } from './answers.js';

export type StoreOperations = ReturnType<typeof storeOperations>;

export const StoreName = Type.Object({ name: Type.String({ pattern: STORE_NAME }) });
const tag = 'object-stores';

export function registerStoreRoutes(ctx: PluginContext, stores: StoreRegistry, ops: StoreOperations): void {
  ctx.route({
    method: 'GET',
    path: '/object-stores',
    permission: 'object-stores:read',
    operationId: 'objectStores.list',
    tag,
    summary: 'List registered object stores (credentials are never returned)',
    response: Type.Array(StoreView),
    handler: () => stores.list().map(storeView),
  });
  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/object-stores',
      permission: 'object-stores:write',
      operationId: 'objectStores.create',
      tag,
      status: 201,
      creates: 'name',
      summary: 'Register an external S3-compatible store (credentials kept encrypted)',
      body: CreateStoreInput,
      response: StoreView,
      errors: { 409: ['OBJECT_STORE_EXISTS'] },
      plannable: true,
      input: (req) => req.body,
      respond: (view) => reply.created(view, `object store '${view.name}' registered`),
    }),
  );
  ctx.route(
    operationRoute(ops.provision, {
      method: 'POST',
      path: '/object-stores/provision-managed',
      permission: 'object-stores:write',
      operationId: 'objectStores.provisionManaged',
      tag,
      status: 201,
      creates: 'name',
      summary: 'Deploy an S3-compatible store on this host (image built locally), create its credentials and register it',
      body: ProvisionInput,
      response: StoreView,
      // It builds an image, creates a deployment and its first bucket.
      errors: mergeErrors(DEPLOYMENT_CHANGE_ERRORS, STORE_ERRORS, { 409: ['OBJECT_STORE_EXISTS'], 500: ['IMAGE_BUILD_FAILED'] }),
      input: (req) => req.body,
      respond: (view) => reply.created(view, `managed object store '${view.name}' provisioned`),
    }),
  );
  registerStoreItemRoutes(ctx, stores, ops);
}

function registerStoreItemRoutes(ctx: PluginContext, stores: StoreRegistry, ops: StoreOperations): void {
  ctx.route({
    method: 'GET',
    path: '/object-stores/:name',
    permission: 'object-stores:read',
    operationId: 'objectStores.get',
    tag,
    summary: 'One object store',
    params: StoreName,
    response: StoreView,
    errors: { 404: ['OBJECT_STORE_NOT_FOUND'] },
    handler: (req) => storeView(stores.get(req.params.name)),
  });
  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/object-stores/:name',
      permission: 'object-stores:write',
      operationId: 'objectStores.delete',
      tag,
      summary: 'Forget a store; a managed one is also removed from this host with remove_deployment=true',
      params: StoreName,
      query: Type.Object({ remove_deployment: Type.Optional(Type.Boolean({ default: false })) }),
      response: Type.Null(),
      // remove_deployment: the managed store's deployment is removed too.
      errors: mergeErrors(DEPLOYMENT_CHANGE_ERRORS, { 404: ['OBJECT_STORE_NOT_FOUND'] }),
      input: (req) => ({ name: req.params.name, remove_deployment: req.query.remove_deployment }),
      respond: ({ name }) => reply.ok(null, `object store '${name}' removed`),
    }),
  );
}

/** Registered after the bucket and object routes (the order of the API description). */
export function registerStoreActionRoutes(ctx: PluginContext, ops: StoreOperations): void {
  ctx.route(
    operationRoute(ops.attach, {
      method: 'POST',
      path: '/object-stores/:name/attach',
      permission: 'object-stores:write',
      operationId: 'objectStores.attach',
      tag,
      summary: 'Give a deployment the store endpoint and credentials (S3_* env vars) and network access; the deployment is recreated',
      params: StoreName,
      body: Type.Object(AttachOptions),
      // The deployment is checked (write); the store and its credentials are global: global principals only.
      deployment: (req) => req.body.deployment,
      deploymentLevel: 'write',
      response: Type.Object({
        deployment: Type.String(),
        store: Type.String(),
        endpoint: Type.String(),
        bucket: Type.String(),
        env: Type.Array(Type.String()),
      }),
      // Its bucket is created when missing, the deployment's environment set and recreated, a managed store's network joined.
      errors: mergeErrors(DEPLOYMENT_CHANGE_ERRORS, STORE_ERRORS),
      input: (req) => ({ ...req.body, store: req.params.name }),
      respond: (r) => reply.ok(r, `deployment '${r.deployment}' attached to '${r.store}'`),
    }),
  );
  ctx.route(
    operationRoute(ops.replicate, {
      method: 'POST',
      path: '/object-stores/:name/replicate',
      permission: 'object-stores:write',
      operationId: 'objectStores.replicate',
      tag,
      status: 202,
      summary: 'Copy every object to another store (identical objects skipped); the job result reports copied, skipped, failed, bytes',
      params: StoreName,
      body: Type.Object(ReplicateOptions),
      response: Accepted,
      errors: { 404: ['OBJECT_STORE_NOT_FOUND'] },
      input: (req) => ({ ...req.body, store: req.params.name }),
      respond: (r) => reply.accepted(r, r.message),
    }),
  );
}
