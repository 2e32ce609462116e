import type { Sealer } from '@agent/sdk';
export declare function createSealer(key: Buffer): Sealer & {
    sealBuffer(b: Buffer): Buffer;
    openBuffer(b: Buffer): Buffer;
};
//# sourceMappingURL=sealer.d.ts.map