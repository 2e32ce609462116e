/**
 * Reading the JSON Schemas of the live description: local `$ref`s, type labels, enum choices, constraints, and
 * the flat list of body fields (dotted paths) that help texts and skeletons are made of. `$ref`s are resolved here,
 * lazily and synchronously for the one operation a command runs, not by @apidevtools/json-schema-ref-parser
 * (bench/libraries): it is async only, resolves a whole document (0.1–0.3 s for the agent's, plus its import) or
 * takes 4–19× as long for one operation's schemas.
 */
export type JsonSchema = Record<string, unknown> & {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  default?: unknown;
  description?: string;
  $ref?: string;
};

/** The target of a local `$ref` (one level, no copy), or the node itself. */
export function resolveRef(node: Record<string, unknown>, root: unknown): JsonSchema {
  const ref = node.$ref;
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return node as JsonSchema;
  const target = ref
    .slice(2)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((at, key) => (at && typeof at === 'object' ? (at as Record<string, unknown>)[key] : undefined), root);
  return (target && typeof target === 'object' ? target : {}) as JsonSchema;
}

/** Replaces local `#/...` references with their targets (cycles are cut after a few levels). */
export function derefSchema(schema: unknown, root: unknown, depth = 0): JsonSchema {
  const walk = (node: unknown, level: number): unknown => {
    if (Array.isArray(node)) return node.map((n) => walk(n, level));
    if (node === null || typeof node !== 'object') return node;
    const obj = node as Record<string, unknown>;
    if (typeof obj.$ref === 'string' && obj.$ref.startsWith('#/')) {
      if (level > 8) return {};
      const target = obj.$ref
        .slice(2)
        .split('/')
        .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
        .reduce<unknown>((at, key) => (at && typeof at === 'object' ? (at as Record<string, unknown>)[key] : undefined), root);
      const { $ref: _ref, ...rest } = obj;
      return walk({ ...(target as object), ...rest }, level + 1);
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(obj)) out[k] = walk(v, level);
    return out;
  };
  return walk(schema, depth) as JsonSchema;
}

const variants = (s: JsonSchema): JsonSchema[] | undefined => s.anyOf ?? s.oneOf;

/** The choices of an enum-like schema (`enum`, `const`, or a union of consts); undefined when free. */
export function enumValues(schema: JsonSchema): unknown[] | undefined {
  if (Array.isArray(schema.enum)) return schema.enum;
  if ('const' in schema) return [schema.const];
  const vs = variants(schema);
  if (vs && vs.length > 0 && vs.every((v) => 'const' in v || Array.isArray(v.enum))) {
    return vs.flatMap((v) => ('const' in v ? [v.const] : (v.enum as unknown[])));
  }
  return undefined;
}

const isNullSchema = (s: JsonSchema) => s.type === 'null' || s.const === null;

/** A short type for help texts: `string`, `integer`, `array of string`, `object`, `string | null`. */
export function typeLabel(schema: JsonSchema): string {
  const choices = enumValues(schema);
  if (choices) {
    const kinds = [...new Set(choices.map((c) => (c === null ? 'null' : typeof c)))];
    return kinds.join(' | ');
  }
  const vs = variants(schema);
  if (vs) return [...new Set(vs.map(typeLabel))].join(' | ');
  if (Array.isArray(schema.type)) return schema.type.join(' | ');
  if (schema.type === 'array') return schema.items ? `array of ${typeLabel(schema.items)}` : 'array';
  if (schema.type) return String(schema.type);
  if (schema.properties) return 'object';
  return 'any';
}

/** The non-null part of a nullable union, or the schema itself. */
export function nonNull(schema: JsonSchema): JsonSchema {
  const vs = variants(schema);
  if (vs) {
    const rest = vs.filter((v) => !isNullSchema(v));
    if (rest.length === 1) return rest[0]!;
  }
  return schema;
}

/** Whether a value of this schema is a JSON object with known fields. */
export const isObjectSchema = (s: JsonSchema): boolean => (s.type === 'object' || (!s.type && !!s.properties)) && !!s.properties;

/** Which JSON types a schema accepts (used to decide whether `-f key=value` is parsed as JSON). */
export function acceptedTypes(schema: JsonSchema): Set<string> {
  const out = new Set<string>();
  const add = (s: JsonSchema) => {
    const choices = enumValues(s);
    if (choices) {
      for (const c of choices) out.add(c === null ? 'null' : Number.isInteger(c) ? 'integer' : typeof c);
      return;
    }
    const vs = variants(s);
    if (vs) return vs.forEach(add);
    if (Array.isArray(s.type)) s.type.forEach((t) => out.add(t));
    else if (s.type) out.add(s.type);
    else if (s.properties) out.add('object');
    else out.add('any');
  };
  add(schema);
  return out;
}

/** Human constraints: `pattern ^a$`, `1-200 chars`, `≥ 1`, `format date-time`, `secret`. */
export function constraints(schema: JsonSchema): string[] {
  const s = nonNull(schema);
  const out: string[] = [];
  const min = s.minLength as number | undefined;
  const max = s.maxLength as number | undefined;
  if (min !== undefined && max !== undefined) out.push(`${min}-${max} chars`);
  else if (min !== undefined) out.push(`at least ${min} chars`);
  else if (max !== undefined) out.push(`at most ${max} chars`);
  if (s.minimum !== undefined && s.maximum !== undefined) out.push(`${s.minimum}..${s.maximum}`);
  else if (s.minimum !== undefined) out.push(`>= ${s.minimum}`);
  else if (s.maximum !== undefined) out.push(`<= ${s.maximum}`);
  if (s.minItems !== undefined) out.push(`at least ${s.minItems} items`);
  if (s.maxItems !== undefined) out.push(`at most ${s.maxItems} items`);
  if (typeof s.format === 'string') out.push(`format ${s.format}`);
  if (typeof s.pattern === 'string') out.push(`pattern ${s.pattern}`);
  if (s.writeOnly === true) out.push('secret');
  return out;
}

/** One row of a body description: `env_vars[].key`, its type, whether it is required, its choices… */
export interface FieldInfo {
  path: string;
  depth: number;
  type: string;
  required: boolean;
  description?: string;
  enum?: unknown[];
  default?: unknown;
  hasDefault: boolean;
  constraints: string[];
  secret: boolean;
}

/** Every field of a (dereferenced) body schema, parents before children. */
export function listFields(schema: JsonSchema): FieldInfo[] {
  const out: FieldInfo[] = [];
  const seen = new Set<string>();
  const visitObject = (obj: JsonSchema, prefix: string, depth: number) => {
    const required = new Set(obj.required ?? []);
    for (const [name, raw] of Object.entries(obj.properties ?? {})) {
      const path = prefix ? `${prefix}.${name}` : name;
      visitField(raw, path, required.has(name), depth);
    }
  };
  const visitField = (field: JsonSchema, path: string, required: boolean, depth: number) => {
    if (!seen.has(path)) {
      seen.add(path);
      const choices = enumValues(nonNull(field));
      out.push({
        path,
        depth,
        required,
        type: typeLabel(field),
        description: typeof field.description === 'string' ? field.description : undefined,
        enum: choices,
        default: field.default,
        hasDefault: 'default' in field,
        constraints: constraints(field),
        secret: field.writeOnly === true,
      });
    }
    const inner = nonNull(field);
    if (isObjectSchema(inner)) visitObject(inner, path, depth + 1);
    else if (inner.type === 'array' && inner.items && isObjectSchema(nonNull(inner.items))) visitObject(nonNull(inner.items), `${path}[]`, depth + 1);
    else for (const v of variants(inner) ?? []) if (isObjectSchema(v)) visitObject(v, path, depth + 1);
  };
  if (isObjectSchema(schema)) visitObject(schema, '', 0);
  return out;
}

/** The schema of a nested field (`ssl.enabled`, `env_vars.0.key`), or undefined when the path is unknown. */
export function schemaAt(schema: JsonSchema, path: (string | number)[]): JsonSchema | undefined {
  let at: JsonSchema | undefined = schema;
  for (const part of path) {
    if (!at) return undefined;
    const s: JsonSchema = nonNull(at);
    if (typeof part === 'number' || /^\d+$/.test(part)) {
      at = s.type === 'array' ? s.items : s.properties?.[String(part)];
    } else {
      at = s.properties?.[part] ?? (typeof s.additionalProperties === 'object' ? (s.additionalProperties as JsonSchema) : undefined);
      if (!at) {
        for (const v of variants(s) ?? []) if (v.properties?.[part]) at = v.properties[part];
      }
    }
  }
  return at;
}
