/**
 * lowdb documents: one JSON file per plugin (and a few for the core), written atomically.
 * Encrypted documents go through an adapter that seals the JSON with the data key.
 */
import { mkdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Low } from 'lowdb';
import { JSONFile } from 'lowdb/node';
import { writeFileAtomic } from './atomic.js';
class SealedJsonFile {
    path;
    sealer;
    constructor(path, sealer) {
        this.path = path;
        this.sealer = sealer;
    }
    async read() {
        let raw;
        try {
            raw = await readFile(this.path);
        }
        catch (err) {
            if (err.code === 'ENOENT')
                return null;
            throw err;
        }
        return JSON.parse(this.sealer.openBuffer(raw).toString('utf8'));
    }
    async write(data) {
        await writeFileAtomic(this.path, this.sealer.sealBuffer(Buffer.from(JSON.stringify(data), 'utf8')));
    }
}
class LowDocument {
    db;
    path;
    queue = Promise.resolve();
    constructor(db, path) {
        this.db = db;
        this.path = path;
    }
    get data() {
        return this.db.data;
    }
    update(fn) {
        const run = this.queue.then(async () => {
            const result = await fn(this.db.data);
            await this.db.write();
            return result;
        });
        this.queue = run.catch(() => undefined);
        return run;
    }
}
export async function openDocument(path, defaults, sealer) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    const adapter = sealer ? new SealedJsonFile(path, sealer) : new JSONFile(path);
    const db = new Low(adapter, structuredClone(defaults));
    await db.read();
    // Keys added to the defaults after a file was first written still get their default.
    for (const [key, value] of Object.entries(defaults)) {
        if (!(key in db.data))
            db.data[key] = structuredClone(value);
    }
    return new LowDocument(db, path);
}
//# sourceMappingURL=documents.js.map