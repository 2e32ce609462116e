/**
 * Secrets of a swarm stack from the deployment's `.env`. A top-level secret with `environment: VAR` (the compose
 * spec's spelling, which compose v2 keeps in its model) or `x-agent-env: VAR` (compose v1 refuses `environment`
 * there, so the agent reads an extension key of its own) becomes a Swarm secret that the agent creates from the
 * variable's value through the engine API: the value is never written to a file, and the stack file names the
 * secret as an external one. `file:` secrets stay what the host-safety policy allows (inside the folder), and
 * `external:` ones (another stack's) stay refused: the model checked is the file as written.
 *
 * Swarm secrets are immutable: the name carries a keyed digest of the value, so a new value is a new secret (the
 * deploy updates the services that use it) and the old one is removed once the stack converged (`pruneSecrets`).
 * The digest is keyed with a random key of the guard's own (its folder, mode 0600): a secret's name tells nothing
 * of its value, however short the value is.
 */
import { createHmac } from 'node:crypto';
import { errors } from '@agent/sdk';
import type { ModelNode } from './policy.js';

/** The extension key naming the `.env` variable of a secret (also kept in the model that runs: see `secretValues`). */
export const SECRET_ENV_KEY = 'x-agent-env';
/** The label of secrets the agent created for a stack: the secret's key in the compose file. */
export const SECRET_LABEL = 'agent.stack-secret';

const VARIABLE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Swarm's own limit of object names. */
const MAX_NAME = 64;

const isMap = (v: unknown): v is ModelNode => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Rewrites the env-sourced secrets of a model that runs as a stack into external secrets named
 * `<project>_<key>_<digest>`. 400 INVALID_COMPOSE for a secret with another source besides the variable, or a
 * variable the `.env` lacks.
 */
export function withEnvSecrets(model: ModelNode, project: string, env: Readonly<Record<string, string>>, key: Buffer): void {
  if (!isMap(model.secrets)) return;
  for (const [name, def] of Object.entries(model.secrets)) {
    if (!isMap(def)) continue;
    const variable = def[SECRET_ENV_KEY] ?? def.environment;
    if (variable === undefined) continue;
    const field = `secrets.${name}`;
    if (typeof variable !== 'string' || !VARIABLE.test(variable))
      throw errors.badRequest(`${field}: the variable of a secret must be a variable name`, 'INVALID_COMPOSE', { field: 'compose_content' });
    const own = def[SECRET_ENV_KEY] !== undefined ? SECRET_ENV_KEY : 'environment';
    const other = ['file', 'external', 'content', 'environment', SECRET_ENV_KEY].filter((k) => k !== own && def[k] !== undefined);
    if (other.length)
      throw errors.badRequest(`${field}: a secret from the .env has no other source (${other.join(', ')})`, 'INVALID_COMPOSE', { field: 'compose_content' });
    const value = env[variable];
    if (value === undefined)
      throw errors.badRequest(`${field}: the variable '${variable}' is not in the deployment's .env`, 'INVALID_COMPOSE', { field: 'compose_content' });
    const digest = createHmac('sha256', key).update(`${project}\0${name}\0${value}`).digest('hex').slice(0, 12);
    model.secrets[name] = { name: `${`${project}_${name}`.slice(0, MAX_NAME - 13)}_${digest}`, external: true, [SECRET_ENV_KEY]: variable };
  }
}

/** The secrets of a model that runs as a stack that the agent creates: their key, name and variable. */
export function envSecretsOf(model: Readonly<ModelNode>): { key: string; name: string; variable: string }[] {
  if (!isMap(model.secrets)) return [];
  return Object.entries(model.secrets)
    .filter((e): e is [string, ModelNode] => isMap(e[1]) && typeof e[1][SECRET_ENV_KEY] === 'string' && typeof e[1].name === 'string')
    .map(([key, def]) => ({ key, name: String(def.name), variable: String(def[SECRET_ENV_KEY]) }));
}

/** The value of each such secret, by name (in memory only: never written anywhere). */
export function secretValues(model: Readonly<ModelNode>, env: Readonly<Record<string, string>>): Map<string, string> {
  const out = new Map<string, string>();
  for (const s of envSecretsOf(model)) if (env[s.variable] !== undefined) out.set(s.name, env[s.variable]!);
  return out;
}
