/**
 * Checks a request against the operation's schemas before it is sent, so mistakes are reported with the field
 * name and a suggestion ("unknown field 'nmae' — did you mean 'name'?") instead of a round trip.
 */
import type { Ajv2020, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import { loadAjv, loadAjvFormats } from './lazy.js';
import { enumValues, typeLabel, type JsonSchema } from './json-schema.js';
import type { Operation } from './description.js';

type Mode = 'body' | 'params';
const instances = new Map<string, Ajv2020>();

/** One ajv per mode (bodies strict, parameters coerced), with the formats only when a schema uses one. */
function ajvFor(mode: Mode, schema: JsonSchema): Ajv2020 {
  const withFormats = JSON.stringify(schema).includes('"format"');
  const key = `${mode}:${withFormats}`;
  let ajv = instances.get(key);
  if (!ajv) {
    const { Ajv2020: Ajv } = loadAjv();
    // No meta-schemas: the description's schemas are not re-validated here, and compiling them is slow.
    ajv = new Ajv({
      allErrors: true,
      verbose: true,
      strict: false,
      meta: false,
      validateSchema: false,
      useDefaults: false,
      coerceTypes: mode === 'params' ? 'array' : false,
      validateFormats: withFormats,
    });
    // ajv-formats is CommonJS: its function is the module itself or its default export.
    if (withFormats) {
      const mod = loadAjvFormats() as unknown as { default?: (a: Ajv2020) => Ajv2020 } & ((a: Ajv2020) => Ajv2020);
      (mod.default ?? mod)(ajv);
    }
    instances.set(key, ajv);
  }
  return ajv;
}

const compiled = new WeakMap<object, ValidateFunction>();
function compile(mode: Mode, schema: JsonSchema): ValidateFunction {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = ajvFor(mode, schema).compile(schema);
    compiled.set(schema, fn);
  }
  return fn;
}

/** Levenshtein distance, for suggestions. */
export function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const keep = prev[j]!;
      prev[j] = Math.min(prev[j]! + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = keep;
    }
  }
  return prev[b.length]!;
}

/** The closest known name, if it is close enough to be a likely typo. */
export function suggest(name: string, known: string[]): string | undefined {
  let best: string | undefined;
  let bestScore = Infinity;
  for (const k of known) {
    const d = editDistance(name.toLowerCase(), k.toLowerCase());
    if (d < bestScore) {
      best = k;
      bestScore = d;
    }
  }
  const limit = Math.max(2, Math.floor(name.length / 3));
  return best !== undefined && bestScore <= limit ? best : undefined;
}

/** `/env_vars/0/key` + `x` → `env_vars[0].key.x` */
function fieldPath(instancePath: string, extra?: string): string {
  const parts = [
    ...instancePath
      .split('/')
      .filter(Boolean)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~')),
    ...(extra ? [extra] : []),
  ];
  return parts.reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), '');
}

function describe(location: string, err: ErrorObject): string {
  const where = (extra?: string) => {
    const p = fieldPath(err.instancePath, extra);
    return p ? `${location}.${p}` : location;
  };
  switch (err.keyword) {
    case 'additionalProperties': {
      const name = String(err.params.additionalProperty);
      const known = Object.keys(((err.parentSchema ?? {}) as JsonSchema).properties ?? {});
      const hint = suggest(name, known);
      const parent = fieldPath(err.instancePath);
      const label = parent ? `${location}.${parent}` : location;
      if (hint) return `${label}: unknown field '${name}' — did you mean '${hint}'?`;
      return `${label}: unknown field '${name}'${known.length ? ` (known fields: ${known.join(', ')})` : ''}`;
    }
    case 'required':
      return `${where(String(err.params.missingProperty))}: required field is missing`;
    case 'enum':
      return `${where()}: must be one of ${(err.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${where()}: must be ${JSON.stringify(err.params.allowedValue)}`;
    case 'pattern':
      return `${where()}: does not match ${String(err.params.pattern)}`;
    case 'anyOf':
    case 'oneOf': {
      const parent = (err.parentSchema ?? {}) as JsonSchema;
      const choices = enumValues(parent);
      if (choices) return `${where()}: must be one of ${choices.map((v) => JSON.stringify(v)).join(', ')}`;
      return `${where()}: must be ${typeLabel(parent)}`;
    }
    case 'format':
      return `${where()}: must be a valid ${String(err.params.format)}`;
    default:
      return `${where()}: ${err.message ?? 'is invalid'}`;
  }
}

/** Unions report every branch; keep the errors of the branch that got furthest, plus everything outside unions. */
function simplify(errors: ErrorObject[]): ErrorObject[] {
  const union = errors.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf');
  if (union.length === 0) return errors;
  const unionPaths = new Set(union.map((e) => e.schemaPath));
  const outside = errors.filter(
    (e) => !union.some((u) => e.schemaPath.startsWith(u.schemaPath.replace(/\/(anyOf|oneOf)$/, '/$1/'))) && !unionPaths.has(e.schemaPath),
  );
  const out = [...outside];
  for (const u of union) {
    const prefix = u.schemaPath.replace(/\/(anyOf|oneOf)$/, '/$1/');
    const inside = errors.filter((e) => e.schemaPath.startsWith(prefix));
    const branches = new Map<string, ErrorObject[]>();
    for (const e of inside) {
      const branch = e.schemaPath.slice(prefix.length).split('/')[0]!;
      branches.set(branch, [...(branches.get(branch) ?? []), e]);
    }
    // A branch that failed only on a type/const is a branch of the wrong kind: prefer ones that failed deeper.
    const ranked = [...branches.values()].sort((a, b) => depthOf(b) - depthOf(a) || a.length - b.length);
    const best = ranked[0];
    if (best && depthOf(best) > u.instancePath.split('/').length) out.push(...best);
    else out.push(u);
  }
  return out;
}
const depthOf = (errs: ErrorObject[]) =>
  Math.max(...errs.map((e) => e.instancePath.split('/').length + (e.keyword === 'type' || e.keyword === 'const' ? 0 : 1)));

const PLACEHOLDER = /^<(required|optional)\b[^]*>$/;

/** Paths of values still holding a skeleton placeholder (`"<required: string — …>"`). */
export function leftoverPlaceholders(value: unknown, at = ''): string[] {
  if (typeof value === 'string') return PLACEHOLDER.test(value) ? [at || '(body)'] : [];
  if (Array.isArray(value)) return value.flatMap((v, i) => leftoverPlaceholders(v, `${at}[${i}]`));
  if (value && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => leftoverPlaceholders(v, at ? `${at}.${k}` : k));
  }
  return [];
}

/** Problems of a body against a JSON schema, one message per problem (empty when valid). */
export function validateBody(schema: JsonSchema, body: unknown): string[] {
  const placeholders = leftoverPlaceholders(body);
  if (placeholders.length > 0) {
    return placeholders.map((p) => `body.${p}: still holds the skeleton placeholder — fill it in, or remove the field if it is optional`);
  }
  const fn = compile('body', schema);
  if (fn(body)) return [];
  return [...new Set(simplify(fn.errors ?? []).map((e) => describe('body', e)))];
}

/**
 * Checks path arguments and query parameters; values are coerced to their declared types (`"5"` → 5) in place.
 * Unknown query parameters are reported with a suggestion.
 */
export function validateParameters(op: Operation, params: Record<string, unknown>, query: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const check = (where: 'path' | 'query', list: Operation['pathParams'], values: Record<string, unknown>) => {
    const known = list.map((p) => p.name);
    for (const name of Object.keys(values)) {
      if (!known.includes(name)) {
        const hint = suggest(name, known);
        problems.push(`${where}.${name}: unknown parameter${hint ? ` — did you mean '${hint}'?` : known.length ? ` (known: ${known.join(', ')})` : ''}`);
      }
    }
    if (list.length === 0) return;
    // Nothing given and nothing required: no need to load the validator at all.
    if (Object.keys(values).length === 0 && !list.some((p) => p.required)) return;
    const schema: JsonSchema = {
      type: 'object',
      properties: Object.fromEntries(list.map((p) => [p.name, p.schema])),
      required: list.filter((p) => p.required).map((p) => p.name),
    };
    const subset = Object.fromEntries(Object.entries(values).filter(([k]) => known.includes(k)));
    const fn = compile('params', schema);
    if (!fn(subset)) {
      for (const e of simplify(fn.errors ?? [])) {
        problems.push(
          e.keyword === 'required'
            ? `${where}.${String(e.params.missingProperty)}: required ${where === 'path' ? 'argument' : 'parameter'} is missing`
            : describe(where, e),
        );
      }
    }
    Object.assign(values, subset);
  };
  check('path', op.pathParams, params);
  check('query', op.queryParams, query);
  return [...new Set(problems)];
}
