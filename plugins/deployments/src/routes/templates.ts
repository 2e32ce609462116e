/** 4.5 templates: list, categories, refresh from disk, compose content. */
import { errors, Nullable, operationRoute, Type, type PluginContext, type Static, compareText } from '@agent/sdk';
import { TEMPLATE_ID, type TemplateCatalog } from '../templates.js';
import type { TemplateOperations } from '../operations/templates.js';

const TemplateSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Type.String(),
  category: Type.String(),
  tags: Type.Array(Type.String()),
  env: Type.Array(Type.Object({ key: Type.String(), description: Type.String(), default: Type.String(), secret: Type.Boolean(), required: Type.Boolean() })),
  default_port: Nullable(Type.Integer()),
  services: Type.Array(Type.String()),
  images: Type.Array(Type.String()),
  // `format`: how the file's lines read (e.g. `nginx`), when the template says.
  log_sources: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), path: Type.String(), format: Type.Optional(Type.String()) })),
});
const IdParams = Type.Object({ id: Type.String({ pattern: TEMPLATE_ID.source, description: 'template id' }) });

const view = (t: ReturnType<TemplateCatalog['list']>[number]) => {
  const { compose_file: _file, ...rest } = t;
  return rest;
};

const TemplateCompose = Type.Object({
  id: Type.String(),
  compose_content: Type.String(),
  env: Type.Array(Type.Object({ key: Type.String(), value: Type.String(), secret: Type.Boolean(), required: Type.Boolean() })),
});

/** A template of the catalogue (once it loaded), or 404. */
async function template(catalog: TemplateCatalog, id: string) {
  await catalog.ready();
  const t = catalog.get(id);
  if (!t) throw errors.notFound(`template '${id}' not found`);
  return t;
}

async function search(catalog: TemplateCatalog, query: { category?: string; search?: string }) {
  await catalog.ready();
  const q = query.search?.toLowerCase();
  return catalog
    .list()
    .filter((t) => !query.category || t.category === query.category)
    .filter((t) => !q || [t.id, t.name, t.description, ...t.tags].some((s) => s.toLowerCase().includes(q)))
    .map(view);
}

async function categories(catalog: TemplateCatalog) {
  await catalog.ready();
  const counts = new Map<string, number>();
  for (const t of catalog.list()) counts.set(t.category, (counts.get(t.category) ?? 0) + 1);
  return [...counts].sort(([a], [b]) => compareText(a, b)).map(([category, count]) => ({ category, count }));
}

/** The compose file of a template, ready for `POST /deployments`, with the variables to fill in. */
async function composeOf(catalog: TemplateCatalog, id: string): Promise<Static<typeof TemplateCompose>> {
  const t = await template(catalog, id);
  return {
    id: t.id,
    compose_content: await catalog.compose(t.id),
    env: t.env.map((e) => ({ key: e.key, value: e.default, secret: e.secret, required: e.required })),
  };
}

export function templateRoutes(ctx: PluginContext<any>, catalog: TemplateCatalog, ops: TemplateOperations): void {
  ctx.route({
    method: 'GET',
    path: '/templates',
    permission: 'templates:read',
    operationId: 'templates.list',
    tenancy: 'catalogue',
    tag: 'templates',
    summary: 'List templates',
    query: Type.Object({
      category: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9 _-]{0,39}$' })),
      search: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'text in the id, name, description or tags' })),
    }),
    response: Type.Array(TemplateSchema),
    handler: (req) => search(catalog, req.query),
  });

  ctx.route({
    method: 'GET',
    path: '/templates/categories',
    permission: 'templates:read',
    operationId: 'templates.categories',
    tenancy: 'catalogue',
    tag: 'templates',
    summary: 'Template categories with counts',
    response: Type.Array(Type.Object({ category: Type.String(), count: Type.Integer() })),
    handler: () => categories(catalog),
  });

  ctx.route(
    operationRoute(ops.refresh, {
      method: 'POST',
      path: '/templates/refresh',
      permission: 'templates:write',
      tag: 'templates',
      summary: 'Reload templates from disk',
      description: 'Answers how many templates loaded and which folders are invalid (and why); invalid ones are skipped.',
      response: Type.Object({ count: Type.Integer(), invalid: Type.Array(Type.Object({ folder: Type.String(), error: Type.String() })), path: Type.String() }),
      input: () => ({}),
    }),
  );

  ctx.route({
    method: 'GET',
    path: '/templates/:id',
    permission: 'templates:read',
    operationId: 'templates.get',
    tenancy: 'catalogue',
    tag: 'templates',
    summary: 'One template',
    params: IdParams,
    response: TemplateSchema,
    handler: async (req) => view(await template(catalog, req.params.id)),
  });

  ctx.route({
    method: 'GET',
    path: '/templates/:id/compose',
    permission: 'templates:read',
    operationId: 'templates.compose',
    tenancy: 'catalogue',
    tag: 'templates',
    summary: 'Compose file of a template',
    description: 'Ready for `POST /api/deployments` (`compose_content`), with the env variables to fill in as `env_vars`.',
    params: IdParams,
    response: TemplateCompose,
    handler: (req) => composeOf(catalog, req.params.id),
  });
}
