/**
 * The changes made to object stores (global state: the routes are for global principals only): register, provision
 * a managed one, forget, buckets, attach to a deployment, replicate (a job).
 */
import { defineOperation, deploymentName, errors, globalScopeRequired, Secret, Type } from '@agent/sdk';
import { BUCKET_NAME, ObjectStoreClient } from '../s3/client.js';
import { mayTouch, type ObjectOwner } from '../s3/layout.js';
import type { ManagedStores } from '../s3/managed.js';
import { replicate } from '../s3/replicate.js';
import { STORE_NAME, storeView, type StoreRecord, type StoreRegistry } from '../s3/stores.js';
import type { Jobs } from '../jobs.js';
import type { Accepted } from './common.js';

export interface StoreOperationDeps {
  stores: StoreRegistry;
  jobs: Jobs;
  managed: ManagedStores;
  deploymentExists(name: string): boolean;
  /** The deployments an object belongs to (`objectOwner` of s3/layout.ts): backups stay behind the backup checks. */
  ownerOf(bucket: string, key: string): ObjectOwner;
}

export const Bucket = Type.String({ pattern: BUCKET_NAME, description: 'bucket name' });
const StoreName = Type.String({ pattern: STORE_NAME });

/** The body of `POST /object-stores`. */
export const CreateStoreInput = Type.Object({
  name: StoreName,
  endpoint: Type.String({ pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$', maxLength: 300, description: 'http(s) URL of the S3 API' }),
  region: Type.Optional(Type.String({ pattern: '^[a-z0-9-]{1,40}$', default: 'us-east-1' })),
  access_key_id: Type.String({ minLength: 1, maxLength: 256 }),
  secret_access_key: Secret({ minLength: 1, maxLength: 256 }),
  path_style: Type.Optional(Type.Boolean({ default: true, description: 'path-style addressing (most self-hosted servers)' })),
  bucket: Type.Optional(Type.String({ pattern: BUCKET_NAME, description: 'bucket for backups (default agent-backups)' })),
  prefix: Type.Optional(Type.String({ pattern: '^([A-Za-z0-9._-]+/)*$', maxLength: 200, description: "key prefix for backups, ending with '/'" })),
});

/** The body of `POST /object-stores/provision-managed`. */
export const ProvisionInput = Type.Object({
  name: Type.String({ pattern: STORE_NAME, description: 'store name; the deployment is named objstore-<name>' }),
  port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'host port on 127.0.0.1 (0 = any free port)' })),
  bucket: Type.Optional(Type.String({ pattern: BUCKET_NAME, description: 'bucket for backups, created now (default agent-backups)' })),
});

export const AttachOptions = {
  deployment: deploymentName(),
  bucket: Type.Optional(Bucket),
  prefix: Type.Optional(Type.String({ pattern: '^([A-Za-z0-9._-]+/)*$', maxLength: 200 })),
};

export const ReplicateOptions = {
  target: StoreName,
  buckets: Type.Optional(Type.Array(Bucket, { maxItems: 100, description: 'default: every bucket of the source' })),
  prefix: Type.Optional(Type.String({ maxLength: 1024 })),
};

/** Runs `fn` with a client of the store, closing it afterwards. */
async function withClient<T>(record: StoreRecord, fn: (c: ObjectStoreClient) => Promise<T>): Promise<T> {
  const client = new ObjectStoreClient(record);
  try {
    return await fn(client);
  } finally {
    client.destroy();
  }
}

const storeChange = (name: string, actions: ('create' | 'delete' | 'update')[], extra: Record<string, unknown> = {}) => ({
  type: 'object-store',
  id: name,
  actions,
  ...extra,
});

export function storeOperations(deps: StoreOperationDeps) {
  const { stores, managed } = deps;

  const create = defineOperation({
    name: 'object-stores.create',
    input: CreateStoreInput,
    resource: (input) => ({ type: 'object-store', id: input.name }),
    prepare(input) {
      if (stores.find(input.name)) throw errors.conflict(`object store '${input.name}' already exists`, 'OBJECT_STORE_EXISTS');
      const record: StoreRecord = {
        name: input.name,
        endpoint: input.endpoint.replace(/\/+$/, ''),
        region: input.region ?? 'us-east-1',
        access_key_id: input.access_key_id,
        secret_access_key: input.secret_access_key,
        path_style: input.path_style ?? true,
        bucket: input.bucket ?? 'agent-backups',
        prefix: input.prefix ?? '',
        managed: null,
        attachments: [],
        created_at: new Date().toISOString(),
      };
      return {
        value: record,
        preview: { changes: [storeChange(record.name, ['create'], { after: { ...input, secret_access_key: '(secret)' }, sensitive: true })] },
      };
    },
    // A store of that name registered meanwhile makes a plan stale (409 PLAN_STALE) before the checks run again.
    snapshot: (input) => ({ records: { exists: !!stores.find(input.name) } }),
    apply: async (record) => {
      await stores.add(record);
      return storeView(record);
    },
  });

  const provision = defineOperation({
    name: 'object-stores.provisionManaged',
    input: ProvisionInput,
    resource: (input) => ({ type: 'object-store', id: input.name }),
    prepare(input, { principal }) {
      if (!principal.can('deployments:write')) throw errors.forbidden("provisioning a store creates a deployment: 'deployments:write' required");
      // Checked again by the provisioning itself, which takes a while (an image built) before it creates anything.
      if (stores.find(input.name)) throw errors.conflict(`object store '${input.name}' already exists`, 'OBJECT_STORE_EXISTS');
      if (deps.deploymentExists(`objstore-${input.name}`)) throw errors.conflict(`deployment 'objstore-${input.name}' already exists`, 'DEPLOYMENT_EXISTS');
      const value = { name: input.name, port: input.port ?? 0, bucket: input.bucket ?? 'agent-backups' };
      const deployment = { type: 'deployment', id: `objstore-${input.name}`, actions: ['create' as const] };
      return { value, preview: { changes: [storeChange(input.name, ['create'], { after: value }), deployment] } };
    },
    apply: async (value, { principal }) => storeView(await managed.provision(value, principal)),
  });

  const remove = defineOperation({
    name: 'object-stores.delete',
    input: Type.Object({ name: StoreName, remove_deployment: Type.Optional(Type.Boolean()) }),
    resource: (input) => ({ type: 'object-store', id: input.name }),
    prepare({ name, remove_deployment }) {
      const record = stores.get(name);
      const removes = !!record.managed && !!remove_deployment;
      const deployment = removes ? [{ type: 'deployment', id: record.managed!.deployment, actions: ['delete' as const] }] : [];
      return { value: { record, removes }, preview: { changes: [storeChange(name, ['delete'], { before: storeView(record) }), ...deployment] } };
    },
    apply: async ({ record, removes }) => {
      if (removes) await managed.remove(record);
      await stores.remove(record.name);
      return { name: record.name };
    },
  });

  const attach = defineOperation({
    name: 'object-stores.attach',
    input: Type.Object({ store: StoreName, ...AttachOptions }),
    resource: (input) => ({ type: 'deployment', id: input.deployment }),
    prepare(input, { principal }) {
      if (!principal.isGlobal) throw globalScopeRequired("giving a deployment a store's credentials");
      if (!deps.deploymentExists(input.deployment)) throw errors.notFound(`deployment '${input.deployment}' not found`);
      const record = stores.get(input.store);
      const after = { store: record.name, bucket: input.bucket ?? record.bucket, prefix: input.prefix ?? '' };
      return {
        value: { record, deployment: input.deployment, bucket: input.bucket, prefix: input.prefix ?? '' },
        preview: { changes: [{ type: 'deployment', id: input.deployment, actions: ['update'], after }] },
      };
    },
    apply: ({ record, deployment, bucket, prefix }) => managed.attach(record, deployment, bucket, prefix),
  });

  const replicateStore = defineOperation({
    name: 'object-stores.replicate',
    input: Type.Object({ store: StoreName, ...ReplicateOptions }),
    resource: (input) => ({ type: 'object-store', id: input.target }),
    prepare(input) {
      if (input.target === input.store) throw errors.badRequest('body.target: a store cannot be replicated onto itself');
      const source = stores.get(input.store);
      const target = stores.get(input.target);
      const value = { source, target, buckets: input.buckets, prefix: input.prefix };
      return {
        value,
        preview: { changes: [storeChange(target.name, ['update'], { after: { copied_from: source.name, buckets: input.buckets ?? '(every bucket)' } })] },
      };
    },
    apply: ({ source, target, buckets, prefix }, { principal }): Accepted => {
      // Copying a backup is downloading it: objects the caller could not download stay behind (counted `denied`).
      const accept = (bucket: string, key: string) => mayTouch(principal, deps.ownerOf(bucket, key), 'read');
      const job = deps.jobs.submit(
        {
          type: 'replicate',
          deployment: null,
          trigger: 'manual',
          created_by: principal.name,
          run: (jctx) =>
            withClient(source, (a) =>
              withClient(target, async (b) => {
                const report = await replicate(a, b, {
                  buckets,
                  prefix,
                  signal: jctx.signal,
                  accept,
                  onProgress: (r) => jctx.progress({ step: `copied ${r.copied}, skipped ${r.skipped}, failed ${r.failed}`, bytes: r.bytes }),
                });
                if (report.failed > 0 && report.copied === 0 && report.skipped === 0) throw new Error(`every copy failed: ${report.errors[0]}`);
                return { ...report };
              }),
            ),
        },
        'replicate',
      );
      return { job_id: job.id, message: `replication ${source.name} → ${target.name} queued` };
    },
  });

  const createBucket = defineOperation({
    name: 'object-stores.createBucket',
    input: Type.Object({ store: StoreName, bucket: Bucket }),
    resource: (input) => ({ type: 'bucket', id: `${input.store}/${input.bucket}` }),
    prepare: ({ store, bucket }) => ({
      value: { record: stores.get(store), bucket },
      preview: { changes: [{ type: 'bucket', id: `${store}/${bucket}`, actions: ['create'] }] },
    }),
    apply: ({ record, bucket }) => withClient(record, (c) => c.createBucket(bucket).then(() => ({ name: bucket }))),
  });

  const deleteBucket = defineOperation({
    name: 'object-stores.deleteBucket',
    input: Type.Object({ store: StoreName, bucket: Bucket }),
    resource: (input) => ({ type: 'bucket', id: `${input.store}/${input.bucket}` }),
    prepare: ({ store, bucket }) => ({
      value: { record: stores.get(store), bucket },
      preview: { changes: [{ type: 'bucket', id: `${store}/${bucket}`, actions: ['delete'] }] },
    }),
    apply: ({ record, bucket }) => withClient(record, (c) => c.deleteBucket(bucket).then(() => ({ name: bucket }))),
  });

  return { create, provision, remove, attach, replicate: replicateStore, createBucket, deleteBucket };
}
