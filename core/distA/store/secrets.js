/**
 * Secrets generated at first start (never constants): the JWT signing key and the data key that encrypts
 * credentials and plans at rest. Files are created 0600 in a 0700 folder.
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
function readOrCreate(path, bytes) {
    try {
        const value = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
        if (value.length !== bytes)
            throw new Error(`${path} holds ${value.length} bytes, expected ${bytes}`);
        return value;
    }
    catch (err) {
        if (err.code !== 'ENOENT')
            throw err;
    }
    const value = randomBytes(bytes);
    writeFileSync(path, value.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
    return value;
}
export function loadSecrets(dataDir) {
    const dir = join(dataDir, 'secrets');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    return { jwtKey: new Uint8Array(readOrCreate(join(dir, 'jwt.key'), 64)), dataKey: readOrCreate(join(dir, 'data.key'), 32) };
}
//# sourceMappingURL=secrets.js.map