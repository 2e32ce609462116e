/** Routes of an object store's buckets. */
import { operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { ObjectStoreClient } from '../s3/client.js';
import { Bucket } from '../operations/object-stores.js';
import { STORE_NAME, type StoreRegistry } from '../s3/stores.js';
import { StoreName, type StoreOperations } from './object-stores.js';
import { STORE_ERRORS } from './answers.js';

const tag = 'object-stores';

export function registerBucketRoutes(ctx: PluginContext, stores: StoreRegistry, ops: StoreOperations): void {
  ctx.route({
    method: 'GET',
    path: '/object-stores/:name/buckets',
    permission: 'object-stores:read',
    operationId: 'objectStores.listBuckets',
    tag,
    summary: 'List buckets',
    params: StoreName,
    response: Type.Array(Type.Object({ name: Type.String(), created_at: Type.Union([Type.String(), Type.Null()]) })),
    errors: STORE_ERRORS,
    handler: async (req) => {
      const client = new ObjectStoreClient(stores.get(req.params.name));
      try {
        return await client.listBuckets();
      } finally {
        client.destroy();
      }
    },
  });
  ctx.route(
    operationRoute(ops.createBucket, {
      method: 'POST',
      path: '/object-stores/:name/buckets',
      permission: 'object-stores:write',
      operationId: 'objectStores.createBucket',
      tag,
      status: 201,
      summary: 'Create a bucket',
      params: StoreName,
      body: Type.Object({ bucket: Bucket }),
      response: Type.Object({ name: Type.String() }),
      errors: STORE_ERRORS,
      input: (req) => ({ store: req.params.name, bucket: req.body.bucket }),
      respond: (r) => reply.created(r, `bucket '${r.name}' created`),
    }),
  );
  ctx.route(
    operationRoute(ops.deleteBucket, {
      method: 'DELETE',
      path: '/object-stores/:name/buckets/:bucket',
      permission: 'object-stores:write',
      operationId: 'objectStores.deleteBucket',
      tag,
      summary: 'Remove an empty bucket',
      params: Type.Object({ name: Type.String({ pattern: STORE_NAME }), bucket: Bucket }),
      response: Type.Null(),
      errors: STORE_ERRORS,
      input: (req) => ({ store: req.params.name, bucket: req.params.bucket }),
      respond: (r) => reply.ok(null, `bucket '${r.name}' removed`),
    }),
  );
}
