/**
 * One S3 API endpoint, as the plugin uses it: buckets, objects (streamed both ways), with S3 errors turned into
 * the agent's HTTP errors. Works against any S3-compatible server (path-style addressing optional).
 */
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';

type S3Sdk = typeof import('@aws-sdk/client-s3');
type S3Storage = typeof import('@aws-sdk/lib-storage');

// The AWS SDK is a large module graph (~20 MB): it is loaded with the first object-store call, not at agent start.
let sdk: Promise<[S3Sdk, S3Storage]> | null = null;
const loadSdk = () => (sdk ??= Promise.all([import('@aws-sdk/client-s3').then(cjsExports), import('@aws-sdk/lib-storage').then(cjsExports)]));
import { HttpError, cjsExports, errors } from '@agent/sdk';

export interface S3Endpoint {
  endpoint: string;
  region: string;
  access_key_id: string;
  secret_access_key: string;
  path_style: boolean;
}

export interface ObjectInfo {
  key: string;
  size: number;
  etag: string;
  last_modified: string | null;
}

/** Bucket names as S3 accepts them (DNS-compatible). */
export const BUCKET_NAME = '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$';

/** Why an object key is refused, or null: keys become paths on some servers, so no traversal or control bytes. */
export function invalidObjectKey(key: string): string | null {
  if (key === '') return 'is empty';
  if (Buffer.byteLength(key) > 1024) return 'is longer than 1024 bytes';
  // eslint-disable-next-line no-control-regex -- control characters are what it refuses
  if (/[\x00-\x1f\x7f]/.test(key)) return 'contains control characters';
  if (key.startsWith('/')) return "must not start with '/'";
  if (key.split('/').some((s) => s === '..' || s === '.')) return "must not contain '.' or '..' segments";
  if (key.includes('\\')) return "must not contain '\\'";
  return null;
}

const statusOf = (err: unknown): number | undefined => (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;

/** Maps S3 and network failures to HttpErrors with stable codes. */
export function s3Error(err: unknown, what: string): HttpError {
  if (err instanceof HttpError) return err;
  const name = (err as { name?: string })?.name ?? '';
  const code = (err as { Code?: string })?.Code ?? name;
  const message = (err as Error)?.message ?? String(err);
  switch (code) {
    case 'NoSuchBucket':
      return errors.notFound(`${what}: bucket not found`, 'BUCKET_NOT_FOUND');
    case 'NoSuchKey':
    case 'NotFound':
      return errors.notFound(`${what}: object not found`, 'OBJECT_NOT_FOUND');
    case 'BucketAlreadyExists':
    case 'BucketAlreadyOwnedByYou':
      return errors.conflict(`${what}: the bucket already exists`, 'BUCKET_EXISTS');
    case 'BucketNotEmpty':
      return errors.conflict(`${what}: the bucket is not empty`, 'BUCKET_NOT_EMPTY');
    case 'InvalidBucketName':
      return errors.badRequest(`${what}: invalid bucket name`, 'VALIDATION_FAILED');
    case 'InvalidAccessKeyId':
    case 'SignatureDoesNotMatch':
    case 'AccessDenied':
      return errors.badGateway(`${what}: the object store refused the credentials (${code})`, 'OBJECT_STORE_AUTH_FAILED');
  }
  // S3ServiceException carries `$fault`; checked by shape so the SDK need not be loaded here.
  if (typeof (err as { $fault?: unknown } | null)?.$fault === 'string' || statusOf(err)) {
    const status = statusOf(err);
    if (status === 404) return errors.notFound(`${what}: not found`, 'OBJECT_NOT_FOUND');
    return errors.badGateway(`${what}: the object store answered ${status ?? ''} ${code}`.trim(), 'OBJECT_STORE_ERROR');
  }
  if (/ECONNREFUSED|ENOTFOUND|ETIMEDOUT|EHOSTUNREACH|ECONNRESET|socket hang up/i.test(`${code} ${message}`)) {
    return errors.badGateway(`${what}: the object store is unreachable`, 'OBJECT_STORE_UNREACHABLE');
  }
  return errors.badGateway(`${what}: ${message}`, 'OBJECT_STORE_ERROR');
}

export class ObjectStoreClient {
  private client: S3Client | null = null;

  constructor(private readonly endpoint: S3Endpoint) {}

  /** The SDK and a client for this endpoint, created on first use. */
  private async s3(): Promise<{ s3: S3Client; sdk: S3Sdk; storage: S3Storage }> {
    const [s3sdk, storage] = await loadSdk();
    this.client ??= new s3sdk.S3Client({
      endpoint: this.endpoint.endpoint,
      region: this.endpoint.region,
      forcePathStyle: this.endpoint.path_style,
      credentials: { accessKeyId: this.endpoint.access_key_id, secretAccessKey: this.endpoint.secret_access_key },
      // Only checksums the API requires: many S3-compatible servers do not know the newer CRC headers.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 2,
    });
    return { s3: this.client, sdk: s3sdk, storage };
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw s3Error(err, what);
    }
  }

  async listBuckets(): Promise<{ name: string; created_at: string | null }[]> {
    const { s3, sdk: c } = await this.s3();
    const out = await this.call('list buckets', () => s3.send(new c.ListBucketsCommand({})));
    return (out.Buckets ?? []).map((b) => ({ name: b.Name ?? '', created_at: b.CreationDate?.toISOString() ?? null }));
  }

  async bucketExists(bucket: string): Promise<boolean> {
    const { s3, sdk: c } = await this.s3();
    try {
      await s3.send(new c.HeadBucketCommand({ Bucket: bucket }));
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw s3Error(err, `bucket ${bucket}`);
    }
  }

  async createBucket(bucket: string): Promise<void> {
    const { s3, sdk: c } = await this.s3();
    await this.call(`create bucket ${bucket}`, () => s3.send(new c.CreateBucketCommand({ Bucket: bucket })));
  }

  async deleteBucket(bucket: string): Promise<void> {
    const { s3, sdk: c } = await this.s3();
    await this.call(`delete bucket ${bucket}`, () => s3.send(new c.DeleteBucketCommand({ Bucket: bucket })));
  }

  async listObjects(
    bucket: string,
    options: { prefix?: string; limit?: number; token?: string } = {},
  ): Promise<{ items: ObjectInfo[]; next_token: string | null }> {
    const { s3, sdk: c } = await this.s3();
    const out = await this.call(`list objects of ${bucket}`, () =>
      s3.send(
        new c.ListObjectsV2Command({
          Bucket: bucket,
          Prefix: options.prefix || undefined,
          MaxKeys: options.limit ?? 1000,
          ContinuationToken: options.token || undefined,
        }),
      ),
    );
    return {
      items: (out.Contents ?? []).map((o) => ({
        key: o.Key ?? '',
        size: o.Size ?? 0,
        etag: (o.ETag ?? '').replace(/"/g, ''),
        last_modified: o.LastModified?.toISOString() ?? null,
      })),
      next_token: out.IsTruncated ? (out.NextContinuationToken ?? null) : null,
    };
  }

  /** Every object below a prefix, page by page. */
  async *allObjects(bucket: string, prefix?: string): AsyncGenerator<ObjectInfo> {
    let token: string | undefined;
    do {
      const page = await this.listObjects(bucket, { prefix, token });
      yield* page.items;
      token = page.next_token ?? undefined;
    } while (token);
  }

  async head(bucket: string, key: string): Promise<{ size: number; etag: string; metadata: Record<string, string> } | null> {
    const { s3, sdk: c } = await this.s3();
    try {
      const out = await s3.send(new c.HeadObjectCommand({ Bucket: bucket, Key: key }));
      return { size: out.ContentLength ?? 0, etag: (out.ETag ?? '').replace(/"/g, ''), metadata: out.Metadata ?? {} };
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw s3Error(err, `object ${key}`);
    }
  }

  /**
   * Streams a body into an object. With a known length up to 64 MiB it is one PUT; otherwise a multipart upload
   * whose parts (8 MiB) are the only thing held in memory.
   */
  async upload(
    bucket: string,
    key: string,
    body: Readable,
    options: { length?: number; contentType?: string; metadata?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<{ etag: string }> {
    const { s3, storage } = await this.s3();
    return this.call(`upload ${key}`, async () => {
      const upload = new storage.Upload({
        client: s3,
        params: {
          Bucket: bucket,
          Key: key,
          Body: body,
          ContentType: options.contentType ?? 'application/octet-stream',
          ContentLength: options.length,
          Metadata: options.metadata,
        },
        partSize: 8 * 1024 * 1024,
        queueSize: 2,
        leavePartsOnError: false,
      });
      const onAbort = () => void upload.abort();
      options.signal?.addEventListener('abort', onAbort, { once: true });
      try {
        const out = await upload.done();
        return { etag: ((out as { ETag?: string }).ETag ?? '').replace(/"/g, '') };
      } finally {
        options.signal?.removeEventListener('abort', onAbort);
      }
    });
  }

  async download(
    bucket: string,
    key: string,
    signal?: AbortSignal,
  ): Promise<{ body: Readable; length: number | null; contentType: string | null; etag: string }> {
    const { s3, sdk: c } = await this.s3();
    const out = await this.call(`download ${key}`, () => s3.send(new c.GetObjectCommand({ Bucket: bucket, Key: key }), { abortSignal: signal }));
    return { body: out.Body as Readable, length: out.ContentLength ?? null, contentType: out.ContentType ?? null, etag: (out.ETag ?? '').replace(/"/g, '') };
  }

  async deleteObject(bucket: string, key: string): Promise<void> {
    const { s3, sdk: c } = await this.s3();
    await this.call(`delete ${key}`, () => s3.send(new c.DeleteObjectCommand({ Bucket: bucket, Key: key })));
  }

  destroy(): void {
    this.client?.destroy();
  }
}
