/**
 * A first look at a statement before it reaches the server. The read-only transaction is what really keeps a
 * query from writing; this check adds a clear early refusal for statements a read-only transaction does not stop
 * (CALL, SET, KILL, SELECT … INTO OUTFILE) and keeps the answer the same on every engine.
 */
import { HttpError } from '@agent/sdk';

const READ_KEYWORDS = new Set(['SELECT', 'WITH', 'SHOW', 'EXPLAIN', 'DESCRIBE', 'DESC', 'VALUES', 'TABLE']);

/** The statement without its leading comments, whitespace and opening parentheses. */
function stripLeading(sql: string): string {
  let s = sql;
  for (;;) {
    const before = s;
    s = s.replace(/^[\s(]+/, '');
    if (s.startsWith('--') || s.startsWith('#')) s = s.replace(/^[^\n]*(\n|$)/, '');
    // MySQL runs the text of `/*! … */` comments: those are not comments, so they are not skipped.
    else if (s.startsWith('/*') && !/^\/\*M?!/.test(s)) {
      const end = s.indexOf('*/');
      s = end < 0 ? '' : s.slice(end + 2);
    }
    if (s === before) return s;
  }
}

export function firstKeyword(sql: string): string {
  const m = /^[A-Za-z]+/.exec(stripLeading(sql));
  return m ? m[0].toUpperCase() : '';
}

/** Throws 400 DB_READ_ONLY when a statement cannot be a read. */
export function assertReadStatement(sql: string): void {
  const keyword = firstKeyword(sql);
  if (!READ_KEYWORDS.has(keyword)) {
    throw new HttpError(
      400,
      'DB_READ_ONLY',
      `${keyword ? `'${keyword}' statements` : 'this statement'} may write; queries run read-only unless allow_write is true (which needs databases:write)`,
    );
  }
  if (/\bINTO\s+(OUTFILE|DUMPFILE)\b/i.test(sql)) {
    throw new HttpError(400, 'DB_READ_ONLY', 'SELECT … INTO OUTFILE/DUMPFILE writes files on the server; it needs allow_write');
  }
}

/** JSON-safe cell values: binary as `\x<hex>` (PostgreSQL's bytea text form), big integers as strings. */
export function jsonValue(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (Buffer.isBuffer(value)) return `\\x${value.toString('hex')}`;
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  if (Array.isArray(value)) return value.map(jsonValue);
  return value;
}

/** Converts rows until the byte budget is spent; returns how many fit. */
export function takeWithinBudget(rows: unknown[][], maxBytes: number, used: { bytes: number }): unknown[][] {
  const out: unknown[][] = [];
  for (const row of rows) {
    const converted = row.map(jsonValue);
    const size = JSON.stringify(converted).length + 1;
    if (used.bytes + size > maxBytes) break;
    used.bytes += size;
    out.push(converted);
  }
  return out;
}
