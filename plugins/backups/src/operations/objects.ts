/**
 * Changing objects of a store: upload (the request body streamed to the store as is) and delete. An object of a
 * deployment's backup layout stays behind the backup checks (`assertMayTouch`): changing it is changing its backups.
 */
import { Transform, type Readable } from 'node:stream';
import { defineOperation, errors, Type } from '@agent/sdk';
import { invalidObjectKey, ObjectStoreClient } from '../s3/client.js';
import { assertMayTouch, type ObjectOwner } from '../s3/layout.js';
import { STORE_NAME, type StoreRegistry } from '../s3/stores.js';
import { Bucket } from './object-stores.js';

export const ObjectKey = Type.String({ minLength: 1, maxLength: 1024, description: 'object key' });

const ObjectRef = { store: Type.String({ pattern: STORE_NAME }), bucket: Bucket, key: ObjectKey };

export const checkKey = (key: string, field = 'query.key'): void => {
  const problem = invalidObjectKey(key);
  if (problem) throw errors.badRequest(`${field}: ${problem}`, 'INVALID_KEY');
};

export function objectOperations(deps: { stores: StoreRegistry; ownerOf(bucket: string, key: string): ObjectOwner }) {
  const { stores } = deps;

  const upload = defineOperation({
    name: 'object-stores.uploadObject',
    input: Type.Object({
      ...ObjectRef,
      content: Type.Unsafe<Readable>({ description: 'the content, streamed' }),
      length: Type.Optional(Type.Integer({ minimum: 0 })),
      content_type: Type.Optional(Type.String()),
    }),
    resource: (input) => ({ type: 'object', id: `${input.store}/${input.bucket}/${input.key}` }),
    prepare(input, { principal }) {
      checkKey(input.key);
      // Writing into a deployment's backup layout is changing its backups.
      assertMayTouch(principal, deps.ownerOf(input.bucket, input.key), 'write', input.key);
      const record = stores.get(input.store);
      const id = `${input.store}/${input.bucket}/${input.key}`;
      return {
        value: { ...input, record },
        preview: { changes: [{ type: 'object', id, actions: ['create', 'update'], after: { length: input.length ?? null } }] },
      };
    },
    async apply({ record, bucket, key, content, length, content_type }, { signal }) {
      const client = new ObjectStoreClient(record);
      try {
        let size = 0;
        const counted = new Transform({
          transform(chunk: Buffer, _enc, done) {
            size += chunk.length;
            done(null, chunk);
          },
        });
        content.pipe(counted);
        content.once('error', (err) => counted.destroy(err));
        const out = await client.upload(bucket, key, counted, { length, contentType: content_type, signal });
        return { bucket, key, size, etag: out.etag };
      } finally {
        client.destroy();
      }
    },
  });

  const remove = defineOperation({
    name: 'object-stores.deleteObject',
    input: Type.Object(ObjectRef),
    resource: (input) => ({ type: 'object', id: `${input.store}/${input.bucket}/${input.key}` }),
    async prepare({ store, bucket, key }, { principal }) {
      checkKey(key);
      assertMayTouch(principal, deps.ownerOf(bucket, key), 'write', key);
      const record = stores.get(store);
      const client = new ObjectStoreClient(record);
      try {
        if (!(await client.head(bucket, key))) throw errors.notFound(`object '${key}' not found`, 'OBJECT_NOT_FOUND');
      } finally {
        client.destroy();
      }
      return { value: { record, bucket, key }, preview: { changes: [{ type: 'object', id: `${store}/${bucket}/${key}`, actions: ['delete'] }] } };
    },
    async apply({ record, bucket, key }) {
      const client = new ObjectStoreClient(record);
      try {
        await client.deleteObject(bucket, key);
        return { key };
      } finally {
        client.destroy();
      }
    },
  });

  return { upload, remove };
}
