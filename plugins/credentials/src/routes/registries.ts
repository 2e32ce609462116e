/** `/api/registries`: built-in registries read-only, custom ones by slug; reads, and the changes as operations. */
import { errors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import type { RegistryOperations } from '../operations/registries.js';
import type { RegistryCatalog } from '../registries.js';
import { CreateRegistry, RegistryView, SlugParams, UpdateRegistry } from '../schemas.js';

export function registryRoutes(ctx: PluginContext, catalog: RegistryCatalog, ops: RegistryOperations): void {
  readRoutes(ctx, catalog);
  changeRoutes(ctx, ops);
}

function readRoutes(ctx: PluginContext, catalog: RegistryCatalog): void {
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
}

function changeRoutes(ctx: PluginContext, ops: RegistryOperations): void {
  ctx.route(
    operationRoute(ops.create, {
      method: 'POST',
      path: '/registries',
      permission: 'registries:write',
      tag: 'registries',
      creates: 'slug',
      status: 201,
      summary: 'Add a custom registry (a private registry, a self-hosted GitLab, …)',
      body: CreateRegistry,
      response: RegistryView,
      errors: { 409: ['REGISTRY_EXISTS'] },
      input: (req) => req.body,
      respond: (registry) => reply.created(registry, `registry '${registry.slug}' added`),
    }),
  );

  ctx.route(
    operationRoute(ops.update, {
      method: 'PUT',
      path: '/registries/:slug',
      permission: 'registries:write',
      tag: 'registries',
      summary: 'Change a custom registry (built-in ones answer 409 REGISTRY_BUILTIN)',
      description:
        'When `host` or `insecure` changes the URL the registry answers at, every credential of the registry needs its password ' +
        'again in `credentials` (400 SECRET_REENTRY_REQUIRED naming the missing ones otherwise); they are bound to the new URL.',
      params: SlugParams,
      body: UpdateRegistry,
      response: RegistryView,
      errors: { 400: ['SECRET_REENTRY_REQUIRED'], 409: ['REGISTRY_BUILTIN', 'REGISTRY_EXISTS'] },
      input: (req) => ({ ...req.body, slug: req.params.slug }),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/registries/:slug',
      permission: 'registries:write',
      tag: 'registries',
      summary: 'Remove a custom registry (409 while credentials use it)',
      params: SlugParams,
      errors: { 409: ['REGISTRY_BUILTIN', 'REGISTRY_IN_USE'] },
      input: (req) => req.params,
      respond: (slug) => reply.ok(null, `registry '${slug}' removed`),
    }),
  );
}
