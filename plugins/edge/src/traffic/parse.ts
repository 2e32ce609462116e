/**
 * Access-log lines → traffic records. The agent writes nginx's log_format itself (render.ts: fixed keys in a
 * fixed order, every value a string, `escape=json`), so a line in that exact shape is matched by one compiled
 * regular expression whose groups are the values: no object with internalised keys, ≈1.2 µs per line against
 * ≈4–6 µs for JSON.parse. The groups admit no backslash and no control character, so a value read this way is
 * exactly what JSON.parse would give; anything else (an escape, another key order from an older or hand-edited
 * log_format, a non-string value) goes through JSON.parse.
 */
import type { TrafficRecord } from './journal.js';

/** The agent's log_format (render.ts writes it from this list): JSON keys in order, each with its nginx variable. */
export const LOG_FIELDS = [
  ['time', '$msec'],
  ['deployment', '$agent_deployment'],
  ['host', '$host'],
  ['method', '$request_method'],
  ['path', '$request_uri'],
  ['status', '$status'],
  ['bytes', '$body_bytes_sent'],
  ['duration', '$request_time'],
  ['ip', '$remote_addr'],
  ['ua', '$http_user_agent'],
  ['blocked', '$agent_block_hit'],
  ['protected', '$agent_protected'],
  ['user', '$remote_user'],
] as const;
const KEYS = LOG_FIELDS.map(([key]) => key);
type Fields = Partial<Record<(typeof KEYS)[number], unknown>>;
const VALUE = '([^"\\\\\\x00-\\x1f]*)';
/** Sticky: matches at `lastIndex` only, up to the end of that line. */
const LINE = new RegExp(`\\{${KEYS.map((k) => `"${k}":"${VALUE}"`).join(',')}\\}(?=\\n|$)`, 'y');

/** The record of a line's fields, or null when time/status are not numbers. */
function toRecord(o: Fields): TrafficRecord | null {
  const time = Number(o.time);
  const status = Number(o.status);
  if (!Number.isFinite(time) || !Number.isFinite(status)) return null;
  return {
    time_ms: Math.round(time * 1000),
    deployment: (o.deployment ?? '') as string,
    host: (o.host ?? '') as string,
    method: (o.method ?? '') as string,
    path: (o.path ?? '') as string,
    status,
    bytes: Number(o.bytes) || 0,
    duration_ms: Math.round((Number(o.duration) || 0) * 1000 * 1000) / 1000,
    source_ip: (o.ip ?? '') as string,
    user_agent: (o.ua ?? '') as string,
    blocked: o.blocked === '1',
    protected: o.protected === '1',
    user: (o.user ?? '') as string,
  };
}

/** The same from the regular expression's groups (in KEYS order). */
function fromMatch(m: RegExpExecArray): TrafficRecord | null {
  return toRecord({
    time: m[1],
    deployment: m[2],
    host: m[3],
    method: m[4],
    path: m[5],
    status: m[6],
    bytes: m[7],
    duration: m[8],
    ip: m[9],
    ua: m[10],
    blocked: m[11],
    protected: m[12],
    user: m[13],
  });
}

/** The general path: any JSON object line. */
function parseJson(line: string): TrafficRecord | null {
  if (line.length < 10 || line.charCodeAt(0) !== 123) return null;
  let o: unknown;
  try {
    o = JSON.parse(line);
  } catch {
    return null;
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return null;
  return toRecord(o as Fields);
}

/** One access-log line → record; null for anything that is not a JSON object with a numeric time and status. */
export function parseLine(line: string): TrafficRecord | null {
  LINE.lastIndex = 0;
  const m = line.indexOf('\n') === -1 ? LINE.exec(line) : null;
  return m ? fromMatch(m) : parseJson(line);
}

/**
 * Every line of `text` (lines separated by `\n`; the caller passes complete lines only) → records, in order,
 * handed to `emit` in groups of up to `group` (a new array each time). Matches in place: no array of lines.
 */
export function parseLines(text: string, emit: (records: TrafficRecord[]) => void, group = 256): void {
  let out: TrafficRecord[] = [];
  let start = 0;
  while (start < text.length) {
    LINE.lastIndex = start;
    const m = LINE.exec(text);
    let end: number;
    let r: TrafficRecord | null;
    if (m) {
      end = start + m[0].length;
      r = fromMatch(m);
    } else {
      end = text.indexOf('\n', start);
      if (end === -1) end = text.length;
      r = parseJson(text.slice(start, end));
    }
    if (r) out.push(r);
    if (out.length >= group) {
      emit(out);
      out = [];
    }
    start = end + 1;
  }
  if (out.length) emit(out);
}
