/**
 * lowdb documents: one JSON file per plugin (and a few for the core), written atomically.
 * Encrypted documents go through an adapter that seals the JSON with the data key.
 */
import { mkdirSync } from 'node:fs';
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { dirname } from 'node:path';
import { Low, type Adapter } from 'lowdb';
import { JSONFile } from 'lowdb/node';
import type { Document } from '@agent/sdk';
import type { DataSealer } from './secrets.js';

/** Writes a file atomically (owner-only): temp file in the same folder, fsync, rename over the target. */
async function writeFileAtomic(path: string, data: Buffer): Promise<void> {
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(tmp, 'w', 0o600);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/** The sealed JSON file of an encrypted document. */
function sealedJsonFile<T>(path: string, sealer: DataSealer): Adapter<T> {
  return {
    async read() {
      let raw: Buffer;
      try {
        raw = await readFile(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw err;
      }
      return JSON.parse(sealer.openBuffer(raw).toString('utf8')) as T;
    },
    write: (data) => writeFileAtomic(path, sealer.sealBuffer(Buffer.from(JSON.stringify(data), 'utf8'))),
  };
}

export async function openDocument<T extends object>(path: string, defaults: T, sealer?: DataSealer): Promise<Document<T>> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const db = new Low<T>(sealer ? sealedJsonFile<T>(path, sealer) : new JSONFile<T>(path), structuredClone(defaults));
  await db.read();
  // Keys added to the defaults after a file was first written still get their default.
  for (const [key, value] of Object.entries(defaults)) {
    if (!(key in db.data)) (db.data as Record<string, unknown>)[key] = structuredClone(value);
  }
  // Updates run one after the other, each written before the next starts.
  let queue: Promise<unknown> = Promise.resolve();
  return {
    path,
    get data() {
      return db.data;
    },
    update(fn) {
      const run = queue.then(async () => {
        const result = await fn(db.data);
        await db.write();
        return result;
      });
      queue = run.catch(() => undefined);
      return run;
    },
  };
}
