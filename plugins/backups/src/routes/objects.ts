/** Routes of the objects of a store's bucket: list, upload (streamed), download (streamed), delete. */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { ObjectStoreClient } from '../s3/client.js';
import { assertMayTouch, mayList, type ObjectOwner } from '../s3/layout.js';
import { Bucket } from '../operations/object-stores.js';
import { checkKey, ObjectKey, type objectOperations } from '../operations/objects.js';
import type { StoreRegistry } from '../s3/stores.js';
import { StoreName } from './object-stores.js';
import { STORE_ERRORS } from './answers.js';

const tag = 'object-stores';
const ObjectInfo = Type.Object({ key: Type.String(), size: Type.Integer(), etag: Type.String(), last_modified: Type.Union([Type.String(), Type.Null()]) });
const Where = Type.Object({ bucket: Bucket, key: ObjectKey });
/** An object named by its key: the key checked (`checkKey`), and what the store answers. */
const OBJECT_ERRORS = mergeErrors(STORE_ERRORS, { 400: ['INVALID_KEY'] });

export interface ObjectRouteDeps {
  stores: StoreRegistry;
  ops: ReturnType<typeof objectOperations>;
  ownerOf(bucket: string, key: string): ObjectOwner;
}

export function registerObjectRoutes(ctx: PluginContext, deps: ObjectRouteDeps): void {
  const { stores, ops, ownerOf } = deps;
  ctx.route({
    method: 'GET',
    path: '/object-stores/:name/objects',
    permission: 'object-stores:read',
    operationId: 'objectStores.listObjects',
    tag,
    summary: 'List objects of a bucket (prefix; token pagination: meta.next_token)',
    params: StoreName,
    query: Type.Object({
      bucket: Bucket,
      prefix: Type.Optional(Type.String({ maxLength: 1024 })),
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
      token: Type.Optional(Type.String({ maxLength: 2048, description: 'meta.next_token of the previous page' })),
    }),
    response: Type.Array(ObjectInfo),
    errors: STORE_ERRORS,
    handler: async (req) => {
      const { bucket, prefix, limit = 100, token } = req.query;
      const client = new ObjectStoreClient(stores.get(req.params.name));
      try {
        const page = await client.listObjects(bucket, { prefix, limit, token });
        // Backups of deployments the caller may not read are left out (a page may then hold fewer than `limit`).
        return reply.ok(
          page.items.filter((o) => mayList(req.principal, ownerOf(bucket, o.key))),
          undefined,
          { limit, next_token: page.next_token },
        );
      } finally {
        client.destroy();
      }
    },
  });
  ctx.route(
    operationRoute(ops.upload, {
      method: 'POST',
      path: '/object-stores/:name/objects',
      permission: 'object-stores:write',
      operationId: 'objectStores.uploadObject',
      tag,
      status: 201,
      summary: 'Upload an object: the request body is streamed to the store as is',
      params: StoreName,
      rawBody: true,
      query: Where,
      response: Type.Object({ bucket: Type.String(), key: Type.String(), size: Type.Integer(), etag: Type.String() }),
      errors: OBJECT_ERRORS,
      input: (req) => {
        const length = Number(req.headers['content-length'] ?? NaN);
        const type = req.headers['content-type'];
        const content_type = typeof type === 'string' ? type : undefined;
        return { ...req.query, store: req.params.name, content: req.raw.req, length: Number.isFinite(length) ? length : undefined, content_type };
      },
      respond: (r) => reply.created(r, `uploaded ${r.key}`),
    }),
  );
  registerObjectItemRoutes(ctx, deps);
}

function registerObjectItemRoutes(ctx: PluginContext, { stores, ops, ownerOf }: ObjectRouteDeps): void {
  ctx.route({
    method: 'GET',
    path: '/object-stores/:name/objects/download',
    permission: 'object-stores:read',
    operationId: 'objectStores.downloadObject',
    tag,
    summary: 'Download an object (streamed)',
    params: StoreName,
    produces: 'application/octet-stream',
    query: Where,
    errors: OBJECT_ERRORS,
    handler: async (req) => {
      const { bucket, key } = req.query;
      checkKey(key);
      assertMayTouch(req.principal, ownerOf(bucket, key), 'read', key);
      const client = new ObjectStoreClient(stores.get(req.params.name));
      try {
        const got = await client.download(bucket, key, req.signal);
        got.body.once('close', () => client.destroy());
        const filename = key.split('/').pop() || 'object';
        return reply.stream(got.body, { contentType: got.contentType ?? 'application/octet-stream', length: got.length ?? undefined, filename });
      } catch (err) {
        client.destroy();
        throw err;
      }
    },
  });
  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/object-stores/:name/objects',
      permission: 'object-stores:write',
      operationId: 'objectStores.deleteObject',
      tag,
      summary: 'Remove an object',
      params: StoreName,
      query: Where,
      response: Type.Null(),
      errors: OBJECT_ERRORS,
      input: (req) => ({ ...req.query, store: req.params.name }),
      respond: (r) => reply.ok(null, `object '${r.key}' removed`),
    }),
  );
}
