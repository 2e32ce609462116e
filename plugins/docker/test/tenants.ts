/**
 * Principals of the tenancy tests (issue #14), made through the real API (the access plugin must be enabled):
 * a tenant is a scoped operator (`POST /users` with the default scope, then grants) plus an API key limited to the
 * tenant's deployments, minted with the tenant's own token; a global operator is a user made `scope: global`.
 * Used by the tests of the docker, infrastructure, notifications, credentials, databases, dashboards, system and
 * dns plugins.
 */
import { expect } from 'vitest';
import type { TestAgent } from '../../../test/helpers/agent.js';

export const TENANT_PASSWORD = 'Tenant-Pass-2024!x';

export interface Tenant {
  name: string;
  deployments: string[];
  /** Token of the scoped user. */
  user: string;
  /** A scoped API key of that user, limited to its deployments. */
  key: string;
}

async function createUser(agent: TestAgent, username: string, body: Record<string, unknown>): Promise<number> {
  const res = await agent.api('POST', '/users', { body: { username, email: `${username}@example.org`, password: TENANT_PASSWORD, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id as number;
}

/** A scoped operator with `level` on each deployment, and a key of its own limited to them. */
export async function createTenant(agent: TestAgent, name: string, deployments: string[], level: 'read' | 'write' = 'write'): Promise<Tenant> {
  const id = await createUser(agent, name, { role: 'operator' });
  for (const deployment of deployments) {
    const grant = await agent.api('POST', `/users/${id}/deployments`, { body: { deployment_name: deployment, access_level: level } });
    expect(grant.status, grant.text).toBe(201);
  }
  const user = await agent.login(name, TENANT_PASSWORD);
  const me = await agent.api('GET', '/users/me', { token: user });
  expect(me.body.data.scope).toBe('deployments');
  const key = await agent.api('POST', '/api/apikeys', { token: user, body: { name: `${name}-key`, deployments } });
  expect(key.status, key.text).toBe(201);
  return { name, deployments, user, key: key.body.data.key as string };
}

/** A user with global scope (`role` operator by default): it runs the host's shared state. */
export async function createGlobalUser(
  agent: TestAgent,
  name: string,
  role: 'operator' | 'viewer' = 'operator',
  extra: Record<string, unknown> = {},
): Promise<string> {
  await createUser(agent, name, { role, scope: 'global', ...extra });
  return agent.login(name, TENANT_PASSWORD);
}

/** Both principals of a tenant, labelled for assertion messages. */
export const principals = (t: Tenant): [string, string][] => [
  [`${t.name} (user)`, t.user],
  [`${t.name} (key)`, t.key],
];

/** Asserts 403 GLOBAL_SCOPE_REQUIRED. */
export function expectGlobalOnly(res: { status: number; body: any; text: string }, what: string): void {
  expect(res.status, `${what}: ${res.text}`).toBe(403);
  expect(res.body.code, what).toBe('GLOBAL_SCOPE_REQUIRED');
}
