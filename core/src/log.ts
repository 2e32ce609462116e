import pino from 'pino';
import type { Logger } from '@agent/sdk';

export type RootLogger = pino.Logger;

export function createRootLogger(level: string): RootLogger {
  return pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}

/** The SDK's logger shape (message first) over a pino child. */
export function sdkLogger(root: RootLogger, bindings: Record<string, unknown>): Logger {
  const child = root.child(bindings);
  return {
    debug: (msg, fields) => child.debug(fields ?? {}, msg),
    info: (msg, fields) => child.info(fields ?? {}, msg),
    warn: (msg, fields) => child.warn(fields ?? {}, msg),
    error: (msg, fields) => child.error(fields ?? {}, msg),
  };
}
