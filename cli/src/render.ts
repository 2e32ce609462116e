/**
 * Human output of answers: lists as tables, objects as aligned key/value blocks (nested ones indented), plain
 * values as is. `--json` bypasses all of this and prints the raw answer.
 */
import type { Style } from './style.js';
import { visibleLength } from './style.js';

const MAX_CELL = 48;

const isScalar = (v: unknown) => v === null || ['string', 'number', 'boolean', 'undefined'].includes(typeof v);

const oneLine = (s: string) => s.replace(/\s*\n\s*/g, ' ⏎ ');

/** A value in one cell: scalars as text, short scalar lists joined, anything else summarised. */
function cell(v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (typeof v === 'string') return oneLine(v);
  if (isScalar(v)) return String(v);
  if (Array.isArray(v)) {
    if (v.length === 0) return '-';
    if (v.every(isScalar)) return v.map((x) => String(x)).join(', ');
    // Lists of objects with a name are common (services of a deployment): show the names.
    const names = v.map((x) => (x && typeof x === 'object' ? ((x as Record<string, unknown>).name ?? (x as Record<string, unknown>).id) : undefined));
    if (names.every((n) => typeof n === 'string' || typeof n === 'number')) return names.join(', ');
    return `${v.length} item${v.length === 1 ? '' : 's'}`;
  }
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.every(([, x]) => isScalar(x))) return entries.map(([k, x]) => `${k}=${x === null || x === undefined ? '-' : String(x)}`).join(' ');
  return JSON.stringify(v);
}

/**
 * Rows as an aligned table that fits `width`: columns holding only nested data go first when it does not fit,
 * then cells get narrower, then the last columns are left out (with a note pointing to --json).
 */
export function renderTable(rows: Record<string, unknown>[], style: Style, width = 200): string {
  let columns: string[] = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  const nested = (c: string) => rows.every((r) => r[c] !== null && typeof r[c] === 'object' && !(Array.isArray(r[c]) && (r[c] as unknown[]).every(isScalar)));
  // Identifiers are never shortened: they are what people copy into the next command.
  const isKey = (c: string, i: number) => i === 0 || c === 'id' || c === 'name';
  const measure = (cols: string[], max: number) => {
    const body = rows.map((row) => cols.map((c, i) => (isKey(c, i) ? cell(row[c]) : clip(cell(row[c]), max))));
    const widths = cols.map((c, i) => Math.max(c.length, ...body.map((r) => r[i]!.length)));
    return { body, widths, total: widths.reduce((a, b) => a + b, 0) + 2 * Math.max(0, cols.length - 1) };
  };
  const hidden: string[] = [];
  let max = MAX_CELL;
  let m = measure(columns, max);
  while (m.total > width && columns.some(nested)) {
    const drop = [...columns].reverse().find(nested)!;
    hidden.unshift(drop);
    columns = columns.filter((c) => c !== drop);
    m = measure(columns, max);
  }
  while (m.total > width && max > 16) m = measure(columns, (max -= 8));
  while (m.total > width && columns.length > 1) {
    hidden.unshift(columns.pop()!);
    m = measure(columns, max);
  }
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(m.widths[i]!)))
      .join('  ')
      .trimEnd();
  const out = [style.bold(line(columns.map((c) => c.toUpperCase()))), ...m.body.map(line)];
  if (hidden.length) out.push(style.dim(`(not shown: ${hidden.join(', ')}; --json shows everything)`));
  return out.join('\n');
}

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

function scalarText(v: unknown): string {
  if (v === null || v === undefined) return '-';
  return String(v);
}

/** Aligned `key  value` lines; nested objects and lists of objects are indented below their key. */
export function renderKeyValue(obj: Record<string, unknown>, style: Style, indent = 0): string {
  const pad = ' '.repeat(indent);
  const entries = Object.entries(obj);
  if (entries.length === 0) return `${pad}(empty)`;
  const width = Math.max(...entries.map(([k]) => k.length));
  const out: string[] = [];
  for (const [key, value] of entries) {
    const label = style.bold(key.padEnd(width));
    if (typeof value === 'string' && value.includes('\n')) {
      out.push(`${pad}${style.bold(key)}:`);
      for (const line of value.replace(/\n$/, '').split('\n')) out.push(`${pad}  ${line}`);
    } else if (isScalar(value)) {
      out.push(`${pad}${label}  ${scalarText(value)}`);
    } else if (Array.isArray(value)) {
      if (value.length === 0) out.push(`${pad}${label}  -`);
      else if (value.every(isScalar)) out.push(`${pad}${label}  ${value.map(scalarText).join(', ')}`);
      else {
        out.push(`${pad}${style.bold(key)}:`);
        for (const item of value) {
          if (item && typeof item === 'object' && !Array.isArray(item)) {
            const block = renderKeyValue(item as Record<string, unknown>, style, indent + 4).split('\n');
            out.push(`${pad}  - ${block[0]!.slice(indent + 4)}`, ...block.slice(1));
          } else out.push(`${pad}  - ${JSON.stringify(item)}`);
        }
      }
    } else {
      out.push(`${pad}${style.bold(key)}:`);
      out.push(renderKeyValue(value as Record<string, unknown>, style, indent + 2));
    }
  }
  return out.join('\n');
}

const LOG_KEYS = new Set(['text', 'line', 'service', 'container', 'stream', 'time', 'source', 'type']);

/** Log lines (`{service, stream, time, text}`) read best as `service | text`, like a terminal shows them. */
function isLogLines(rows: unknown[]): rows is Record<string, unknown>[] {
  return rows.every(
    (r) =>
      r &&
      typeof r === 'object' &&
      (typeof (r as Record<string, unknown>).text === 'string' || typeof (r as Record<string, unknown>).line === 'string') &&
      Object.keys(r as object).every((k) => LOG_KEYS.has(k)),
  );
}

export function logLine(row: Record<string, unknown>): string {
  const text = String(row.text ?? row.line ?? '').replace(/\n$/, '');
  const prefix = row.service ?? row.container ?? (row.stream === 'file' ? undefined : row.source);
  return typeof prefix === 'string' && prefix ? `${prefix} | ${text}` : text;
}

/** The `data` of an answer for people. */
export function renderData(data: unknown, style: Style, width?: number): string {
  if (Array.isArray(data)) {
    if (data.length === 0) return style.dim('(no items)');
    if (isLogLines(data)) return data.map(logLine).join('\n');
    if (data.every((d) => d && typeof d === 'object' && !Array.isArray(d))) return renderTable(data as Record<string, unknown>[], style, width);
    if (data.every(isScalar)) return data.map(scalarText).join('\n');
    return data.map((d) => (isScalar(d) ? scalarText(d) : JSON.stringify(d))).join('\n');
  }
  if (data && typeof data === 'object') return renderKeyValue(data as Record<string, unknown>, style);
  if (data === null || data === undefined) return '';
  return String(data);
}

/** Pads a two-column list (`name   description`). */
export function twoColumns(rows: [string, string][], indent = 2): string {
  const width = Math.max(0, ...rows.map(([a]) => visibleLength(a)));
  return rows.map(([a, b]) => `${' '.repeat(indent)}${a}${' '.repeat(width - visibleLength(a))}  ${b}`.trimEnd()).join('\n');
}
