/**
 * lowdb documents: one JSON file per plugin (and a few for the core), written atomically.
 * Encrypted documents go through an adapter that seals the JSON with the data key.
 */
import { mkdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Low, type Adapter } from 'lowdb';
import { JSONFile } from 'lowdb/node';
import type { Document } from '@agent/sdk';
import { writeFileAtomic } from './atomic.js';

class SealedJsonFile<T> implements Adapter<T> {
  constructor(
    private readonly path: string,
    private readonly sealer: { sealBuffer(b: Buffer): Buffer; openBuffer(b: Buffer): Buffer },
  ) {}

  async read(): Promise<T | null> {
    let raw: Buffer;
    try {
      raw = await readFile(this.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    return JSON.parse(this.sealer.openBuffer(raw).toString('utf8')) as T;
  }

  async write(data: T): Promise<void> {
    await writeFileAtomic(this.path, this.sealer.sealBuffer(Buffer.from(JSON.stringify(data), 'utf8')));
  }
}

class LowDocument<T extends object> implements Document<T> {
  private queue: Promise<unknown> = Promise.resolve();
  constructor(
    private readonly db: Low<T>,
    readonly path: string,
  ) {}

  get data(): T {
    return this.db.data;
  }

  update<R>(fn: (data: T) => R | Promise<R>): Promise<R> {
    const run = this.queue.then(async () => {
      const result = await fn(this.db.data);
      await this.db.write();
      return result;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }
}

export async function openDocument<T extends object>(
  path: string,
  defaults: T,
  sealer?: { sealBuffer(b: Buffer): Buffer; openBuffer(b: Buffer): Buffer },
): Promise<Document<T>> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const adapter: Adapter<T> = sealer ? new SealedJsonFile<T>(path, sealer) : new JSONFile<T>(path);
  const db = new Low<T>(adapter, structuredClone(defaults));
  await db.read();
  // Keys added to the defaults after a file was first written still get their default.
  for (const [key, value] of Object.entries(defaults)) {
    if (!(key in db.data)) (db.data as Record<string, unknown>)[key] = structuredClone(value);
  }
  return new LowDocument(db, path);
}
