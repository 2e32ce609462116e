/**
 * `/api/credentials`: stored in a document sealed with the agent's data key (AES-256-GCM), never
 * answered in clear, and tested by really logging in to the registry they belong to.
 *
 * A secret stays bound to where it was entered: each credential keeps the registry URL its password was given for
 * (`bound_url`). Moving it elsewhere (another registry) needs the password again in the same request; a credential
 * whose registry no longer answers at that URL is neither tested nor used for pulls until its password is re-entered.
 */
import { errors, HttpError, Nullable, RecordId, reply, Secret, Type, type Document, type PluginContext } from '@agent/sdk';
import { SLUG, type Registry, type RegistryCatalog } from './registries.js';
import { registryLogin } from './registry-login.js';

export const MASK = '********';

export interface StoredCredential {
  id: number;
  name: string;
  type: 'registry';
  registry: string;
  username: string;
  password: string;
  description: string;
  created_at: string;
  updated_at: string;
  last_test: { at: string; valid: boolean; message: string } | null;
  /** The registry API URL the password was entered for: the only place it is ever sent. */
  bound_url: string;
}

export interface CredentialsDoc {
  next_id: number;
  credentials: StoredCredential[];
}

const CredentialView = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  type: Type.Literal('registry'),
  registry: Type.String({ description: 'slug of the registry configuration' }),
  registry_host: Nullable(Type.String()),
  credentials: Type.Object({ username: Type.String(), password: Type.Literal(MASK, { description: 'always masked' }) }),
  description: Type.String(),
  created_at: Type.String(),
  updated_at: Type.String(),
  last_test: Nullable(Type.Object({ at: Type.String(), valid: Type.Boolean(), message: Type.String() })),
  bound_url: Type.String({ description: 'the registry URL the password was entered for: it is sent nowhere else' }),
  bound: Type.Boolean({ description: 'false when the registry now answers at another URL: re-enter the password to use the credential there' }),
});

const IdParams = Type.Object({ id: RecordId('credential id') });
const Name = Type.String({ minLength: 1, maxLength: 100 });
const Username = Type.String({ minLength: 1, maxLength: 256, pattern: '^[^\\s:]+$', description: 'no spaces or colons' });

/** The URL a credential's password would go to now, or null when its registry is gone. */
export const currentUrl = (catalog: RegistryCatalog, c: StoredCredential): string | null => {
  const registry = catalog.get(c.registry);
  return registry ? catalog.apiBase(registry) : null;
};

/** Whether the credential may be sent to its registry: it answers at the URL the password was entered for. */
export const isBound = (catalog: RegistryCatalog, c: StoredCredential): boolean => currentUrl(catalog, c) === c.bound_url;

/** A password sent in clear (not absent, not the mask read back): the secret is entered again. */
export const reentered = (password: string | undefined): password is string => password !== undefined && password !== MASK;

export const reentryRequired = (message: string, credentials: number[], status = 400) =>
  new HttpError(status, 'SECRET_REENTRY_REQUIRED', message, { credentials });

export function registerCredentialRoutes(ctx: PluginContext, doc: Document<CredentialsDoc>, catalog: RegistryCatalog): void {
  const view = (c: StoredCredential) => ({
    id: c.id,
    name: c.name,
    type: c.type,
    registry: c.registry,
    registry_host: catalog.get(c.registry)?.host ?? null,
    credentials: { username: c.username, password: MASK as typeof MASK },
    description: c.description,
    created_at: c.created_at,
    updated_at: c.updated_at,
    last_test: c.last_test,
    bound_url: c.bound_url,
    bound: isBound(catalog, c),
  });
  const find = (id: number): StoredCredential => {
    const c = doc.data.credentials.find((x) => x.id === id);
    if (!c) throw errors.notFound(`credential ${id} not found`);
    return c;
  };
  const assertRegistry = (slug: string): Registry => {
    const registry = catalog.get(slug);
    if (!registry) throw errors.badRequest(`body.registry: unknown registry '${slug}'`, 'UNKNOWN_REGISTRY', { field: 'registry' });
    return registry;
  };
  const assertNameFree = (name: string, except?: number) => {
    if (doc.data.credentials.some((c) => c.name === name && c.id !== except)) throw errors.conflict(`credential '${name}' exists`, 'CREDENTIAL_EXISTS');
  };

  ctx.route({
    method: 'GET',
    path: '/credentials',
    permission: 'credentials:read',
    tag: 'credentials',
    operationId: 'credentials.list',
    summary: 'Stored credentials (passwords masked)',
    query: Type.Object({ registry: Type.Optional(Type.String({ pattern: SLUG })) }),
    response: Type.Array(CredentialView),
    handler: (req) => doc.data.credentials.filter((c) => !req.query.registry || c.registry === req.query.registry).map(view),
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
    handler: (req) => view(find(req.params.id)),
  });

  ctx.route({
    method: 'POST',
    path: '/credentials',
    permission: 'credentials:write',
    tag: 'credentials',
    operationId: 'credentials.create',
    creates: 'id',
    status: 201,
    summary: 'Store a credential (encrypted at rest)',
    description:
      'A `registry` credential belongs to a registry configuration (`registry`, a slug; default `dockerhub`). Image pulls from that registry use it.',
    body: Type.Object({
      name: Name,
      type: Type.Literal('registry'),
      registry: Type.Optional(Type.String({ pattern: SLUG, default: 'dockerhub' })),
      credentials: Type.Object({ username: Username, password: Secret({ minLength: 1, maxLength: 4096 }) }),
      description: Type.Optional(Type.String({ maxLength: 500 })),
    }),
    response: CredentialView,
    handler: async (req) => {
      const b = req.body;
      const registry = b.registry ?? 'dockerhub';
      const target = assertRegistry(registry);
      assertNameFree(b.name);
      if (!reentered(b.credentials.password))
        throw errors.badRequest('credentials.password: the mask is not a password', 'VALIDATION_FAILED', { field: 'credentials.password' });
      const now = new Date().toISOString();
      const created = await doc.update((d) => {
        const c: StoredCredential = {
          id: d.next_id++,
          name: b.name,
          type: 'registry',
          registry,
          username: b.credentials.username,
          password: b.credentials.password,
          description: b.description ?? '',
          created_at: now,
          updated_at: now,
          last_test: null,
          bound_url: catalog.apiBase(target),
        };
        d.credentials.push(c);
        return c;
      });
      return reply.created(view(created), `credential '${created.name}' stored`);
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/credentials/:id',
    permission: 'credentials:write',
    tag: 'credentials',
    operationId: 'credentials.update',
    summary: 'Change a credential; a password left out (or sent back masked) is kept',
    description:
      'Moving a credential to another registry needs its password in the same request (400 SECRET_REENTRY_REQUIRED otherwise): ' +
      "a secret is only ever sent where it was entered. A re-entered password binds the credential to its registry's current URL.",
    params: IdParams,
    body: Type.Object({
      name: Type.Optional(Name),
      registry: Type.Optional(Type.String({ pattern: SLUG })),
      credentials: Type.Optional(Type.Object({ username: Type.Optional(Username), password: Type.Optional(Secret({ minLength: 1, maxLength: 4096 })) })),
      description: Type.Optional(Type.String({ maxLength: 500 })),
    }),
    response: CredentialView,
    handler: async (req) => {
      const current = find(req.params.id);
      const b = req.body;
      const registry = assertRegistry(b.registry ?? current.registry);
      if (b.name) assertNameFree(b.name, current.id);
      const password = b.credentials?.password;
      if (b.registry !== undefined && b.registry !== current.registry && !reentered(password)) {
        throw reentryRequired(
          `credential '${current.name}': moving it to registry '${b.registry}' sends its password to ${catalog.apiBase(registry)}; ` +
            'enter the password again in the same request (credentials.password)',
          [current.id],
        );
      }
      const updated = await doc.update((d) => {
        const c = d.credentials.find((x) => x.id === current.id)!;
        if (b.name !== undefined) c.name = b.name;
        if (b.registry !== undefined) c.registry = b.registry;
        if (b.description !== undefined) c.description = b.description;
        const secretChanged =
          (b.credentials?.username !== undefined && b.credentials.username !== c.username) || (reentered(password) && password !== c.password);
        if (b.credentials?.username !== undefined) c.username = b.credentials.username;
        if (reentered(password)) {
          c.password = password;
          c.bound_url = catalog.apiBase(registry);
        }
        // The last test says nothing about a changed username, password or registry.
        if (secretChanged || b.registry !== undefined) c.last_test = null;
        c.updated_at = new Date().toISOString();
        return c;
      });
      return view(updated);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/credentials/:id',
    permission: 'credentials:write',
    tag: 'credentials',
    operationId: 'credentials.delete',
    summary: 'Delete a credential',
    params: IdParams,
    handler: async (req) => {
      const c = find(req.params.id);
      await doc.update((d) => {
        d.credentials = d.credentials.filter((x) => x.id !== c.id);
      });
      return reply.ok(null, `credential '${c.name}' deleted`);
    },
  });

  ctx.route({
    method: 'POST',
    path: '/credentials/:id/test',
    permission: 'credentials:write',
    tag: 'credentials',
    operationId: 'credentials.test',
    summary: 'Test a credential: log in to its registry (answers `valid: false` with the reason when refused)',
    description: 'Only against the URL the password was entered for: when the registry now answers elsewhere, 409 SECRET_REENTRY_REQUIRED and nothing is sent.',
    params: IdParams,
    response: Type.Object({ valid: Type.Boolean(), message: Type.String(), registry: Type.String(), url: Type.String(), status: Nullable(Type.Integer()) }),
    handler: async (req) => {
      const c = find(req.params.id);
      const registry = catalog.get(c.registry);
      if (!registry) throw errors.conflict(`registry '${c.registry}' of this credential no longer exists`, 'UNKNOWN_REGISTRY');
      const url = catalog.apiBase(registry);
      if (url !== c.bound_url) {
        throw reentryRequired(
          `credential '${c.name}': its password was entered for ${c.bound_url}, registry '${registry.slug}' now answers at ${url}; ` +
            'enter the password again (PUT /api/credentials/:id) before it is sent there',
          [c.id],
          409,
        );
      }
      const result = await registryLogin(url, c.username, c.password, req.signal);
      await doc.update((d) => {
        const stored = d.credentials.find((x) => x.id === c.id);
        if (stored) stored.last_test = { at: new Date().toISOString(), valid: result.valid, message: result.message };
      });
      return reply.ok({ ...result, registry: registry.slug, url }, result.valid ? 'credential valid' : 'credential refused');
    },
  });
}
