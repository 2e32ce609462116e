/** What an app writes on stdout and stderr, passed on to the agent's log line by line. */
import type { Logger } from '@agent/sdk';

/**
 * One line an app wrote. Apps log JSON objects `{level, msg, ...fields}` (see the observability app): those are
 * logged at their own level with their message and fields, so they read like the agent's own lines; anything
 * else (a crash trace, a Node warning) is logged as `app output` at the level of the stream it came on.
 */
export function forwardLine(log: Logger, app: string, line: string, streamLevel: 'info' | 'warn'): void {
  if (line.startsWith('{')) {
    try {
      const { level, msg, ...fields } = JSON.parse(line) as { level?: unknown; msg?: unknown };
      if (typeof msg === 'string' && (level === 'debug' || level === 'info' || level === 'warn' || level === 'error')) {
        log[level](msg.slice(0, 2000), { app, ...fields });
        return;
      }
    } catch {
      // not one of the app's own records
    }
  }
  log[streamLevel]('app output', { app, line: line.slice(0, 2000) });
}

/** Logs every complete line of a stream of the app's. */
export function forwardStream(log: Logger, app: string, stream: NodeJS.ReadableStream | null, level: 'info' | 'warn'): void {
  let buffer = '';
  stream?.setEncoding('utf8');
  stream?.on('data', (chunk: string) => {
    buffer += chunk;
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (line.trim()) forwardLine(log, app, line, level);
    }
  });
}
