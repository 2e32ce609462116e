import pino from 'pino';
/**
 * JSON lines on stdout, written asynchronously: with pino's default synchronous writes, a reader of stdout that
 * stalls (a full pipe, a gone journal socket) would block the whole agent, shutdown included. Beyond 8 MiB of
 * unwritten lines, new ones are dropped rather than held.
 */
export function createRootLogger(level) {
    const destination = pino.destination({ dest: 1, sync: false, maxLength: 8 * 1024 * 1024 });
    destination.on('error', () => undefined);
    return pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, destination);
}
/** Writes what is buffered, waiting at most `ms` (stdout may never drain). */
export function flushLogs(root, ms = 2000) {
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
export function sdkLogger(root, bindings) {
    const child = root.child(bindings);
    return {
        debug: (msg, fields) => child.debug(fields ?? {}, msg),
        info: (msg, fields) => child.info(fields ?? {}, msg),
        warn: (msg, fields) => child.warn(fields ?? {}, msg),
        error: (msg, fields) => child.error(fields ?? {}, msg),
    };
}
//# sourceMappingURL=log.js.map