import pino from 'pino';
import { cjsExports, type Logger } from '@agent/sdk';

export type RootLogger = pino.Logger;

export type LogFormat = 'auto' | 'json' | 'pretty';

/** `auto` is pretty on a terminal and JSON lines anywhere else (a pipe, a file, the journal). */
export function resolveLogFormat(format: LogFormat, stdoutIsTty: boolean = process.stdout.isTTY === true): 'json' | 'pretty' {
  return format === 'auto' ? (stdoutIsTty ? 'pretty' : 'json') : format;
}

/**
 * Lines on stdout, written asynchronously: with pino's default synchronous writes, a reader of stdout that
 * stalls (a full pipe, a gone journal socket) would block the whole agent, shutdown included. Beyond 8 MiB of
 * unwritten lines, new ones are dropped rather than held. JSON lines for machines; for a person at a terminal,
 * pino-pretty renders the same records as `12:00:01.234 WARN: docker: message {fields}`, in this process (no
 * transport worker thread) and loaded only in that case.
 */
export async function createRootLogger(level: string, format: LogFormat = 'auto'): Promise<RootLogger> {
  const options: pino.LoggerOptions = { level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime };
  const destination = pino.destination({ dest: 1, sync: false, maxLength: 8 * 1024 * 1024 });
  destination.on('error', () => undefined);
  if (resolveLogFormat(format) === 'pretty') {
    const { prettyFactory } = cjsExports(await import('pino-pretty'));
    const render = prettyFactory({
      colorize: process.stdout.isTTY === true && !process.env.NO_COLOR,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname,plugin,component',
      messageFormat: '{if plugin}{plugin}: {end}{if component}{component}: {end}{msg}',
      singleLine: true,
      // Only real errors on lines of their own; an `error` field (a message) stays on the record's line.
      errorLikeObjectKeys: ['err'],
    });
    // pino writes each record as one JSON line; this renders it and hands it to the same asynchronous stdout.
    const stream: pino.DestinationStream & { flush(cb: (err?: Error) => void): void } = {
      write: (line: string) => void destination.write(render(line)),
      flush: (cb) => destination.flush(cb),
    };
    return pino(options, stream);
  }
  return pino(options, destination);
}

/** Writes what is buffered, waiting at most `ms` (stdout may never drain). */
export function flushLogs(root: RootLogger, ms = 2000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    root.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });
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
