/**
 * Tenants for the tenancy tests (backups, scheduler, observability): each a scoped operator user with a grant on its
 * deployment and an API key limited to that deployment, created through the access plugin as an admin would.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { TestAgent } from '../../../../test/helpers/agent.js';

export const TENANT_PASSWORD = 'Tenant-Pass-w0rd!';

export interface Tenant {
  username: string;
  userId: number;
  /** Token of the scoped user. */
  user: string;
  /** The raw API key (sent as a bearer), limited to `deployment`. */
  key: string;
  keyId: number;
  deployment: string;
}

export async function createUser(
  agent: TestAgent,
  username: string,
  role: 'operator' | 'viewer',
  extra: Record<string, unknown> = {},
): Promise<{ id: number; token: string }> {
  const res = await agent.api('POST', '/users', { body: { username, email: `${username}@example.test`, password: TENANT_PASSWORD, role, ...extra } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id, token: await agent.login(username, TENANT_PASSWORD) };
}

export async function grant(agent: TestAgent, userId: number, deployment: string, level: 'read' | 'write' | 'admin'): Promise<void> {
  const res = await agent.api('POST', `/users/${userId}/deployments`, { body: { deployment_name: deployment, access_level: level } });
  expect(res.status, res.text).toBe(201);
}

/** A scoped operator with `level` on `deployment`, and a key of its own limited to that deployment. */
export async function createTenant(agent: TestAgent, label: string, deployment: string, level: 'write' | 'admin' = 'write'): Promise<Tenant> {
  const username = `${label}-${randomBytes(3).toString('hex')}`;
  const { id, token } = await createUser(agent, username, 'operator');
  await grant(agent, id, deployment, level);
  // '/api/…' in full: the helper would not prefix a path that already starts with '/api'.
  const key = await agent.api('POST', '/api/apikeys', { token, body: { name: `${label}-key`, deployments: [deployment] } });
  expect(key.status, key.text).toBe(201);
  return { username, userId: id, user: token, key: key.body.data.key, keyId: key.body.data.id, deployment };
}

/** A user that an admin made global (`scope: global`): it reaches every deployment and the global state of its role. */
export async function createGlobal(agent: TestAgent, label: string, role: 'operator' | 'viewer'): Promise<string> {
  return (await createUser(agent, `${label}-${randomBytes(3).toString('hex')}`, role, { scope: 'global' })).token;
}

/** Every tenant principal: its user and its key. */
export const principalsOf = (t: Tenant): [string, string][] => [
  ['user', t.user],
  ['key', t.key],
];
