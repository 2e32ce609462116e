/** How the parameters of an operation become command-line options. */
import { acceptedTypes, kebab, type Operation, type OperationParameter } from '@agent/client';

/** Option names the CLI uses itself; query parameters with these names are set with `-q name=value`. */
export const RESERVED = new Set([
  'data',
  'field',
  'query',
  'skeleton',
  'yaml',
  'plan',
  'follow',
  'output',
  'output-file',
  'detach',
  'dry-run',
  'json',
  'help',
  'profile',
  'url',
  'token',
  'refresh',
  'color',
  'no-color',
  'version',
]);

export const isBooleanParam = (p: OperationParameter) => {
  const types = acceptedTypes(p.schema);
  return types.size === 1 && types.has('boolean');
};
export const isArrayParam = (p: OperationParameter) => acceptedTypes(p.schema).has('array');

/** `--remove-files [bool]`, `--tail <value>`, or `-q name=…` when the name is taken. */
export function optionFlagFor(p: OperationParameter): string {
  const name = kebab(p.name);
  if (RESERVED.has(name) || !/^[a-z][a-z0-9-]*$/.test(name)) return `-q ${p.name}=<value>`;
  if (isBooleanParam(p)) return `--${name} [true|false]`;
  return `--${name} <value>`;
}

/**
 * Body fields the description marks for the command line (`x-cli` in their schema): `argument` ones are taken after
 * the path arguments (`agentctl deployments create NAME`), and one `set` field (a map of strings) is filled by
 * `--set KEY=VALUE` (repeatable). Marked by the agent rather than guessed here, so that no other command changes.
 */
export function cliFields(op: Operation): { bodyArguments: string[]; setField?: string } {
  const bodyArguments: string[] = [];
  let setField: string | undefined;
  // Arguments after the path's: only fields of one string value can be one.
  for (const [name, schema] of Object.entries(op.body?.properties ?? {})) {
    const mark = (schema as Record<string, unknown>)['x-cli'];
    if (mark === 'argument' && acceptedTypes(schema).has('string')) bodyArguments.push(name);
    else if (mark === 'set' && setField === undefined && !/[.[\]]/.test(name)) setField = name;
  }
  return { bodyArguments, ...(setField ? { setField } : {}) };
}
