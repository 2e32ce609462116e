/**
 * Copies every object of one store to another, bucket by bucket, skipping objects the target already holds
 * identically (same size and ETag, or same size and the source ETag recorded when we copied it before).
 */
import type { ObjectStoreClient } from './client.js';

export interface ReplicateReport {
  buckets: string[];
  copied: number;
  skipped: number;
  failed: number;
  /** Objects the caller may not copy (backups of deployments it cannot download), left out. */
  denied: number;
  bytes: number;
  errors: string[];
}

const SOURCE_ETAG = 'agent-source-etag';

export async function replicate(
  source: ObjectStoreClient,
  target: ObjectStoreClient,
  options: {
    buckets?: string[];
    prefix?: string;
    signal?: AbortSignal;
    accept?(bucket: string, key: string): boolean;
    onProgress?(report: ReplicateReport): void;
  },
): Promise<ReplicateReport> {
  const buckets = options.buckets ?? (await source.listBuckets()).map((b) => b.name);
  const report: ReplicateReport = { buckets, copied: 0, skipped: 0, failed: 0, denied: 0, bytes: 0, errors: [] };
  for (const bucket of buckets) {
    if (!(await target.bucketExists(bucket))) await target.createBucket(bucket);
    // What the target already has, by key (size + etag only: small even for large stores).
    const existing = new Map<string, { size: number; etag: string }>();
    for await (const o of target.allObjects(bucket, options.prefix)) existing.set(o.key, { size: o.size, etag: o.etag });
    for await (const obj of source.allObjects(bucket, options.prefix)) {
      options.signal?.throwIfAborted();
      if (options.accept && !options.accept(bucket, obj.key)) {
        report.denied++;
        continue;
      }
      const there = existing.get(obj.key);
      if (there && there.size === obj.size) {
        let same = there.etag === obj.etag;
        if (!same) same = (await target.head(bucket, obj.key))?.metadata[SOURCE_ETAG] === obj.etag;
        if (same) {
          report.skipped++;
          continue;
        }
      }
      try {
        const got = await source.download(bucket, obj.key, options.signal);
        await target.upload(bucket, obj.key, got.body, {
          length: got.length ?? undefined,
          contentType: got.contentType ?? undefined,
          metadata: { [SOURCE_ETAG]: got.etag },
          signal: options.signal,
        });
        report.copied++;
        report.bytes += obj.size;
      } catch (err) {
        report.failed++;
        if (report.errors.length < 20) report.errors.push(`${bucket}/${obj.key}: ${(err as Error).message}`);
      }
      options.onProgress?.(report);
    }
  }
  return report;
}
