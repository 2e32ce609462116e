import type { Document } from '@agent/sdk';
export declare function openDocument<T extends object>(path: string, defaults: T, sealer?: {
    sealBuffer(b: Buffer): Buffer;
    openBuffer(b: Buffer): Buffer;
}): Promise<Document<T>>;
//# sourceMappingURL=documents.d.ts.map