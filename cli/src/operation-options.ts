/** How the parameters of an operation become command-line options. */
import { acceptedTypes, kebab, type OperationParameter } from '@agent/client';

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
