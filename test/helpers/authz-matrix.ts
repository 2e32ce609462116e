/**
 * The pieces of the authorization matrix: operations read from `/api/openapi.json`, harmless request inputs built
 * from their schemas, and the outcome each principal must get. Nothing here knows any plugin: every operation a
 * plugin registers is covered from its live description.
 */
import { principalFrom, levelRank, type AccessLevel, type Principal, type PrincipalInfo } from '@agent/sdk';

type Json = Record<string, any>;

export type OpKind = 'http' | 'websocket' | 'app';

export interface Operation {
  id: string;
  kind: OpKind;
  method: string;
  /** OpenAPI path, e.g. `/api/deployments/{name}`. */
  path: string;
  permission: string;
  plugin: string;
  deploymentScoped: boolean;
  deploymentParam: string | null;
  deploymentLevel: AccessLevel | null;
  /** A query field carrying the deployment, for scoped operations that read it from the query. */
  deploymentQuery: string | null;
  /** What a principal limited to deployments may do when no deployment is named (`x-tenancy`). */
  tenancy: string;
  params: Json[];
  body: Json | null;
}

export function operationsOf(doc: Json): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const [method, op] of Object.entries(item)) {
      const params = (op.parameters ?? []) as Json[];
      const scoped = op['x-deployment-scoped'] === true;
      const deploymentQuery =
        scoped && !op['x-deployment-param'] ? (params.find((p) => p.in === 'query' && /^deployment(_name)?$/.test(p.name))?.name ?? null) : null;
      ops.push({
        id: op.operationId,
        kind: op['x-websocket'] ? 'websocket' : op['x-app'] ? 'app' : 'http',
        method: method.toUpperCase(),
        path,
        permission: op['x-permission'],
        plugin: op['x-plugin'],
        deploymentScoped: scoped,
        deploymentParam: op['x-deployment-param'] ?? null,
        deploymentLevel: op['x-deployment-level'] ?? null,
        deploymentQuery,
        tenancy: op['x-tenancy'] ?? 'global',
        params,
        body: op.requestBody?.content?.['application/json']?.schema ?? null,
      });
    }
  }
  return ops;
}

const CANDIDATES = [
  'matrix-nonexistent',
  'matrixnonexistent',
  'm0',
  '999999',
  'matrix-nonexistent.example.com',
  'matrix.example.com.',
  '192.0.2.123',
  '00000000-0000-4000-8000-000000000000',
  `sha256:${'0'.repeat(64)}`,
  '0'.repeat(64),
  'deadbeef0000',
  'matrix_nonexistent',
  'Matrix',
  'MATRIX',
  'a',
];

/** A value that satisfies a parameter schema without naming anything that exists. */
export function sampleValue(schema: Json | undefined, name = ''): string | number | boolean {
  const s = schema ?? {};
  const variants = [s, ...((s.anyOf ?? s.oneOf ?? []) as Json[])];
  for (const v of variants) {
    if (v.enum) return v.enum[0];
    if (v.const !== undefined) return v.const;
    if (v.type === 'integer' || v.type === 'number') {
      if (/older|seconds|age|days|hours/.test(name)) return Math.max(v.minimum ?? 1, Math.min(v.maximum ?? 315360000, 315360000));
      return Math.min(Math.max(v.minimum ?? 999999, 999999), v.maximum ?? 999999);
    }
    if (v.type === 'boolean') return false;
    if (v.type === 'string') {
      if (v.format === 'uuid') return '00000000-0000-4000-8000-000000000000';
      if (v.format === 'date-time') return '2000-01-01T00:00:00Z';
      if (v.format === 'ipv4' || /(^|_)ip$/.test(name)) return '192.0.2.123';
      const re = v.pattern ? new RegExp(v.pattern, 'u') : null;
      const fits = (c: string) => (!re || re.test(c)) && c.length >= (v.minLength ?? 0) && c.length <= (v.maxLength ?? Infinity);
      const found = CANDIDATES.find(fits);
      if (found) return found;
    }
  }
  return 'matrix-nonexistent';
}

export interface Variant {
  /** The deployment the request names, when the operation is deployment-scoped and we can name one. */
  deployment: string | null;
  url: string;
  body: unknown;
}

/**
 * Harmless inputs: throwaway ids in the path, required query fields only, and a body that the core refuses
 * (400) for a principal holding the permission whenever `{}` would be a valid body, so nothing is ever created.
 */
export function buildVariant(op: Operation, deployment: string | null): Variant {
  let path = op.path;
  const query = new URLSearchParams();
  for (const p of op.params) {
    if (p.in === 'path') {
      const value = p.name === op.deploymentParam && deployment ? deployment : String(sampleValue(p.schema, p.name));
      path = path.replace(`{${p.name}}`, encodeURIComponent(value));
    } else if (p.in === 'query') {
      if (p.name === op.deploymentQuery && deployment) query.set(p.name, deployment);
      else if (p.required) query.set(p.name, String(sampleValue(p.schema, p.name)));
    }
  }
  let body: unknown;
  if (op.body) {
    const required = (op.body.required ?? []) as string[];
    const pathParams = op.params.some((p) => p.in === 'path');
    body = required.length === 0 && !pathParams && op.body.type === 'object' ? { matrix_probe_unknown_field: true } : {};
  }
  const qs = query.toString();
  return { deployment, url: path + (qs ? `?${qs}` : ''), body };
}

export interface MatrixPrincipal {
  name: string;
  /** Bearer token or API key; null for anonymous. */
  token: string | null;
  /** What the agent says this principal may do; null for principals that must be refused (401). */
  info: PrincipalInfo | null;
  principal: Principal | null;
}

export const matrixPrincipal = (name: string, token: string | null, info: PrincipalInfo | null): MatrixPrincipal => ({
  name,
  token,
  info,
  principal: info ? principalFrom(info) : null,
});

/** Outcome classes: a status is judged by which class it falls in. */
export type Expectation =
  { kind: 'unauthenticated' } | { kind: 'forbidden'; why: string } | { kind: 'hidden'; why: string; allowBadRequest: boolean } | { kind: 'allowed' };

/** Whether a principal limited to deployments may run an operation that names no deployment. */
export function tenancyAllows(op: Operation, p: Principal): boolean {
  if (p.isGlobal) return true;
  switch (op.tenancy) {
    case 'filtered':
    case 'own':
      return true;
    case 'catalogue':
      return op.method === 'GET';
    case 'create':
      return p.type === 'user';
    default:
      return false;
  }
}

export function expectationFor(op: Operation, who: MatrixPrincipal, variant: Variant): Expectation {
  if (op.permission === 'public') return { kind: 'allowed' };
  const p = who.principal;
  if (!p) return { kind: 'unauthenticated' };
  if (op.permission !== 'authenticated' && !p.can(op.permission)) return { kind: 'forbidden', why: `lacks ${op.permission}` };
  if (!(op.deploymentScoped && variant.deployment) && !tenancyAllows(op, p)) {
    // A deployment read from the body is looked for after validation: a harmless (invalid) body may answer 400 first.
    return op.deploymentScoped && !op.deploymentParam
      ? { kind: 'hidden', why: `${who.name} is limited to deployments (${op.tenancy})`, allowBadRequest: true }
      : { kind: 'forbidden', why: `${who.name} is limited to deployments (${op.tenancy})` };
  }
  if (op.deploymentScoped && variant.deployment) {
    const level = p.deploymentLevel(variant.deployment);
    const needed = op.deploymentLevel ?? 'read';
    // A deployment read from the query is checked after validation: other invalid fields may answer 400 first.
    const allowBadRequest = op.deploymentParam === null;
    if (!level) return { kind: 'hidden', why: `no access to ${variant.deployment}`, allowBadRequest };
    if (levelRank(level) < levelRank(needed)) return { kind: 'forbidden', why: `${level} < ${needed} on ${variant.deployment}` };
  }
  return { kind: 'allowed' };
}

/** Whether an observed status (or websocket outcome mapped to a status) meets the expectation. */
export function satisfies(expectation: Expectation, status: number): boolean {
  switch (expectation.kind) {
    case 'unauthenticated':
      return status === 401;
    case 'forbidden':
      return status === 403;
    case 'hidden':
      return status === 404 || status === 403 || (expectation.allowBadRequest && status === 400);
    case 'allowed':
      return status !== 401 && status !== 403;
  }
}
