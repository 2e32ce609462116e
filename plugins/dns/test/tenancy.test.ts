/**
 * Tenancy of the DNS routes (issue #14): zones are the host's, whatever deployment a record points at, so every
 * route is global. Two tenants (each a scoped user and a scoped key) are refused reads, zone creation, record
 * changes, deletion, plans of them and the server controls (403 GLOBAL_SCOPE_REQUIRED), and the real PowerDNS server
 * answers as before; a global operator still manages zones and records.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { createGlobalUser, createTenant, expectGlobalOnly, principals, type Tenant } from '../../docker/test/tenants.js';
import { dig, startPowerDns, type PowerDns } from './pdns.js';

const KEY = `test-key-${Math.random().toString(36).slice(2)}`;
const ZONE = 'tenants.example.';

describe('dns and tenants', () => {
  let agent: TestAgent;
  let pdns: PowerDns;
  let alice: Tenant;
  let bob: Tenant;
  let operator: string;

  beforeAll(async () => {
    [agent, pdns] = await Promise.all([startAgent({ plugins: ['access', 'dns', 'system'] }), startPowerDns(KEY)]);
    expect((await agent.api('PUT', '/settings', { body: { dns: { api_url: pdns.apiUrl, api_key: KEY } } })).status).toBe(200);
    [alice, bob] = await Promise.all([createTenant(agent, 'alice', ['shop']), createTenant(agent, 'bob', ['blog'])]);
    operator = await createGlobalUser(agent, 'gop');
    const zone = await agent.api('POST', '/dns/dnsserver/zones', { token: operator, body: { name: ZONE, nameservers: ['ns1.tenants.example.'] } });
    expect(zone.status, zone.text).toBe(201);
    const records = await agent.api('PATCH', `/dns/dnsserver/zones/${ZONE}`, {
      token: operator,
      body: { rrsets: [{ name: `shop.${ZONE}`, type: 'A', ttl: 60, changetype: 'REPLACE', records: [{ content: '198.51.100.1' }] }] },
    });
    expect(records.status, records.text).toBe(200);
  });
  afterAll(async () => {
    await Promise.all([agent?.stop(), pdns?.stop()]);
  });

  it('refuses every DNS route to scoped principals and changes nothing on the server', async () => {
    const serial = (await agent.api('GET', `/dns/dnsserver/zones/${ZONE}`, { token: operator })).body.data.serial;
    for (const [who, token] of [...principals(alice), ...principals(bob)]) {
      const hijack = { rrsets: [{ name: `shop.${ZONE}`, type: 'A', ttl: 60, changetype: 'REPLACE', records: [{ content: '203.0.113.66' }] }] };
      for (const [method, path, body, query] of [
        ['GET', '/dns/providers', undefined, undefined],
        ['GET', '/dns/dnsserver/status', undefined, undefined],
        ['GET', '/dns/dnsserver/zones', undefined, undefined],
        ['GET', `/dns/dnsserver/zones/${ZONE}`, undefined, undefined],
        ['POST', '/dns/dnsserver/zones', { name: `${who.split(' ')[0]}.example.`, nameservers: ['ns1.example.'] }, undefined],
        ['PATCH', `/dns/dnsserver/zones/${ZONE}`, hijack, undefined],
        ['PATCH', `/dns/dnsserver/zones/${ZONE}`, hijack, { plan: 'true' }],
        ['DELETE', `/dns/dnsserver/zones/${ZONE}`, undefined, undefined],
        ['DELETE', `/dns/dnsserver/zones/${ZONE}`, undefined, { plan: 'true' }],
        ['POST', '/dns/dnsserver/enable', undefined, undefined],
        ['POST', '/dns/dnsserver/disable', undefined, undefined],
        ['POST', '/dns/dnsserver/restart', undefined, undefined],
      ] as const)
        expectGlobalOnly(await agent.api(method, path, { token, body, query }), `${who} ${method} ${path} ${JSON.stringify(query ?? '')}`);
    }
    expect(await dig(pdns, `shop.${ZONE}`, 'A')).toEqual(['198.51.100.1']);
    const after = await agent.api('GET', '/dns/dnsserver/zones', { token: operator });
    expect(after.body.data.map((z: { name: string }) => z.name)).toEqual([ZONE]);
    expect(after.body.data[0].serial).toBe(serial);
  });

  it('lets a global operator change records', async () => {
    const res = await agent.api('PATCH', `/dns/dnsserver/zones/${ZONE}`, {
      token: operator,
      body: { rrsets: [{ name: `blog.${ZONE}`, type: 'A', ttl: 60, changetype: 'REPLACE', records: [{ content: '198.51.100.2' }] }] },
    });
    expect(res.status, res.text).toBe(200);
    expect(await dig(pdns, `blog.${ZONE}`, 'A')).toEqual(['198.51.100.2']);
  });
});
