/**
 * Building a request body from a document (`--data`) and `key=value` assignments (`-f`): dotted keys reach
 * nested fields (`ssl.enabled=true`, `env_vars[0].key=A` or `env_vars.0.key=A`), JSON-looking values are parsed
 * unless the field is a plain string, and `key=@file` reads a file's text into a field (`@@` for a literal `@`).
 */
import { loadYaml } from './lazy.js';
import { acceptedTypes, schemaAt, type JsonSchema } from './json-schema.js';

/** Parses a JSON (or YAML) document given to `--data`. */
export function parseDocument(text: string, source: string): unknown {
  try {
    return JSON.parse(text);
  } catch (jsonError) {
    try {
      const value = loadYaml().parse(text);
      if (value !== null && typeof value === 'object') return value;
    } catch {
      // report the JSON error below: it is the documented format
    }
    throw new Error(`${source}: not valid JSON (${(jsonError as Error).message})`);
  }
}

/** `env_vars[0].key` / `env_vars.0.key` → `['env_vars', 0, 'key']` */
export function splitKey(key: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of key.split('.')) {
    const m = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) throw new Error(`'${key}': invalid field name`);
    if (m[1]) out.push(/^\d+$/.test(m[1]) ? Number(m[1]) : m[1]);
    for (const idx of m[2]!.matchAll(/\[(\d+)\]/g)) out.push(Number(idx[1]));
    if (!m[1] && !m[2]) throw new Error(`'${key}': empty segment in field name`);
  }
  if (out.length === 0) throw new Error(`'${key}': empty field name`);
  for (const p of out) if (p === '__proto__' || p === 'constructor' || p === 'prototype') throw new Error(`'${key}': invalid field name`);
  return out;
}

const JSON_LOOKING = /^\s*(\{[^]*\}|\[[^]*\]|"[^]*"|-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)\s*$/;

/** A `-f` value typed by the target field: strings stay strings, anything else is parsed when it looks like JSON. */
export function coerceValue(raw: string, field: JsonSchema | undefined, key: string): unknown {
  const types = field ? acceptedTypes(field) : new Set(['any']);
  const stringOnly = types.size > 0 && [...types].every((t) => t === 'string');
  if (stringOnly) return raw;
  if (JSON_LOOKING.test(raw)) {
    try {
      return JSON.parse(raw);
    } catch (err) {
      throw new Error(`-f ${key}: the value looks like JSON but does not parse (${(err as Error).message})`);
    }
  }
  return raw;
}

function setPath(target: Record<string, unknown>, path: (string | number)[], value: unknown, key: string): void {
  let at: any = target;
  for (let i = 0; i < path.length; i++) {
    const part = path[i]!;
    const last = i === path.length - 1;
    if (typeof part === 'number' && !Array.isArray(at)) throw new Error(`-f ${key}: '${path.slice(0, i).join('.')}' is not a list`);
    if (typeof part === 'string' && (Array.isArray(at) || at === null || typeof at !== 'object'))
      throw new Error(`-f ${key}: '${path.slice(0, i).join('.')}' is not an object`);
    if (last) {
      at[part] = value;
      return;
    }
    if (at[part] === undefined || at[part] === null) at[part] = typeof path[i + 1] === 'number' ? [] : {};
    at = at[part];
  }
}

export interface BuildBodyInput {
  /** Parsed `--data` document. */
  data?: unknown;
  /** `key=value` assignments, applied in order after `data`. */
  fields?: string[];
  /** Reads `@file` values (injected so the library stays free of the file system policy). */
  readFile?: (path: string) => string;
}

/** The body to send; undefined when neither data nor fields were given. */
export function buildBody(schema: JsonSchema | undefined, input: BuildBodyInput): unknown {
  const fields = input.fields ?? [];
  if (input.data === undefined && fields.length === 0) return undefined;
  let body: unknown = input.data === undefined ? {} : structuredClone(input.data);
  for (const assignment of fields) {
    const eq = assignment.indexOf('=');
    if (eq <= 0) throw new Error(`-f ${assignment}: expected key=value`);
    const key = assignment.slice(0, eq);
    let raw = assignment.slice(eq + 1);
    const path = splitKey(key);
    const field = schema ? schemaAt(schema, path) : undefined;
    if (raw.startsWith('@@')) raw = raw.slice(1);
    else if (raw.startsWith('@') && raw.length > 1) {
      if (!input.readFile) throw new Error(`-f ${key}: reading files is not available here`);
      raw = input.readFile(raw.slice(1));
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new Error('-f: the body from --data is not an object');
    setPath(body as Record<string, unknown>, path, coerceValue(raw, field, key), key);
  }
  return body;
}
