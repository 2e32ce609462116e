/**
 * Request validation with the route's own JSON Schemas (ajv, draft 2020-12). Bodies are strict (unknown fields
 * rejected, no coercion); query strings and path params are coerced to the declared types.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { errors, type HttpError } from '@agent/sdk';

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

// Schemas come from code (TypeBox), and the OpenAPI test checks them against the 2020-12 dialect, so the costly
// meta-schema validation and code optimisation passes are skipped: compiling becomes about 8x cheaper.
const options = { allErrors: false, strict: false, useDefaults: true, validateSchema: false, code: { optimize: false } } as const;
const bodyAjv = addFormats(new Ajv2020({ ...options, coerceTypes: false }));
const queryAjv = addFormats(new Ajv2020({ ...options, coerceTypes: 'array' }));

type Schema = Record<string, unknown>;

/**
 * A copy of `schema` in which every object that lists properties but says nothing about others refuses them.
 * TypeBox's symbol keys are dropped by the copy, leaving plain JSON Schema.
 */
export function closeObjects(schema: unknown): Schema {
  /** `open`: a member of an `allOf`, whose own properties are only part of the object (its parent closes it). */
  const walk = (node: unknown, open = false): unknown => {
    if (Array.isArray(node)) return node.map((n) => walk(n));
    if (node === null || typeof node !== 'object') return node;
    const out: Schema = {};
    for (const [k, v] of Object.entries(node)) out[k] = k === 'allOf' && Array.isArray(v) ? v.map((member) => walk(member, true)) : walk(v);
    if (Array.isArray(out.allOf) && out.unevaluatedProperties === undefined) {
      // An intersection (TypeBox's Intersect) refuses what none of its members describes.
      out.unevaluatedProperties = false;
    } else if (!open && out.type === 'object' && out.properties && out.additionalProperties === undefined && out.patternProperties === undefined) {
      out.additionalProperties = false;
    }
    return out;
  };
  return walk(schema) as Schema;
}

/** `/env_vars/0/key` → `env_vars[0].key` */
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

function describeError(location: string, err: ErrorObject): string {
  const at = (extra?: string) => {
    const path = fieldPath(err.instancePath, extra);
    return path ? `${location}.${path}` : location;
  };
  switch (err.keyword) {
    case 'additionalProperties':
      return `${at()}: unknown field '${String(err.params.additionalProperty)}'`;
    case 'required':
      return `${at(String(err.params.missingProperty))}: required field is missing`;
    case 'enum':
      return `${at()}: must be one of ${(err.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'pattern':
      return `${at()}: does not match ${String(err.params.pattern)}`;
    default:
      return `${at()}: ${err.message ?? 'is invalid'}`;
  }
}

export interface Validator {
  (value: unknown): HttpError | null;
  schema: Schema;
}

/**
 * Compiling a schema is the most expensive step of start-up (ajv generates code) and each compiled validator
 * stays in memory, so a route's validators compile on its first request (a few milliseconds, once).
 */
function make(ajv: Ajv2020, location: 'body' | 'query' | 'params', schema: unknown): Validator {
  const closed = closeObjects(schema);
  let check: ValidateFunction | null = null;
  const validate = ((value: unknown) => {
    try {
      check ??= ajv.compile(closed);
    } catch (err) {
      throw new Error(`invalid ${location} schema: ${(err as Error).message}`);
    }
    if (check(value)) return null;
    const first = check.errors![0]!;
    return errors.badRequest(describeError(location, first), 'VALIDATION_FAILED', {
      field: fieldPath(first.instancePath, (first.params.missingProperty ?? first.params.additionalProperty) as string | undefined) || null,
    });
  }) as Validator;
  validate.schema = closed;
  return validate;
}

export const bodyValidator = (schema: unknown) => make(bodyAjv, 'body', schema);
export const queryValidator = (schema: unknown) => make(queryAjv, 'query', schema);
export const paramsValidator = (schema: unknown) => make(queryAjv, 'params', schema);

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * What validating `{}` with ajv's `useDefaults` gives for an object schema, without compiling it: every property's
 * `default` (a copy), nested objects filled the same way. Null when a required property has no default (only
 * validation can then say what is wrong). Used for config and settings sections nobody has set.
 */
export function defaultsOf(schema: unknown): Record<string, unknown> | null {
  const fill = (node: unknown, target: Record<string, unknown>): boolean => {
    if (!isRecord(node)) return true;
    for (const [key, property] of Object.entries(isRecord(node.properties) ? node.properties : {})) {
      if (!isRecord(property)) continue;
      if (target[key] === undefined && 'default' in property) target[key] = structuredClone(property.default);
      const value = target[key];
      if (property.type === 'object' && isRecord(value) && !fill(property, value)) return false;
    }
    return (Array.isArray(node.required) ? (node.required as string[]) : []).every((key) => target[key] !== undefined);
  };
  const out: Record<string, unknown> = {};
  return fill(schema, out) ? out : null;
}

/** Validates without the HTTP error wrapping (config sections, settings): `<prefix>.<field>: <problem>` or null. */
export function compilePlain(schema: unknown): (value: unknown, prefix: string) => string | null {
  const closed = closeObjects(schema);
  let fn: ValidateFunction | null = null; // compiled on first use (settings sections may never be changed)
  return (value, prefix) => {
    fn ??= bodyAjv.compile(closed);
    return fn(value) ? null : describeError(prefix, fn.errors![0]!);
  };
}
