/**
 * A create from a template in one call (`POST /deployments {name, template, variables}`): the template's compose
 * file and its variables (defaults, then what the request sets) become the compose form of the create, which then
 * runs every check of any other create. Resolved in the operation's prepare, so a `?plan=true` preview, the request
 * and a plan's apply all resolve it the same way.
 */
import { join } from 'node:path';
import { errors, type ErrorCodes } from '@agent/sdk';
import type { TemplateCatalog } from './templates.js';

/** What a create answers besides a compose create's: the form of the request, the template and its variables. */
export const TEMPLATE_CREATE_ERRORS = {
  400: ['COMPOSE_OR_TEMPLATE', 'TEMPLATE_VARIABLE_REQUIRED', 'TEMPLATE_VARIABLE_UNKNOWN'],
  404: ['TEMPLATE_NOT_FOUND'],
} as const satisfies ErrorCodes;

/** The fields of the create request that tell its form apart. */
export interface CreateForm {
  compose_content?: string;
  env_vars?: { key: string; value: string }[];
  template?: string;
  variables?: Record<string, string>;
}

const formError = (message: string, field: string) => errors.badRequest(message, 'COMPOSE_OR_TEMPLATE', { field });

/**
 * Which form the request has: `compose` (its own compose file, `template` absent) or `template` (`template` and
 * `variables`, no compose file). Mixed forms are refused rather than guessed at: a compose file with `template` used
 * to mean "this file, labelled as that template"; now `template` alone deploys the template's own file.
 */
export function createForm(input: CreateForm): 'compose' | 'template' {
  const compose = input.compose_content !== undefined;
  const template = input.template !== undefined;
  if (compose && template)
    throw formError(
      "give either compose_content (with env_vars) or template (with variables), not both: a template create deploys the template's own compose file",
      'template',
    );
  if (!compose && !template) throw formError('give compose_content (with env_vars) or template (with variables)', 'compose_content');
  // An empty list or map sets nothing (a filled-in skeleton has both): only one with entries is the other form's.
  if (compose && Object.keys(input.variables ?? {}).length) throw formError('variables go with template; a compose file takes env_vars', 'variables');
  if (template && input.env_vars?.length) throw formError('a template takes variables ({"KEY": "value"}), not env_vars', 'env_vars');
  return compose ? 'compose' : 'template';
}

/**
 * The compose form of a template create: the template's compose file, and as `.env` every variable of the
 * template with its default or the value the request sets (empty ones left out, as compose's `${X:-default}` reads
 * them alike). 404 for a template the catalogue does not have, 400 naming a variable it does not declare or a
 * required one left empty.
 */
export async function fromTemplate(
  catalog: TemplateCatalog,
  id: string,
  variables: Record<string, string> = {},
): Promise<{ compose_content: string; env_vars: { key: string; value: string }[] }> {
  await catalog.ready();
  const template = catalog.get(id);
  if (!template) throw errors.notFound(`template '${id}' not found (GET /api/templates lists them)`, 'TEMPLATE_NOT_FOUND');
  const declared = new Set(template.env.map((e) => e.key));
  const unknown = Object.keys(variables).filter((k) => !declared.has(k));
  if (unknown.length)
    throw errors.badRequest(
      `template '${id}' has no variable ${unknown.map((k) => `'${k}'`).join(', ')} (its variables: ${[...declared].join(', ') || 'none'})`,
      'TEMPLATE_VARIABLE_UNKNOWN',
      { field: `variables.${unknown[0]!}` },
    );
  const env_vars: { key: string; value: string }[] = [];
  for (const e of template.env) {
    const value = variables[e.key] ?? e.default;
    if (e.required && value === '')
      throw errors.badRequest(`template '${id}' needs the variable '${e.key}' (${e.description || 'required'})`, 'TEMPLATE_VARIABLE_REQUIRED', {
        field: `variables.${e.key}`,
      });
    if (value !== '') env_vars.push({ key: e.key, value });
  }
  return { compose_content: await catalog.compose(id), env_vars };
}

/**
 * The files a plan of a template create depends on: a template edited between the preview and the apply makes the
 * plan stale (409 PLAN_STALE) rather than applying a file nobody previewed.
 */
export function templateFiles(catalog: TemplateCatalog, id: string): string[] {
  const template = catalog.get(id);
  return template ? [join(catalog.dir, id, 'template.json'), join(catalog.dir, id, template.compose_file)] : [];
}
