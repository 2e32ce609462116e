/**
 * Turns a request's connection fields into a `ConnectionSpec`: either host/port/credentials as given (global
 * principals only: the agent would connect anywhere its network reaches), or a deployment's database service,
 * reached at its container's address, with the given login or the one of its environment.
 */
import { isIP } from 'node:net';
import { HOSTNAME, HttpError, errors, type Principal } from '@agent/sdk';
import { type DeploymentsService } from '@agent/plugin-deployments/api';
import { type DockerService } from '@agent/plugin-docker/api';
import { resolveTarget } from './address.js';
import type { ConnectionBody } from './schemas.js';
import type { ConnectionSpec, DbType } from './types.js';

const DEFAULT_PORT: Record<DbType, number> = { mysql: 3306, mariadb: 3306, postgres: 5432 };
const HOST_RE = new RegExp(HOSTNAME);

export interface ResolveDeps {
  deployments?: DeploymentsService;
  docker?: DockerService;
}

/** Guesses the engine of a container image (`postgres:16`, `bitnami/mariadb`, `mysql/mysql-server`, …). */
export function typeOfImage(image: string): DbType | null {
  const name = image.toLowerCase().replace(/[:@].*$/, '');
  if (/mariadb/.test(name)) return 'mariadb';
  if (/mysql|percona/.test(name)) return 'mysql';
  if (/postgres|postgis|timescale|pgvector|supabase\/postgres/.test(name)) return 'postgres';
  return null;
}

const envMap = (env: string[]): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const line of env) {
    const i = line.indexOf('=');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
};

/** Login of the image's conventional environment variables (official postgres/mysql/mariadb images). */
function credentialsFromEnv(type: DbType, env: Record<string, string>): { username: string; password: string; database: string | null } | null {
  if (type === 'postgres') {
    if (env.POSTGRES_PASSWORD === undefined) return null;
    return { username: env.POSTGRES_USER || 'postgres', password: env.POSTGRES_PASSWORD, database: env.POSTGRES_DB || null };
  }
  const root = env.MARIADB_ROOT_PASSWORD ?? env.MYSQL_ROOT_PASSWORD;
  const database = env.MARIADB_DATABASE || env.MYSQL_DATABASE || null;
  if (root !== undefined && root !== '') return { username: 'root', password: root, database };
  const user = env.MARIADB_USER || env.MYSQL_USER;
  const password = env.MARIADB_PASSWORD ?? env.MYSQL_PASSWORD;
  if (user && password !== undefined) return { username: user, password, database };
  return null;
}

function checkHost(host: string): string {
  const lower = host.toLowerCase();
  if (isIP(lower) || HOST_RE.test(lower)) return lower;
  throw errors.badRequest(`host: '${host}' is not a host name or an IP address`, 'VALIDATION_FAILED', { field: 'host' });
}

function checkPassword(password: string | undefined): string {
  if (password !== undefined && password.includes('\0'))
    throw errors.badRequest('password: must not contain NUL characters', 'VALIDATION_FAILED', { field: 'password' });
  return password ?? '';
}

export async function resolveConnection(body: ConnectionBody, deps: ResolveDeps, principal: Principal): Promise<ConnectionSpec> {
  const connectTimeout = body.connect_timeout ?? 10;
  if (!body.deployment) {
    // The routes already refuse this form to a scoped principal (tenancy `global`); kept here so it stays true.
    if (!principal.isGlobal) throw errors.forbidden('connecting by host needs global scope; connect by {deployment, service}', 'GLOBAL_SCOPE_REQUIRED');
    if (body.service) throw errors.badRequest('service: only with deployment', 'VALIDATION_FAILED', { field: 'service' });
    for (const field of ['type', 'host', 'username'] as const) {
      if (body[field] === undefined) throw errors.badRequest(`${field}: required (or give a deployment)`, 'VALIDATION_FAILED', { field });
    }
    const type = body.type!;
    const host = checkHost(body.host!);
    return {
      type,
      host,
      address: await resolveTarget(host, principal),
      port: body.port ?? DEFAULT_PORT[type],
      username: body.username!,
      password: checkPassword(body.password),
      database: body.database ?? null,
      connectTimeout,
    };
  }

  if (body.host) throw errors.badRequest('host: give either host or deployment, not both', 'VALIDATION_FAILED', { field: 'host' });
  const { deployments, docker } = deps;
  if (!deployments || !docker) throw errors.unavailable('connecting by deployment needs the deployments and docker plugins', 'DEPLOYMENTS_UNAVAILABLE');
  const info = deployments.get(body.deployment);
  if (!info) throw errors.notFound(`deployment '${body.deployment}' not found`);
  let service = body.service;
  if (!service) {
    service = info.services.find((s) => s.image && typeOfImage(s.image))?.name;
    if (!service)
      throw errors.badRequest(`service: deployment '${body.deployment}' has no service with a known database image; name it`, 'VALIDATION_FAILED', {
        field: 'service',
      });
  }
  const container = await deployments.serviceContainer(body.deployment, service);
  if (!container) throw errors.notFound(`service '${service}' of deployment '${body.deployment}' has no container`, 'SERVICE_NOT_FOUND');
  if (container.state !== 'running')
    throw new HttpError(409, 'SERVICE_NOT_RUNNING', `service '${service}' of deployment '${body.deployment}' is ${container.state}`);
  const type = body.type ?? typeOfImage(container.image);
  if (!type) throw errors.badRequest(`type: cannot tell the database type of image '${container.image}'; give it`, 'VALIDATION_FAILED', { field: 'type' });
  const host = Object.values(container.networks).find((ip) => ip && isIP(ip) === 4);
  if (!host) throw new HttpError(409, 'SERVICE_UNREACHABLE', `service '${service}' of deployment '${body.deployment}' has no IPv4 address on any network`);
  let username = body.username;
  let password = body.password;
  let database = body.database ?? null;
  if (username === undefined || password === undefined) {
    // The login of the environment is the deployment's secret: using it is a change-level right, like reading its .env.
    if (!principal.canAccessDeployment(body.deployment, 'write')) {
      throw errors.forbidden(
        `the login of service '${service}' comes from the environment of deployment '${body.deployment}', which needs write access to it; give username and password to connect with read access`,
      );
    }
    const details = await docker.inspectContainer(container.id);
    const found = credentialsFromEnv(type, envMap(details.env));
    if (!found && (username === undefined || password === undefined)) {
      throw errors.badRequest(`username/password: none found in the environment of service '${service}'; give them`, 'VALIDATION_FAILED', {
        field: 'username',
      });
    }
    if (found && username === undefined) {
      username = found.username;
      password ??= found.password;
    }
    if (found && password === undefined && username === found.username) password = found.password;
    database ??= found?.database ?? null;
  }
  if (password === undefined) throw errors.badRequest('password: required for this username', 'VALIDATION_FAILED', { field: 'password' });
  // The container's own address: the deployment's service, whatever network it is on (private ranges are its own here).
  return { type, host, address: host, port: body.port ?? DEFAULT_PORT[type], username: username!, password: checkPassword(password), database, connectTimeout };
}
