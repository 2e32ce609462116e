import pino from 'pino';
import type { Logger } from '@agent/sdk';
export type RootLogger = pino.Logger;
/**
 * JSON lines on stdout, written asynchronously: with pino's default synchronous writes, a reader of stdout that
 * stalls (a full pipe, a gone journal socket) would block the whole agent, shutdown included. Beyond 8 MiB of
 * unwritten lines, new ones are dropped rather than held.
 */
export declare function createRootLogger(level: string): RootLogger;
/** Writes what is buffered, waiting at most `ms` (stdout may never drain). */
export declare function flushLogs(root: RootLogger, ms?: number): Promise<void>;
/** The SDK's logger shape (message first) over a pino child. */
export declare function sdkLogger(root: RootLogger, bindings: Record<string, unknown>): Logger;
//# sourceMappingURL=log.d.ts.map