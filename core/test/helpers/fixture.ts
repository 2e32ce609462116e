import { resolve } from 'node:path';
import { REPO_ROOT, type TestAgent } from '../../../test/helpers/agent.js';

export const FIXTURE = resolve(REPO_ROOT, 'core/test/fixtures/kernel-fixture');
export const BROKEN = resolve(REPO_ROOT, 'core/test/fixtures/broken-plugin');
export const NEEDS_MISSING = resolve(REPO_ROOT, 'core/test/fixtures/needs-missing');
export const APP_FIXTURE = resolve(REPO_ROOT, 'core/test/fixtures/app-fixture');
export const HELLO = resolve(REPO_ROOT, 'examples/hello-plugin');

let counter = 0;

/** Creates a user through the fixture plugin (limited to its grants unless `scope: 'global'`) and returns its id and a token. */
export async function makeUser(
  agent: TestAgent,
  role: 'admin' | 'operator' | 'viewer',
  extra: { permissions?: string[]; grants?: Record<string, string>; scope?: 'global' | 'deployments' } = {},
) {
  const username = `u${process.pid}x${++counter}${role}`;
  const password = 'Str0ng-Passw0rd!';
  const res = await agent.api('POST', '/fixture/users', { body: { username, password, role, ...extra } });
  if (res.status !== 201) throw new Error(`user creation failed: ${res.status} ${res.text}`);
  return { id: res.body.data.id as number, username, password, token: await agent.login(username, password) };
}
