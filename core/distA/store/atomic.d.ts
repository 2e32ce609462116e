/** Writes a file atomically: temp file in the same folder, fsync, rename over the target. */
export declare function writeFileAtomic(path: string, data: string | Buffer, mode?: number): Promise<void>;
//# sourceMappingURL=atomic.d.ts.map