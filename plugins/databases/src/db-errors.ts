/**
 * Driver errors → `{error, code}` answers. Each failure a caller can fix gets its own code and a 4xx status:
 * the server is not reachable (424), the login is refused (422), the SQL is wrong (400), a name is taken (409).
 */
import { HttpError, isHttpError, mergeErrors, type ErrorCodes } from '@agent/sdk';

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET', 'EAI_AGAIN', 'EPIPE']);

/** SQLSTATE (PostgreSQL) or errno (MySQL/MariaDB) → [status, code]. */
const PG: Record<string, [number, string]> = {
  '28P01': [422, 'DB_AUTH_FAILED'],
  '28000': [422, 'DB_AUTH_FAILED'],
  '3D000': [404, 'DB_NOT_FOUND'],
  '42601': [400, 'DB_SYNTAX_ERROR'],
  '25006': [400, 'DB_READ_ONLY'],
  '57014': [400, 'DB_QUERY_TIMEOUT'],
  '42501': [403, 'DB_PERMISSION_DENIED'],
  '42P04': [409, 'DB_EXISTS'],
  '42710': [409, 'DB_USER_EXISTS'],
  '42704': [404, 'DB_OBJECT_NOT_FOUND'],
  '42P01': [400, 'DB_QUERY_FAILED'],
  '54000': [400, 'DB_QUERY_TOO_COMPLEX'],
  // Starting up, shutting down, too many connections: the server is there but cannot take this session now.
  '57P01': [424, 'DB_UNREACHABLE'],
  '57P02': [424, 'DB_UNREACHABLE'],
  '57P03': [424, 'DB_UNREACHABLE'],
  '53300': [424, 'DB_UNREACHABLE'],
};

const MYSQL: Record<number, [number, string]> = {
  1045: [422, 'DB_AUTH_FAILED'],
  1698: [422, 'DB_AUTH_FAILED'],
  1049: [404, 'DB_NOT_FOUND'],
  1064: [400, 'DB_SYNTAX_ERROR'],
  1149: [400, 'DB_SYNTAX_ERROR'],
  1792: [400, 'DB_READ_ONLY'],
  1969: [400, 'DB_QUERY_TIMEOUT'], // MariaDB max_statement_time
  3024: [400, 'DB_QUERY_TIMEOUT'], // MySQL max_execution_time
  1044: [403, 'DB_PERMISSION_DENIED'],
  1142: [403, 'DB_PERMISSION_DENIED'],
  1227: [403, 'DB_PERMISSION_DENIED'],
  1410: [403, 'DB_PERMISSION_DENIED'],
  1040: [424, 'DB_UNREACHABLE'], // too many connections
  1129: [424, 'DB_UNREACHABLE'], // host blocked
  1007: [409, 'DB_EXISTS'],
  1396: [409, 'DB_USER_EXISTS'],
  1133: [404, 'DB_OBJECT_NOT_FOUND'],
  1146: [400, 'DB_QUERY_FAILED'],
};

/** Every answer `toHttpError` can give (the tables above and its fallbacks): any statement may meet any of them. */
export const DRIVER_ERRORS: ErrorCodes = mergeErrors(
  ...[...Object.values(PG), ...Object.values(MYSQL)].map(([status, code]) => ({ [status]: [code] }) as ErrorCodes),
  { 400: ['DB_QUERY_FAILED'], 422: ['DB_AUTH_FAILED'], 424: ['DB_UNREACHABLE'], 502: ['DB_ERROR'] },
);

const HINTS: Record<string, string> = {
  DB_READ_ONLY: 'the statement writes; queries run read-only unless allow_write is true (which needs databases:write)',
  DB_QUERY_TIMEOUT: 'the statement ran longer than its timeout and was cancelled',
};

interface DriverError {
  code?: unknown;
  errno?: unknown;
  message?: unknown;
  sqlMessage?: unknown;
  fatal?: unknown;
}

/** Strips what a server message may echo that the caller did not send (nothing secret is in these). */
const clean = (msg: string) => msg.replace(/\s+/g, ' ').trim().slice(0, 500);

export function toHttpError(err: unknown, where: { host: string; port: number }): HttpError {
  if (isHttpError(err)) return err;
  const e = (err ?? {}) as DriverError;
  const message = typeof e.sqlMessage === 'string' ? e.sqlMessage : typeof e.message === 'string' ? e.message : String(err);
  const code = typeof e.code === 'string' ? e.code : '';
  if (NETWORK_CODES.has(code) || /connect(ion)? timeout|timeout expired|Connection terminated|connection timeout/i.test(message)) {
    return new HttpError(424, 'DB_UNREACHABLE', `database server ${where.host}:${where.port} is not reachable (${code || clean(message)})`);
  }
  if (code === 'DB_ROW_BUDGET') return new HttpError(400, 'DB_QUERY_FAILED', clean(message));
  // PostgreSQL: a five-character SQLSTATE in `code`.
  if (/^[0-9A-Z]{5}$/.test(code)) {
    const mapped =
      PG[code] ??
      (code.startsWith('08')
        ? ([424, 'DB_UNREACHABLE'] as [number, string])
        : code.startsWith('22') || code.startsWith('23') || code.startsWith('42')
          ? ([400, 'DB_QUERY_FAILED'] as [number, string])
          : undefined);
    if (mapped) return new HttpError(mapped[0], mapped[1], withHint(mapped[1], clean(message)));
  }
  // MySQL/MariaDB: a numeric errno.
  if (typeof e.errno === 'number' && e.errno >= 1000) {
    const mapped = MYSQL[e.errno] ?? [400, 'DB_QUERY_FAILED'];
    return new HttpError(mapped[0], mapped[1], withHint(mapped[1], clean(message)));
  }
  if (code === 'PROTOCOL_SEQUENCE_TIMEOUT' || code === 'PROTOCOL_CONNECTION_LOST') {
    return new HttpError(424, 'DB_UNREACHABLE', `database server ${where.host}:${where.port} stopped answering (${code})`);
  }
  if (/does not support SSL|SSL/i.test(message)) return new HttpError(424, 'DB_UNREACHABLE', clean(message));
  if (/SASL|SCRAM|password authentication/i.test(message)) return new HttpError(422, 'DB_AUTH_FAILED', clean(message));
  return new HttpError(502, 'DB_ERROR', `database error: ${clean(message)}`);
}

const withHint = (code: string, message: string) => (HINTS[code] ? `${message} (${HINTS[code]})` : message);
