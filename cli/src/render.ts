/**
 * Human output of answers (`-o table`, the default): lists as tables, objects as aligned key/value blocks (nested
 * ones indented), plain values as is. `-o json|yaml|jsonpath=…` bypass all of this (output.ts).
 */
import Table from 'cli-table3';
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

/** cli-table3 without borders: columns two spaces apart, as `docker ps` and `kubectl get` print them. */
const BORDERLESS: Partial<Record<Table.CharName, string>> = {
  top: '',
  'top-mid': '',
  'top-left': '',
  'top-right': '',
  bottom: '',
  'bottom-mid': '',
  'bottom-left': '',
  'bottom-right': '',
  left: '',
  'left-mid': '',
  mid: '',
  'mid-mid': '',
  right: '',
  'right-mid': '',
  middle: '  ',
};

/** Lays out rows of cells; `widths` caps columns (longer cells end in …). Lines without trailing blanks. */
function layout(head: string[] | undefined, rows: string[][], widths?: (number | null)[]): string {
  const table = new Table({
    head,
    chars: BORDERLESS,
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0, compact: true },
    ...(widths ? { colWidths: widths } : {}),
    wordWrap: false,
  });
  table.push(...rows);
  return table
    .toString()
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n');
}

/**
 * Rows as an aligned table that fits `width`: columns holding only nested data go first when it does not fit,
 * then cells get narrower, then the last columns are left out (with a note pointing to -o json).
 */
export function renderTable(rows: Record<string, unknown>[], style: Style, width = 200): string {
  let columns: string[] = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  const nested = (c: string) => rows.every((r) => r[c] !== null && typeof r[c] === 'object' && !(Array.isArray(r[c]) && (r[c] as unknown[]).every(isScalar)));
  // Identifiers are never shortened: they are what people copy into the next command.
  const isKey = (c: string, i: number) => i === 0 || c === 'id' || c === 'name';
  const cells = rows.map((row) => Object.fromEntries(Object.keys(row).map((c) => [c, cell(row[c])])));
  const measure = (cols: string[], max: number) => {
    const widths = cols.map((c, i) => {
      const widest = Math.max(visibleLength(c), ...cells.map((r) => visibleLength(r[c] ?? '-')));
      return isKey(c, i) ? widest : Math.min(widest, Math.max(max, visibleLength(c)));
    });
    return { widths, total: widths.reduce((a, b) => a + b, 0) + 2 * Math.max(0, cols.length - 1) };
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
  const text = layout(
    columns.map((c) => style.bold(c.toUpperCase())),
    cells.map((r) => columns.map((c) => r[c] ?? '-')),
    m.widths,
  );
  return hidden.length ? `${text}\n${style.dim(`(not shown: ${hidden.join(', ')}; -o json shows everything)`)}` : text;
}

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

/** A two-column list (`name   description`), indented. */
export function twoColumns(rows: [string, string][], indent = 2): string {
  if (rows.length === 0) return '';
  const pad = ' '.repeat(indent);
  // A cell with a line break would become a row of several lines.
  return layout(
    undefined,
    rows.map((r) => r.map((c) => c.replace(/\s*\n\s*/g, ' '))),
  )
    .split('\n')
    .map((l) => `${pad}${l}`)
    .join('\n');
}
