/**
 * `-o table|json|yaml|jsonpath=<expr>` (and `--json`, the same as `-o json`). `table` is for people (render.ts);
 * the others print the agent's answer as it came (`{data, meta?, message?}`), so a path read in `-o json` works in
 * `-o jsonpath` as written. YAML is the `yaml` package's, JSONPath is jsonpath-plus's (its safe evaluator: filters
 * like `[?(@.status=="running")]` work, code does not run). kubectl's template form is understood as well:
 * `{.data[*].name}`, text around it, `{"\n"}` and `{range .data[*]}…{end}`.
 */
import { UsageError } from './usage-error.js';

export type OutputFormat = { kind: 'table' } | { kind: 'json' } | { kind: 'yaml' } | { kind: 'jsonpath'; expr: string };

export const FORMAT_NAMES = ['table', 'json', 'yaml', 'jsonpath=<expr>'] as const;

export function parseOutputFormat(value: string): OutputFormat {
  if (value === 'table' || value === 'json' || value === 'yaml') return { kind: value };
  if (value === 'jsonpath' || value === 'jsonpath=') {
    throw new UsageError(`-o jsonpath needs an expression: -o 'jsonpath={.data[*].name}' or -o 'jsonpath=$.data[*].name'`);
  }
  if (value.startsWith('jsonpath=')) {
    const expr = value.slice('jsonpath='.length);
    // A template's braces and range … end are checked now, before a request is sent.
    if (expr.includes('{')) parseTemplate(expr);
    return { kind: 'jsonpath', expr };
  }
  // `-o file` was how downloads were saved before -o became the format: say where that went.
  throw new UsageError(`unknown output format '${value}': one of ${FORMAT_NAMES.join(', ')} (to write an answer to a file: --output-file <file>)`);
}

type JsonPathFn = (typeof import('jsonpath-plus'))['JSONPath'];
type Yaml = typeof import('yaml');

/** The libraries are loaded only by the calls that print with them: a plain call stays quick to start. */
export interface Formatters {
  yaml: Yaml;
  jsonpath: JsonPathFn;
}

export async function loadFormatters(format: OutputFormat): Promise<Partial<Formatters>> {
  if (format.kind === 'yaml') return { yaml: await import('yaml') };
  if (format.kind === 'jsonpath') return { jsonpath: (await import('jsonpath-plus')).JSONPath };
  return {};
}

/** One document in a machine format, ending with a newline (empty when a JSONPath matched nothing). */
export function formatDocument(document: unknown, format: OutputFormat, lib: Partial<Formatters>, options: { compact?: boolean } = {}): string {
  switch (format.kind) {
    case 'json':
      return `${JSON.stringify(document ?? null, null, options.compact ? undefined : 2)}\n`;
    case 'yaml':
      // No folding of long lines: a value stays on one line, as grep and copy-paste expect.
      return lib.yaml!.stringify(document ?? null, { lineWidth: 0 });
    case 'jsonpath':
      return evaluateJsonPath(format.expr, document, lib.jsonpath!);
    case 'table':
      throw new Error('table output is rendered by the command');
  }
}

/** A match as text: strings as they are, anything else as compact JSON (kubectl prints the same). */
const text = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v ?? null));

/** `.a.b` / `@.a` (kubectl, relative to the current element) → `$.a.b`, the form jsonpath-plus reads. */
function toJsonPath(expr: string): string {
  const e = expr.trim();
  if (e.startsWith('$')) return e;
  if (e.startsWith('@')) return `$${e.slice(1)}`;
  if (e.startsWith('.') || e.startsWith('[')) return `$${e}`;
  return `$.${e}`;
}

function query(jsonpath: JsonPathFn, expr: string, json: unknown): unknown[] {
  const path = toJsonPath(expr);
  try {
    return jsonpath({ path, json: json as object, wrap: true, eval: 'safe' }) as unknown[];
  } catch (err) {
    throw new UsageError(`jsonpath ${path}: ${(err as Error).message.replace(/^jsonPath: /, '')}`);
  }
}

type Node = { text: string } | { path: string } | { range: string; body: Node[] };

/** Splits a kubectl template into text and `{…}` blocks (quotes inside a block may hold braces). */
function tokenize(template: string): { text?: string; block?: string }[] {
  const out: { text?: string; block?: string }[] = [];
  let i = 0;
  let pending = '';
  while (i < template.length) {
    if (template[i] !== '{') {
      pending += template[i++];
      continue;
    }
    let j = i + 1;
    let quote: string | null = null;
    for (; j < template.length; j++) {
      const ch = template[j]!;
      if (quote) {
        if (ch === '\\') j++;
        else if (ch === quote) quote = null;
      } else if (ch === '"' || ch === "'") quote = ch;
      else if (ch === '}') break;
    }
    if (j >= template.length) throw new UsageError(`jsonpath: unclosed '{' in ${template}`);
    if (pending) out.push({ text: pending });
    pending = '';
    out.push({ block: template.slice(i + 1, j).trim() });
    i = j + 1;
  }
  if (pending) out.push({ text: pending });
  return out;
}

function parseTemplate(template: string): Node[] {
  const root: Node[] = [];
  const stack: Node[][] = [root];
  for (const t of tokenize(template)) {
    const into = stack[stack.length - 1]!;
    if (t.text !== undefined) into.push({ text: t.text });
    else if (/^"(?:[^"\\]|\\.)*"$/.test(t.block!)) into.push({ text: JSON.parse(t.block!) as string });
    else if (/^'[^']*'$/.test(t.block!)) into.push({ text: t.block!.slice(1, -1) });
    else if (/^range\s/.test(t.block!)) {
      const node = { range: t.block!.slice(6).trim(), body: [] as Node[] };
      into.push(node);
      stack.push(node.body);
    } else if (t.block === 'end') {
      if (stack.length === 1) throw new UsageError(`jsonpath: {end} without {range …} in ${template}`);
      stack.pop();
    } else into.push({ path: t.block! });
  }
  if (stack.length > 1) throw new UsageError(`jsonpath: {range …} without {end} in ${template}`);
  return root;
}

function render(nodes: Node[], current: unknown, jsonpath: JsonPathFn): string {
  let out = '';
  for (const node of nodes) {
    if ('text' in node) out += node.text;
    else if ('path' in node) out += query(jsonpath, node.path, current).map(text).join(' ');
    else {
      const matches = query(jsonpath, node.range, current);
      // `{range .data}` over one list walks its items, as `{range .data[*]}` does.
      const items = matches.length === 1 && Array.isArray(matches[0]) ? (matches[0] as unknown[]) : matches;
      for (const item of items) out += render(node.body, item, jsonpath);
    }
  }
  return out;
}

/**
 * A template (`{…}` blocks, kubectl's form) prints as written with its blocks filled, the matches of a block
 * separated by spaces; a bare expression (`$.data[*].name`) prints each match on a line of its own.
 */
export function evaluateJsonPath(expr: string, document: unknown, jsonpath: JsonPathFn): string {
  if (expr.includes('{')) {
    const out = render(parseTemplate(expr), document, jsonpath);
    return out === '' || out.endsWith('\n') ? out : `${out}\n`;
  }
  const matches = query(jsonpath, expr, document);
  return matches.length ? `${matches.map(text).join('\n')}\n` : '';
}
