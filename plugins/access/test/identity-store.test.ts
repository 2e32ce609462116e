import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import argon2 from 'argon2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, request, startAgent } from '../../../test/helpers/agent.js';

const OLD_PASSWORD = 'Old-Format-Pass-9';
const OLD_KEY = 'agk_oldformatkeyoldformatkeyoldformatkey0123';

/** `core/identity.json` as agents before the SQLite store wrote it (users without `scope`, counters ahead of the ids). */
async function oldIdentityFile(): Promise<string> {
  const at = '2025-01-02T03:04:05.000Z';
  const user = (id: number, username: string, role: string, password: string) => ({
    id,
    username,
    email: `${username}@example.com`,
    role,
    permissions: [],
    is_active: true,
    created_at: at,
    updated_at: at,
    last_login_at: null,
    password_hash: '',
    token_version: 1,
    password,
  });
  const users = [user(1, 'admin', 'admin', ADMIN_PASSWORD), user(4, 'olduser', 'viewer', OLD_PASSWORD)];
  for (const u of users) u.password_hash = await argon2.hash(u.password, { type: argon2.argon2id, memoryCost: 19456, timeCost: 2, parallelism: 1 });
  return JSON.stringify({
    users: users.map(({ password: _p, ...u }) => u),
    api_keys: [
      {
        id: 2,
        user_id: 4,
        name: 'old-key',
        description: '',
        role: 'viewer',
        permissions: [],
        deployments: ['web'],
        key_prefix: OLD_KEY.slice(0, 10),
        active: true,
        created_at: at,
        expires_at: null,
        revoked_at: null,
        last_used_at: null,
        last_used_ip: null,
        key_hash: createHash('sha256').update(OLD_KEY).digest('hex'),
      },
    ],
    grants: [{ user_id: 4, deployment: 'web', access_level: 'read', granted_at: at }],
    next_user_id: 7,
    next_key_id: 3,
  });
}

const modeOf = (path: string) => statSync(path).mode & 0o777;

describe('identity store (SQLite)', () => {
  let root: string;
  let dataDir: string;
  const dbFile = () => join(dataDir, 'plugins', 'access', 'journal.sqlite');

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'identity-store-'));
    dataDir = join(root, 'data');
    mkdirSync(join(dataDir, 'core'), { recursive: true });
    writeFileSync(join(dataDir, 'core', 'identity.json'), await oldIdentityFile(), { mode: 0o644 });
    // A database file left readable to everyone (an older agent, a copy, a restore): the agent must close it.
    mkdirSync(join(dataDir, 'plugins', 'access'), { recursive: true });
    writeFileSync(dbFile(), '', { mode: 0o644 });
    chmodSync(dbFile(), 0o644);
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('imports an old identity.json on first start, renames it, and keeps its ids, keys and grants', async () => {
    const agent = await startAgent({ dataDir });
    try {
      expect(existsSync(join(dataDir, 'core', 'identity.json'))).toBe(false);
      expect(existsSync(join(dataDir, 'core', 'identity.json.migrated'))).toBe(true);
      // The admin from the file (no new one was made): the helper logged in with its old password.
      expect(agent.output()).not.toContain('First start: created user');
      const users = await agent.api('GET', '/users');
      expect(users.body.data.map((u: { id: number; username: string }) => [u.id, u.username])).toEqual([
        [1, 'admin'],
        [4, 'olduser'],
      ]);
      // A user stored before scopes existed is limited to its grants.
      const token = await agent.login('olduser', OLD_PASSWORD);
      const validated = await request(agent.url, 'GET', '/auth/validate', { token });
      expect(validated.body.data.principal).toMatchObject({ id: 'user:4', scope: 'deployments', deployments: { web: 'read' } });
      const byKey = await request(agent.url, 'GET', '/auth/validate', { token: OLD_KEY });
      expect(byKey.status).toBe(200);
      expect(byKey.body.data.principal).toMatchObject({ id: 'api_key:2', user_id: 4, deployments: { web: 'read' } });
      // Ids continue after the old counters, never reusing one.
      const newUser = { username: 'newuser', email: 'new@example.com', password: 'Str0ng-Pass-word!', role: 'viewer' };
      const created = await agent.api('POST', '/users', { body: newUser });
      expect(created.status).toBe(201);
      expect(created.body.data.id).toBe(7);
      const key = await agent.api('POST', '/apikeys', { body: { name: 'fresh', role: 'viewer' } });
      expect(key.body.data.id).toBe(3);
    } finally {
      await agent.kill();
    }
  });

  it('keeps the database owner-only (0600, with its -wal and -shm) whatever mode it had', () => {
    for (const file of [dbFile(), `${dbFile()}-wal`, `${dbFile()}-shm`]) {
      expect(existsSync(file)).toBe(true);
      expect(modeOf(file).toString(8)).toBe('600');
    }
  });

  it('keeps every acknowledged change across a kill -9, imports nothing twice, and closes a reopened file again', async () => {
    chmodSync(dbFile(), 0o644);
    // As if the last start stopped between the import and the rename: the file is there again.
    const legacy = join(dataDir, 'core', 'identity.json');
    copyFileSync(`${legacy}.migrated`, legacy);
    const agent = await startAgent({ dataDir });
    try {
      expect(modeOf(dbFile()).toString(8)).toBe('600');
      expect(existsSync(legacy)).toBe(false);
      const users = await agent.api('GET', '/users');
      expect(users.body.data.map((u: { username: string }) => u.username)).toEqual(['admin', 'olduser', 'newuser']);
      const keys = await agent.api('GET', '/apikeys');
      expect(keys.body.data.map((k: { id: number }) => k.id)).toEqual([2, 3]);
      const olduser = await agent.login('olduser', OLD_PASSWORD);
      expect((await request(agent.url, 'GET', '/auth/validate', { token: olduser })).status).toBe(200);
    } finally {
      await agent.stop();
    }
  });
});
