/**
 * Where the host form connects (issue #14): a name is resolved once and the address returned is the one the driver
 * connects to (no second lookup to rebind); loopback, link-local, private and reserved addresses, IPv4-mapped ones
 * included, need a principal with global scope.
 */
import { describe, expect, it } from 'vitest';
import { principalFrom, type PrincipalInfo } from '@agent/sdk';
import { isInternal, resolveTarget } from '../src/address.js';

const base: PrincipalInfo = {
  type: 'user',
  id: 'user:2',
  name: 'ann',
  role: 'operator',
  user_id: 2,
  permissions: ['databases:write'],
  deployments: {},
  scope: 'deployments',
};
const scoped = principalFrom({ ...base, deployments: { shop: 'write' } });
const global = principalFrom({ ...base, scope: 'global', deployments: { '*': 'write' } });

describe('database target addresses', () => {
  it('tells internal addresses from public ones', () => {
    for (const a of [
      '127.0.0.1',
      '127.8.9.10',
      '10.1.2.3',
      '172.17.0.2',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      'fc12::3',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::FFFF:169.254.169.254',
    ])
      expect(isInternal(a), a).toBe(true);
    for (const a of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '192.169.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])
      expect(isInternal(a), a).toBe(false);
  });

  it('resolves a name once and answers the address to connect to', async () => {
    const address = await resolveTarget('localhost', global);
    expect(['127.0.0.1', '::1']).toContain(address);
    expect(await resolveTarget('::ffff:127.0.0.1', global)).toBe('127.0.0.1');
    expect(await resolveTarget('93.184.215.14', scoped)).toBe('93.184.215.14');
  });

  it('refuses internal targets to a principal limited to its deployments, by name or by address', async () => {
    for (const host of ['localhost', '127.0.0.1', '::ffff:127.0.0.1', '10.0.0.1', '169.254.169.254', '::1']) {
      await expect(resolveTarget(host, scoped), host).rejects.toMatchObject({ status: 403, code: 'GLOBAL_SCOPE_REQUIRED' });
    }
  });

  it('answers 424 for a name that does not resolve', async () => {
    await expect(resolveTarget('no-such-host.invalid', global)).rejects.toMatchObject({ status: 424, code: 'DB_UNREACHABLE' });
  });
});
