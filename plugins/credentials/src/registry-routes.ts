/** `/api/registries` (spec 4.16): built-in registries read-only, custom ones by slug. */
import { errors, Nullable, reply, Type, type PluginContext } from '@agent/sdk';
import { REGISTRY_HOST, REGISTRY_TYPES, SLUG, type Registry, type RegistryCatalog } from './registries.js';

const RegistryType = Type.Union(REGISTRY_TYPES.map((t) => Type.Literal(t)));
export const RegistryView = Type.Object({
  slug: Type.String(), name: Type.String(), type: RegistryType, host: Type.String(), insecure: Type.Boolean(),
  description: Type.String(), builtin: Type.Boolean(), created_at: Nullable(Type.String()), updated_at: Nullable(Type.String()),
});
const SlugParams = Type.Object({ slug: Type.String({ pattern: SLUG }) });
const Host = Type.String({ pattern: REGISTRY_HOST, description: '`host[:port]` as written in image references, e.g. `registry.example.com` or `127.0.0.1:5000`' });

export function registerRegistryRoutes(ctx: PluginContext, catalog: RegistryCatalog, inUse: (slug: string) => number): void {
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
    method: 'GET', path: '/registries', permission: 'registries:read', tag: 'registries', operationId: 'registries.list',
    summary: 'Registry configurations: the built-in hosted registries and the custom ones',
    response: Type.Array(RegistryView),
    handler: () => catalog.list(),
  });

  ctx.route({
    method: 'GET', path: '/registries/:slug', permission: 'registries:read', tag: 'registries', operationId: 'registries.get',
    summary: 'One registry configuration', params: SlugParams, response: RegistryView,
    handler: (req) => {
      const r = catalog.get(req.params.slug);
      if (!r) throw errors.notFound(`registry '${req.params.slug}' not found`);
      return r;
    },
  });

  ctx.route({
    method: 'POST', path: '/registries', permission: 'registries:write', tag: 'registries', operationId: 'registries.create', status: 201,
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
        slug: b.slug, name: b.name, type: b.type ?? 'generic', host: b.host, insecure: b.insecure ?? false,
        description: b.description ?? '', builtin: false, created_at: now, updated_at: now,
      };
      await catalog.custom.update((d) => {
        d.registries.push(registry);
      });
      return reply.created(registry, `registry '${b.slug}' added`);
    },
  });

  ctx.route({
    method: 'PUT', path: '/registries/:slug', permission: 'registries:write', tag: 'registries', operationId: 'registries.update',
    summary: 'Change a custom registry (built-in ones answer 409 REGISTRY_BUILTIN)',
    params: SlugParams,
    body: Type.Object({
      name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
      host: Type.Optional(Host),
      insecure: Type.Optional(Type.Boolean()),
      description: Type.Optional(Type.String({ maxLength: 500 })),
    }),
    response: RegistryView,
    handler: async (req) => {
      custom(req.params.slug);
      if (req.body.host) assertHostFree(req.body.host, req.params.slug);
      return catalog.custom.update((d) => {
        const r = d.registries.find((x) => x.slug === req.params.slug)!;
        Object.assign(r, req.body, { updated_at: new Date().toISOString() });
        return { ...r };
      });
    },
  });

  ctx.route({
    method: 'DELETE', path: '/registries/:slug', permission: 'registries:write', tag: 'registries', operationId: 'registries.delete',
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
