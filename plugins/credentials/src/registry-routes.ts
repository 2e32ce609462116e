/**
 * `/api/registries`: built-in registries read-only, custom ones by slug. Changing where a registry answers
 * (its host, or plain HTTP) while credentials use it needs their passwords again in the same request: a secret is
 * only ever sent to the URL it was entered for.
 */
import { errors, Nullable, RecordId, reply, Secret, Type, type Document, type PluginContext } from '@agent/sdk';
import { REGISTRY_HOST, REGISTRY_TYPES, SLUG, type Registry, type RegistryCatalog } from './registries.js';
import { reentered, reentryRequired, type CredentialsDoc } from './credential-routes.js';

const RegistryType = Type.Union(REGISTRY_TYPES.map((t) => Type.Literal(t)));
export const RegistryView = Type.Object({
  slug: Type.String(),
  name: Type.String(),
  type: RegistryType,
  host: Type.String(),
  insecure: Type.Boolean(),
  description: Type.String(),
  builtin: Type.Boolean(),
  created_at: Nullable(Type.String()),
  updated_at: Nullable(Type.String()),
});
const SlugParams = Type.Object({ slug: Type.String({ pattern: SLUG }) });
const Host = Type.String({
  pattern: REGISTRY_HOST,
  description: '`host[:port]` as written in image references, e.g. `registry.example.com` or `127.0.0.1:5000`',
});

export function registerRegistryRoutes(ctx: PluginContext, catalog: RegistryCatalog, credentials: Document<CredentialsDoc>): void {
  const inUse = (slug: string) => credentials.data.credentials.filter((c) => c.registry === slug).length;
  const custom = (slug: string): Registry => {
    const r = catalog.get(slug);
    if (!r) throw errors.notFound(`registry '${slug}' not found`);
    if (r.builtin) throw errors.conflict(`registry '${slug}' is built in and read-only`, 'REGISTRY_BUILTIN');
    return r;
  };
  const assertHostFree = (host: string, except?: string) => {
    const clash = catalog.list().find((r) => r.host === host && r.slug !== except);
    if (clash) throw errors.conflict(`host '${host}' is already configured as registry '${clash.slug}'`, 'REGISTRY_EXISTS');
  };

  ctx.route({
    method: 'GET',
    path: '/registries',
    permission: 'registries:read',
    tag: 'registries',
    operationId: 'registries.list',
    summary: 'Registry configurations: the built-in hosted registries and the custom ones',
    response: Type.Array(RegistryView),
    handler: () => catalog.list(),
  });

  ctx.route({
    method: 'GET',
    path: '/registries/:slug',
    permission: 'registries:read',
    tag: 'registries',
    operationId: 'registries.get',
    summary: 'One registry configuration',
    params: SlugParams,
    response: RegistryView,
    handler: (req) => {
      const r = catalog.get(req.params.slug);
      if (!r) throw errors.notFound(`registry '${req.params.slug}' not found`);
      return r;
    },
  });

  ctx.route({
    method: 'POST',
    path: '/registries',
    permission: 'registries:write',
    tag: 'registries',
    operationId: 'registries.create',
    creates: 'slug',
    status: 201,
    summary: 'Add a custom registry (a private registry, a self-hosted GitLab, …)',
    body: Type.Object({
      slug: Type.String({ pattern: SLUG }),
      name: Type.String({ minLength: 1, maxLength: 100 }),
      host: Host,
      type: Type.Optional(Type.Union([Type.Literal('generic'), Type.Literal('gitlab')], { default: 'generic' })),
      insecure: Type.Optional(Type.Boolean({ default: false, description: 'plain HTTP (loopback registries always use HTTP)' })),
      description: Type.Optional(Type.String({ maxLength: 500 })),
    }),
    response: RegistryView,
    handler: async (req) => {
      const b = req.body;
      if (catalog.get(b.slug)) throw errors.conflict(`registry '${b.slug}' exists`, 'REGISTRY_EXISTS');
      assertHostFree(b.host);
      const now = new Date().toISOString();
      const registry: Registry = {
        slug: b.slug,
        name: b.name,
        type: b.type ?? 'generic',
        host: b.host,
        insecure: b.insecure ?? false,
        description: b.description ?? '',
        builtin: false,
        created_at: now,
        updated_at: now,
      };
      await catalog.custom.update((d) => {
        d.registries.push(registry);
      });
      return reply.created(registry, `registry '${b.slug}' added`);
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/registries/:slug',
    permission: 'registries:write',
    tag: 'registries',
    operationId: 'registries.update',
    summary: 'Change a custom registry (built-in ones answer 409 REGISTRY_BUILTIN)',
    description:
      'When `host` or `insecure` changes the URL the registry answers at, every credential of the registry needs its password ' +
      'again in `credentials` (400 SECRET_REENTRY_REQUIRED naming the missing ones otherwise); they are bound to the new URL.',
    params: SlugParams,
    body: Type.Object({
      name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
      host: Type.Optional(Host),
      insecure: Type.Optional(Type.Boolean()),
      description: Type.Optional(Type.String({ maxLength: 500 })),
      credentials: Type.Optional(
        Type.Array(
          Type.Object({
            id: RecordId('a credential of this registry'),
            password: Secret({ minLength: 1, maxLength: 4096, description: 'its password, entered again for the new URL' }),
          }),
          { maxItems: 100, description: "passwords of this registry's credentials, re-entered when the URL changes" },
        ),
      ),
    }),
    response: RegistryView,
    handler: async (req) => {
      const before = custom(req.params.slug);
      const { credentials: given = [], ...changes } = req.body;
      if (changes.host) assertHostFree(changes.host, req.params.slug);
      const after = { ...before, ...changes };
      const url = catalog.apiBase(after);
      const mine = credentials.data.credentials.filter((c) => c.registry === before.slug).map((c) => c.id);
      const passwords = new Map<number, string>();
      for (const [i, g] of given.entries()) {
        if (!mine.includes(g.id))
          throw errors.badRequest(`body.credentials[${i}].id: credential ${g.id} does not belong to registry '${before.slug}'`, 'VALIDATION_FAILED', {
            field: `credentials[${i}].id`,
          });
        if (!reentered(g.password))
          throw errors.badRequest(`body.credentials[${i}].password: the mask is not a password`, 'VALIDATION_FAILED', { field: `credentials[${i}].password` });
        passwords.set(g.id, g.password);
      }
      if (url !== catalog.apiBase(before)) {
        const missing = mine.filter((id) => !passwords.has(id));
        if (missing.length) {
          throw reentryRequired(
            `registry '${before.slug}' would answer at ${url}: its credential(s) ${missing.join(', ')} were entered for ${catalog.apiBase(before)}; ` +
              'send their passwords again in credentials: [{id, password}]',
            missing,
          );
        }
      }
      const updated = await catalog.custom.update((d) => {
        const r = d.registries.find((x) => x.slug === req.params.slug)!;
        Object.assign(r, changes, { updated_at: new Date().toISOString() });
        return { ...r };
      });
      if (passwords.size) {
        // After the registry: should this write fail, the credentials stay bound to the old URL and are not sent.
        await credentials.update((d) => {
          for (const c of d.credentials) {
            const password = passwords.get(c.id);
            if (password === undefined) continue;
            if (password !== c.password || c.bound_url !== url) c.last_test = null;
            c.password = password;
            c.bound_url = url;
            c.updated_at = updated.updated_at ?? new Date().toISOString();
          }
        });
      }
      return updated;
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/registries/:slug',
    permission: 'registries:write',
    tag: 'registries',
    operationId: 'registries.delete',
    summary: 'Remove a custom registry (409 while credentials use it)',
    params: SlugParams,
    handler: async (req) => {
      custom(req.params.slug);
      const users = inUse(req.params.slug);
      if (users > 0) throw errors.conflict(`registry '${req.params.slug}' is used by ${users} credential(s)`, 'REGISTRY_IN_USE');
      await catalog.custom.update((d) => {
        d.registries = d.registries.filter((r) => r.slug !== req.params.slug);
      });
      return reply.ok(null, `registry '${req.params.slug}' removed`);
    },
  });
}
