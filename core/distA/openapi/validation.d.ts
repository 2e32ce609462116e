/**
 * Request validation with the route's own JSON Schemas (ajv, draft 2020-12). Bodies are strict (unknown fields
 * rejected, no coercion); query strings and path params are coerced to the declared types.
 */
import { type ErrorObject } from 'ajv/dist/2020.js';
import { type HttpError } from '@agent/sdk';
type Schema = Record<string, unknown>;
/**
 * A copy of `schema` in which every object that lists properties but says nothing about others refuses them.
 * TypeBox's symbol keys are dropped by the copy, leaving plain JSON Schema.
 */
export declare function closeObjects(schema: unknown): Schema;
export declare function describeError(location: string, err: ErrorObject): string;
export interface Validator {
    (value: unknown): HttpError | null;
    schema: Schema;
}
export declare const bodyValidator: (schema: unknown) => Validator;
export declare const queryValidator: (schema: unknown) => Validator;
export declare const paramsValidator: (schema: unknown) => Validator;
/**
 * What validating `{}` with ajv's `useDefaults` gives for an object schema, without compiling it: every property's
 * `default` (a copy), nested objects filled the same way. Null when a required property has no default (only
 * validation can then say what is wrong). Used for config and settings sections nobody has set.
 */
export declare function defaultsOf(schema: unknown): Record<string, unknown> | null;
/** Validates without the HTTP error wrapping (config sections, settings): `<prefix>.<field>: <problem>` or null. */
export declare function compilePlain(schema: unknown): (value: unknown, prefix: string) => string | null;
export {};
//# sourceMappingURL=validation.d.ts.map