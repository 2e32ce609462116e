/** Routes of object stores: registration, buckets, objects (streamed), attach, replicate, managed stores. */
import { Transform } from 'node:stream';
import { deploymentName, errors, globalScopeRequired, reply, Secret, Type, type PluginContext } from '@agent/sdk';
import { BUCKET_NAME, invalidObjectKey, ObjectStoreClient } from '../s3/client.js';
import { replicate } from '../s3/replicate.js';
import { STORE_NAME, StoreView, storeView, type StoreRecord, type StoreRegistry } from '../s3/stores.js';
import type { Jobs } from '../jobs.js';
import type { ManagedStores } from '../s3/managed.js';
import { assertMayTouch, mayList, mayTouch, objectOwner } from '../s3/layout.js';

export interface StoreRouteDeps {
  stores: StoreRegistry;
  jobs: Jobs;
  managed: ManagedStores;
  deploymentExists(name: string): boolean;
  /** The deployment (or retired name) of a recorded backup. */
  backupDeployment(id: string): string | undefined;
}

const Name = Type.Object({ name: Type.String({ pattern: STORE_NAME }) });
const Bucket = Type.String({ pattern: BUCKET_NAME, description: 'bucket name' });
const Key = Type.String({ minLength: 1, maxLength: 1024, description: 'object key' });
const ObjectInfo = Type.Object({ key: Type.String(), size: Type.Integer(), etag: Type.String(), last_modified: Type.Union([Type.String(), Type.Null()]) });

const checkKey = (key: string, field = 'query.key') => {
  const problem = invalidObjectKey(key);
  if (problem) throw errors.badRequest(`${field}: ${problem}`, 'INVALID_KEY');
};

/** Runs `fn` with a client of the store, closing it afterwards. */
async function withClient<T>(stores: StoreRegistry, name: string, fn: (c: ObjectStoreClient, s: StoreRecord) => Promise<T>): Promise<T> {
  const record = stores.get(name);
  const client = new ObjectStoreClient(record);
  try {
    return await fn(client, record);
  } finally {
    client.destroy();
  }
}

export function registerStoreRoutes(ctx: PluginContext<any>, deps: StoreRouteDeps): void {
  const { stores, jobs, managed } = deps;
  // Every object-store route is global (a principal limited to its deployments gets 403 GLOBAL_SCOPE_REQUIRED from the
  // core); inside them, backups of deployments stay behind the same checks as on the backup routes.
  const ownerOf = (bucket: string, key: string) => objectOwner(stores.list(), deps.backupDeployment, bucket, key);

  ctx.route({
    method: 'GET',
    path: '/object-stores',
    permission: 'object-stores:read',
    operationId: 'objectStores.list',
    tag: 'object-stores',
    summary: 'List registered object stores (credentials are never returned)',
    response: Type.Array(StoreView),
    handler: () => stores.list().map(storeView),
  });

  ctx.route({
    method: 'POST',
    path: '/object-stores',
    permission: 'object-stores:write',
    operationId: 'objectStores.create',
    tag: 'object-stores',
    status: 201,
    creates: 'name',
    summary: 'Register an external S3-compatible store (credentials kept encrypted)',
    body: Type.Object({
      name: Type.String({ pattern: STORE_NAME }),
      endpoint: Type.String({ pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$', maxLength: 300, description: 'http(s) URL of the S3 API' }),
      region: Type.Optional(Type.String({ pattern: '^[a-z0-9-]{1,40}$', default: 'us-east-1' })),
      access_key_id: Type.String({ minLength: 1, maxLength: 256 }),
      secret_access_key: Secret({ minLength: 1, maxLength: 256 }),
      path_style: Type.Optional(Type.Boolean({ default: true, description: 'path-style addressing (most self-hosted servers)' })),
      bucket: Type.Optional(Type.String({ pattern: BUCKET_NAME, description: 'bucket for backups (default agent-backups)' })),
      prefix: Type.Optional(Type.String({ pattern: '^([A-Za-z0-9._-]+/)*$', maxLength: 200, description: "key prefix for backups, ending with '/'" })),
    }),
    response: StoreView,
    plan: {
      resource: (req) => ({ type: 'object-store', id: req.body.name }),
      preview: (req) => ({
        changes: [{ type: 'object-store', id: req.body.name, actions: ['create'], after: { ...req.body, secret_access_key: '(secret)' }, sensitive: true }],
      }),
      snapshot: (req) => ({ records: { exists: !!stores.find(req.body.name) } }),
    },
    handler: async (req) => {
      const record: StoreRecord = {
        name: req.body.name,
        endpoint: req.body.endpoint.replace(/\/+$/, ''),
        region: req.body.region ?? 'us-east-1',
        access_key_id: req.body.access_key_id,
        secret_access_key: req.body.secret_access_key,
        path_style: req.body.path_style ?? true,
        bucket: req.body.bucket ?? 'agent-backups',
        prefix: req.body.prefix ?? '',
        managed: null,
        attachments: [],
        created_at: new Date().toISOString(),
      };
      await stores.add(record);
      return reply.created(storeView(record), `object store '${record.name}' registered`);
    },
  });

  ctx.route({
    method: 'POST',
    path: '/object-stores/provision-managed',
    permission: 'object-stores:write',
    operationId: 'objectStores.provisionManaged',
    tag: 'object-stores',
    status: 201,
    creates: 'name',
    summary: 'Deploy an S3-compatible store on this host (image built locally), create its credentials and register it',
    body: Type.Object({
      name: Type.String({ pattern: STORE_NAME, description: 'store name; the deployment is named objstore-<name>' }),
      port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'host port on 127.0.0.1 (0 = any free port)' })),
      bucket: Type.Optional(Type.String({ pattern: BUCKET_NAME, description: 'bucket for backups, created now (default agent-backups)' })),
    }),
    response: StoreView,
    handler: async (req) => {
      if (!req.principal.can('deployments:write')) throw errors.forbidden("provisioning a store creates a deployment: 'deployments:write' required");
      const record = await managed.provision({ name: req.body.name, port: req.body.port ?? 0, bucket: req.body.bucket ?? 'agent-backups' }, req.principal);
      return reply.created(storeView(record), `managed object store '${record.name}' provisioned`);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/object-stores/:name',
    permission: 'object-stores:read',
    operationId: 'objectStores.get',
    tag: 'object-stores',
    summary: 'One object store',
    params: Name,
    response: StoreView,
    handler: (req) => storeView(stores.get(req.params.name)),
  });

  ctx.route({
    method: 'DELETE',
    path: '/object-stores/:name',
    permission: 'object-stores:write',
    operationId: 'objectStores.delete',
    tag: 'object-stores',
    summary: 'Forget a store; a managed one is also removed from this host with remove_deployment=true',
    params: Name,
    query: Type.Object({ remove_deployment: Type.Optional(Type.Boolean({ default: false })) }),
    handler: async (req) => {
      const record = stores.get(req.params.name);
      if (record.managed && req.query.remove_deployment) await managed.remove(record);
      await stores.remove(record.name);
      return reply.ok(null, `object store '${record.name}' removed`);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/object-stores/:name/buckets',
    permission: 'object-stores:read',
    operationId: 'objectStores.listBuckets',
    tag: 'object-stores',
    summary: 'List buckets',
    params: Name,
    response: Type.Array(Type.Object({ name: Type.String(), created_at: Type.Union([Type.String(), Type.Null()]) })),
    handler: (req) => withClient(stores, req.params.name, (c) => c.listBuckets()),
  });

  ctx.route({
    method: 'POST',
    path: '/object-stores/:name/buckets',
    permission: 'object-stores:write',
    operationId: 'objectStores.createBucket',
    tag: 'object-stores',
    status: 201,
    summary: 'Create a bucket',
    params: Name,
    body: Type.Object({ bucket: Bucket }),
    response: Type.Object({ name: Type.String() }),
    handler: (req) =>
      withClient(stores, req.params.name, async (c) => {
        await c.createBucket(req.body.bucket);
        return reply.created({ name: req.body.bucket }, `bucket '${req.body.bucket}' created`);
      }),
  });

  ctx.route({
    method: 'DELETE',
    path: '/object-stores/:name/buckets/:bucket',
    permission: 'object-stores:write',
    operationId: 'objectStores.deleteBucket',
    tag: 'object-stores',
    summary: 'Remove an empty bucket',
    params: Type.Object({ name: Type.String({ pattern: STORE_NAME }), bucket: Bucket }),
    handler: (req) =>
      withClient(stores, req.params.name, async (c) => {
        await c.deleteBucket(req.params.bucket);
        return reply.ok(null, `bucket '${req.params.bucket}' removed`);
      }),
  });

  ctx.route({
    method: 'GET',
    path: '/object-stores/:name/objects',
    permission: 'object-stores:read',
    operationId: 'objectStores.listObjects',
    tag: 'object-stores',
    summary: 'List objects of a bucket (prefix; token pagination: meta.next_token)',
    params: Name,
    query: Type.Object({
      bucket: Bucket,
      prefix: Type.Optional(Type.String({ maxLength: 1024 })),
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
      token: Type.Optional(Type.String({ maxLength: 2048, description: 'meta.next_token of the previous page' })),
    }),
    response: Type.Array(ObjectInfo),
    handler: (req) =>
      withClient(stores, req.params.name, async (c) => {
        const limit = req.query.limit ?? 100;
        const page = await c.listObjects(req.query.bucket, { prefix: req.query.prefix, limit, token: req.query.token });
        // Backups of deployments the caller may not read are left out (a page may then hold fewer than `limit`).
        const items = page.items.filter((o) => mayList(req.principal, ownerOf(req.query.bucket, o.key)));
        return reply.ok(items, undefined, { limit, next_token: page.next_token });
      }),
  });

  ctx.route({
    method: 'POST',
    path: '/object-stores/:name/objects',
    permission: 'object-stores:write',
    operationId: 'objectStores.uploadObject',
    tag: 'object-stores',
    status: 201,
    summary: 'Upload an object: the request body is streamed to the store as is',
    params: Name,
    rawBody: true,
    query: Type.Object({ bucket: Bucket, key: Key }),
    response: Type.Object({ bucket: Type.String(), key: Type.String(), size: Type.Integer(), etag: Type.String() }),
    handler: async (req) => {
      checkKey(req.query.key);
      // Writing into a deployment's backup layout is changing its backups.
      assertMayTouch(req.principal, ownerOf(req.query.bucket, req.query.key), 'write', req.query.key);
      const length = Number(req.headers['content-length'] ?? NaN);
      return withClient(stores, req.params.name, async (c) => {
        let size = 0;
        const counted = new Transform({
          transform(chunk: Buffer, _enc, done) {
            size += chunk.length;
            done(null, chunk);
          },
        });
        req.raw.req.pipe(counted);
        req.raw.req.once('error', (err) => counted.destroy(err));
        const contentType = typeof req.headers['content-type'] === 'string' ? req.headers['content-type'] : undefined;
        const out = await c.upload(req.query.bucket, req.query.key, counted, {
          length: Number.isFinite(length) ? length : undefined,
          contentType,
          signal: req.signal,
        });
        return reply.created({ bucket: req.query.bucket, key: req.query.key, size, etag: out.etag }, `uploaded ${req.query.key}`);
      });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/object-stores/:name/objects/download',
    permission: 'object-stores:read',
    operationId: 'objectStores.downloadObject',
    tag: 'object-stores',
    summary: 'Download an object (streamed)',
    params: Name,
    produces: 'application/octet-stream',
    query: Type.Object({ bucket: Bucket, key: Key }),
    handler: async (req) => {
      checkKey(req.query.key);
      assertMayTouch(req.principal, ownerOf(req.query.bucket, req.query.key), 'read', req.query.key);
      const client = new ObjectStoreClient(stores.get(req.params.name));
      try {
        const got = await client.download(req.query.bucket, req.query.key, req.signal);
        got.body.once('close', () => client.destroy());
        return reply.stream(got.body, {
          contentType: got.contentType ?? 'application/octet-stream',
          length: got.length ?? undefined,
          filename: req.query.key.split('/').pop() || 'object',
        });
      } catch (err) {
        client.destroy();
        throw err;
      }
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/object-stores/:name/objects',
    permission: 'object-stores:write',
    operationId: 'objectStores.deleteObject',
    tag: 'object-stores',
    summary: 'Remove an object',
    params: Name,
    query: Type.Object({ bucket: Bucket, key: Key }),
    handler: async (req) => {
      checkKey(req.query.key);
      assertMayTouch(req.principal, ownerOf(req.query.bucket, req.query.key), 'write', req.query.key);
      return withClient(stores, req.params.name, async (c) => {
        if (!(await c.head(req.query.bucket, req.query.key))) throw errors.notFound(`object '${req.query.key}' not found`, 'OBJECT_NOT_FOUND');
        await c.deleteObject(req.query.bucket, req.query.key);
        return reply.ok(null, `object '${req.query.key}' removed`);
      });
    },
  });

  ctx.route({
    method: 'POST',
    path: '/object-stores/:name/attach',
    permission: 'object-stores:write',
    operationId: 'objectStores.attach',
    tag: 'object-stores',
    summary: 'Give a deployment the store endpoint and credentials (S3_* env vars) and network access; the deployment is recreated',
    params: Name,
    body: Type.Object({
      deployment: deploymentName(),
      bucket: Type.Optional(Bucket),
      prefix: Type.Optional(Type.String({ pattern: '^([A-Za-z0-9._-]+/)*$', maxLength: 200 })),
    }),
    // The deployment is checked (write); the store and its credentials are global: global principals only.
    deployment: (req) => req.body.deployment,
    deploymentLevel: 'write',
    response: Type.Object({ deployment: Type.String(), store: Type.String(), endpoint: Type.String(), bucket: Type.String(), env: Type.Array(Type.String()) }),
    handler: async (req) => {
      if (!req.principal.isGlobal) throw globalScopeRequired("giving a deployment a store's credentials");
      if (!deps.deploymentExists(req.body.deployment)) throw errors.notFound(`deployment '${req.body.deployment}' not found`);
      const result = await managed.attach(stores.get(req.params.name), req.body.deployment, req.body.bucket, req.body.prefix ?? '');
      return reply.ok(result, `deployment '${req.body.deployment}' attached to '${req.params.name}'`);
    },
  });

  ctx.route({
    method: 'POST',
    path: '/object-stores/:name/replicate',
    permission: 'object-stores:write',
    operationId: 'objectStores.replicate',
    tag: 'object-stores',
    status: 202,
    summary: 'Copy every object to another store (identical objects skipped); the job result reports copied, skipped, failed, bytes',
    params: Name,
    body: Type.Object({
      target: Type.String({ pattern: STORE_NAME }),
      buckets: Type.Optional(Type.Array(Bucket, { maxItems: 100, description: 'default: every bucket of the source' })),
      prefix: Type.Optional(Type.String({ maxLength: 1024 })),
    }),
    response: Type.Object({ job_id: Type.String(), message: Type.String() }),
    handler: (req) => {
      if (req.body.target === req.params.name) throw errors.badRequest('body.target: a store cannot be replicated onto itself');
      const source = stores.get(req.params.name);
      const target = stores.get(req.body.target);
      // Copying a backup is downloading it: objects the caller could not download stay behind (counted `denied`).
      const principal = req.principal;
      const accept = (bucket: string, key: string) => mayTouch(principal, ownerOf(bucket, key), 'read');
      const job = jobs.submit(
        {
          type: 'replicate',
          deployment: null,
          trigger: 'manual',
          created_by: req.principal.name,
          run: async (jctx) => {
            const a = new ObjectStoreClient(source);
            const b = new ObjectStoreClient(target);
            try {
              const report = await replicate(a, b, {
                buckets: req.body.buckets,
                prefix: req.body.prefix,
                signal: jctx.signal,
                accept,
                onProgress: (r) => jctx.progress({ step: `copied ${r.copied}, skipped ${r.skipped}, failed ${r.failed}`, bytes: r.bytes }),
              });
              if (report.failed > 0 && report.copied === 0 && report.skipped === 0) throw new Error(`every copy failed: ${report.errors[0]}`);
              return { ...report };
            } finally {
              a.destroy();
              b.destroy();
            }
          },
        },
        'replicate',
      );
      return reply.accepted(
        { job_id: job.id, message: `replication ${source.name} → ${target.name} queued` },
        `replication ${source.name} → ${target.name} queued`,
      );
    },
  });
}
