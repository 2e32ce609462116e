/** Reloading the template catalogue from disk, as an operation. */
import { defineOperation, Type } from '@agent/sdk';
import type { TemplateCatalog } from '../templates.js';

export type TemplateOperations = ReturnType<typeof templateOperations>;

export function templateOperations(catalog: TemplateCatalog) {
  const refresh = defineOperation({
    name: 'templates.refresh',
    input: Type.Object({}),
    resource: () => ({ type: 'templates', id: catalog.dir }),
    prepare: () => ({
      value: null,
      preview: { summary: `reload the templates from ${catalog.dir}`, changes: [{ type: 'templates', id: catalog.dir, actions: ['update'] }] },
    }),
    apply: async () => ({ ...(await catalog.load()), path: catalog.dir }),
  });
  return { refresh };
}
