/**
 * Secrets generated at first start (never constants): the JWT signing key and the data key that encrypts
 * credentials and plans at rest (AES-256-GCM). Files are created 0600 in a 0700 folder.
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Sealer } from '@agent/sdk';

/** The SDK's sealer (`v1.<iv><tag><ciphertext>` in base64url), plus the raw form sealed documents are written in. */
export type DataSealer = Sealer & { sealBuffer(b: Buffer): Buffer; openBuffer(b: Buffer): Buffer };

function readOrCreate(path: string, bytes: number): Buffer {
  try {
    const value = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
    if (value.length !== bytes) throw new Error(`${path} holds ${value.length} bytes, expected ${bytes}`);
    return value;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const value = randomBytes(bytes);
  writeFileSync(path, value.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  return value;
}

function createSealer(key: Buffer): DataSealer {
  const sealBuffer = (plain: Buffer): Buffer => {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]);
  };
  const openBuffer = (sealed: Buffer): Buffer => {
    if (sealed.length < 28) throw new Error('sealed value too short');
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12));
    decipher.setAuthTag(sealed.subarray(12, 28));
    return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]);
  };
  return {
    sealBuffer,
    openBuffer,
    seal: (plain) => 'v1.' + sealBuffer(Buffer.from(plain, 'utf8')).toString('base64url'),
    open: (sealed) => {
      if (!sealed.startsWith('v1.')) throw new Error('not a sealed value');
      return openBuffer(Buffer.from(sealed.slice(3), 'base64url')).toString('utf8');
    },
  };
}

/** The JWT signing key and the sealer of the data key. */
export function loadSecrets(dataDir: string): { jwtKey: Uint8Array; sealer: DataSealer } {
  const dir = join(dataDir, 'secrets');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  return { jwtKey: new Uint8Array(readOrCreate(join(dir, 'jwt.key'), 64)), sealer: createSealer(readOrCreate(join(dir, 'data.key'), 32)) };
}
