/**
 * JSON Schema builders (TypeBox): one object validates the request (ajv), documents it in OpenAPI and types the
 * handler. Plus the patterns every plugin validates names with.
 */
import { Type, type TInteger, type TSchema, type TString } from '@sinclair/typebox';

export { Type } from '@sinclair/typebox';
export type { Static, TSchema, TObject } from '@sinclair/typebox';

/** Deployment names: `^[a-z0-9][a-z0-9_-]{0,62}$`. */
export const DEPLOYMENT_NAME = '^[a-z0-9][a-z0-9_-]{0,62}$';
/**
 * The name under which what belonged to a deleted deployment is kept: `<name>~<UTC yyyymmddhhmmss>`. `~` is never
 * part of a deployment name, so no new deployment (and no principal limited to deployments) reaches it.
 */
export const retiredName = (name: string, deletedAt: Date): string => `${name}~${deletedAt.toISOString().replace(/[-:T]/g, '').slice(0, 14)}`;

export const deploymentName = (options: { description?: string } = {}): TString =>
  Type.String({ pattern: DEPLOYMENT_NAME, description: options.description ?? 'deployment name' });

/** A host name (RFC 1123, at least one dot unless `allowSingleLabel`), lower case. */
export const HOSTNAME = '^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\\.(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?))*$';

/** A nullable schema: `T | null`. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** A string that must be kept out of responses, plans, logs and audit details. */
export const Secret = (options: { description?: string; minLength?: number; maxLength?: number } = {}) => Type.String({ ...options, writeOnly: true });

/**
 * Integers from requests are bounded so they stay exact numbers every store can take: a value past these is a
 * 400, never a 500 from a database or a date computation.
 */
export const MAX_INTEGER = Number.MAX_SAFE_INTEGER;
/** Durations in seconds from requests (`older_than`, …): up to a hundred years. */
export const MAX_SECONDS = 100 * 365 * 86400;

/** The numeric id of a record (path or query). */
export const RecordId = (description = 'id'): TInteger => Type.Integer({ minimum: 1, maximum: MAX_INTEGER, description });

/** A duration in seconds (e.g. `older_than`). */
export const Seconds = (options: { description?: string; minimum?: number } = {}): TInteger =>
  Type.Integer({ minimum: options.minimum ?? 1, maximum: MAX_SECONDS, description: options.description ?? 'seconds' });

/** Pagination query shared by list endpoints. */
export const Pagination = (defaultLimit: number, maxLimit: number) => ({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: maxLimit, default: defaultLimit })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INTEGER, default: 0 })),
});
