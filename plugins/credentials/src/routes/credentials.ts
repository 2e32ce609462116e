/** `/api/credentials`: reads (passwords masked), and the changes and the test as operations. */
import { operationRoute, reply, Type, type Document, type PluginContext } from '@agent/sdk';
import { credentialView, findCredential, type CredentialsDoc } from '../credentials.js';
import type { CredentialOperations } from '../operations/credentials.js';
import { SLUG, type RegistryCatalog } from '../registries.js';
import { CreateCredential, CredentialView, IdParams, TestResult, UpdateCredential } from '../schemas.js';

export function credentialRoutes(ctx: PluginContext, doc: Document<CredentialsDoc>, catalog: RegistryCatalog, ops: CredentialOperations): void {
  readRoutes(ctx, doc, catalog);
  changeRoutes(ctx, ops);
}

function readRoutes(ctx: PluginContext, doc: Document<CredentialsDoc>, catalog: RegistryCatalog): void {
  ctx.route({
    method: 'GET',
    path: '/credentials',
    permission: 'credentials:read',
    tag: 'credentials',
    operationId: 'credentials.list',
    summary: 'Stored credentials (passwords masked)',
    query: Type.Object({ registry: Type.Optional(Type.String({ pattern: SLUG })) }),
    response: Type.Array(CredentialView),
    handler: (req) => doc.data.credentials.filter((c) => !req.query.registry || c.registry === req.query.registry).map((c) => credentialView(catalog, c)),
  });

  ctx.route({
    method: 'GET',
    path: '/credentials/:id',
    permission: 'credentials:read',
    tag: 'credentials',
    operationId: 'credentials.get',
    summary: 'One credential (password masked)',
    params: IdParams,
    response: CredentialView,
    handler: (req) => credentialView(catalog, findCredential(doc, req.params.id)),
  });
}

function changeRoutes(ctx: PluginContext, ops: CredentialOperations): void {
  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/credentials',
      permission: 'credentials:write',
      tag: 'credentials',
      creates: 'id',
      status: 201,
      summary: 'Store a credential (encrypted at rest)',
      description:
        'A `registry` credential belongs to a registry configuration (`registry`, a slug; default `dockerhub`). Image pulls from that registry use it.',
      body: CreateCredential,
      response: CredentialView,
      errors: { 400: ['UNKNOWN_REGISTRY'], 409: ['CREDENTIAL_EXISTS'] },
      input: (req) => req.body,
      respond: (created) => reply.created(created, `credential '${created.name}' stored`),
    }),
  );

  ctx.route(
    operationRoute(ops.update, {
      method: 'PUT',
      path: '/credentials/:id',
      permission: 'credentials:write',
      tag: 'credentials',
      summary: 'Change a credential; a password left out (or sent back masked) is kept',
      description:
        'Moving a credential to another registry needs its password in the same request (400 SECRET_REENTRY_REQUIRED otherwise): ' +
        "a secret is only ever sent where it was entered. A re-entered password binds the credential to its registry's current URL.",
      params: IdParams,
      body: UpdateCredential,
      response: CredentialView,
      // Moved to another registry without its password (credentials.ts `reentryRequired`).
      errors: { 400: ['SECRET_REENTRY_REQUIRED', 'UNKNOWN_REGISTRY'], 409: ['CREDENTIAL_EXISTS'] },
      input: (req) => ({ ...req.body, id: req.params.id }),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/credentials/:id',
      permission: 'credentials:write',
      tag: 'credentials',
      summary: 'Delete a credential',
      params: IdParams,
      input: (req) => req.params,
      respond: (c) => reply.ok(null, `credential '${c.name}' deleted`),
    }),
  );

  ctx.route(
    operationRoute(ops.test, {
      method: 'POST',
      path: '/credentials/:id/test',
      permission: 'credentials:write',
      tag: 'credentials',
      summary: 'Test a credential: log in to its registry (answers `valid: false` with the reason when refused)',
      description:
        'Only against the URL the password was entered for: when the registry now answers elsewhere, 409 SECRET_REENTRY_REQUIRED and nothing is sent.',
      params: IdParams,
      response: TestResult,
      // Its registry removed, or answering at another URL than the one its password was entered for.
      errors: { 409: ['SECRET_REENTRY_REQUIRED', 'UNKNOWN_REGISTRY'] },
      input: (req) => req.params,
      respond: (result) => reply.ok(result, result.valid ? 'credential valid' : 'credential refused'),
    }),
  );
}
