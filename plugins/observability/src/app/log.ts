/** The app logs one JSON object per line on stdout/stderr; the core forwards each line to its own log. */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

const line = (level: string, msg: string, fields?: Record<string, unknown>) => JSON.stringify({ level, msg, ...fields });

export const log: Logger = {
  info: (msg, fields) => process.stdout.write(`${line('info', msg, fields)}\n`),
  warn: (msg, fields) => process.stderr.write(`${line('warn', msg, fields)}\n`),
  error: (msg, fields) => process.stderr.write(`${line('error', msg, fields)}\n`),
};
