import { open, rename, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
/** Writes a file atomically: temp file in the same folder, fsync, rename over the target. */
export async function writeFileAtomic(path, data, mode = 0o600) {
    const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
    const handle = await open(tmp, 'w', mode);
    try {
        await handle.writeFile(data);
        await handle.sync();
    }
    finally {
        await handle.close();
    }
    try {
        await rename(tmp, path);
    }
    catch (err) {
        await unlink(tmp).catch(() => undefined);
        throw err;
    }
}
//# sourceMappingURL=atomic.js.map