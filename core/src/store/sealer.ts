/** AES-256-GCM with the agent's data key: `v1.<iv>.<tag>.<ciphertext>` (base64url). */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Sealer } from '@agent/sdk';

/** The SDK's sealer, plus the raw form sealed documents are written in. */
export type DataSealer = Sealer & { sealBuffer(b: Buffer): Buffer; openBuffer(b: Buffer): Buffer };

export function createSealer(key: Buffer): DataSealer {
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
