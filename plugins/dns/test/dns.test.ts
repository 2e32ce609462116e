/**
 * DNS through a real PowerDNS (pdns-server + sqlite3 backend) on loopback: zones and records are created through
 * the agent and checked with dig against that server.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { dig, startPowerDns, type PowerDns } from './pdns.js';

const KEY = `test-key-${Math.random().toString(36).slice(2)}`;
const ZONE = 'agent-test.example.';
let agent: TestAgent;
let pdns: PowerDns;

beforeAll(async () => {
  [agent, pdns] = await Promise.all([startAgent({ plugins: ['dns', 'system'] }), startPowerDns(KEY)]);
});

afterAll(async () => {
  await Promise.all([agent?.stop(), pdns?.stop()]);
});

const patch = (rrsets: unknown[], query?: Record<string, string>) => agent.api('PATCH', `/dns/dnsserver/zones/${ZONE}`, { body: { rrsets }, query });

describe('dns settings and status', () => {
  it('generates an API key at first start and keeps it encrypted', async () => {
    const res = await agent.api('GET', '/settings');
    expect(res.status).toBe(200);
    expect(res.body.data.values.dns.api_key).toBe('[redacted]');
    const stored = JSON.parse(readFileSync(join(agent.dataDir, 'core', 'settings.json'), 'utf8'));
    expect(stored.values.dns.api_key).toMatch(/^v1\./);
  });

  it('reports an unreachable server, then a refused key, then the real status', async () => {
    const set = (values: Record<string, unknown>) => agent.api('PUT', '/settings', { body: { dns: values } });
    expect((await set({ api_url: 'http://127.0.0.1:9' })).status).toBe(200);
    let status = await agent.api('GET', '/dns/dnsserver/status');
    expect(status.status).toBe(200);
    expect(status.body.data).toMatchObject({ reachable: false, version: null, zone_count: null, error: expect.stringContaining('not reachable') });
    const zones = await agent.api('GET', '/dns/dnsserver/zones');
    expect(zones.status).toBe(503);
    expect(zones.body.code).toBe('DNS_SERVER_UNREACHABLE');

    await set({ api_url: pdns.apiUrl });
    status = await agent.api('GET', '/dns/dnsserver/status');
    expect(status.body.data).toMatchObject({ reachable: true, version: null, error: expect.stringContaining('API key') });
    const refused = await agent.api('GET', '/dns/dnsserver/zones');
    expect(refused.status).toBe(502);
    expect(refused.body.code).toBe('DNS_SERVER_AUTH_FAILED');

    await set({ api_key: KEY });
    // A key set in clear is sealed right after the change.
    await expect.poll(() => readFileSync(join(agent.dataDir, 'core', 'settings.json'), 'utf8')).not.toContain(KEY);
    status = await agent.api('GET', '/dns/dnsserver/status');
    expect(status.body.data).toMatchObject({
      provider: 'powerdns',
      reachable: true,
      version: expect.stringMatching(/^\d+\.\d+/),
      zone_count: 0,
      error: null,
      service: null,
    });
  });

  it('lists the supported providers and the fields each needs', async () => {
    const res = await agent.api('GET', '/dns/providers');
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([expect.objectContaining({ name: 'powerdns', segment: 'dnsserver' })]);
    expect(res.body.data[0].fields.map((f: { name: string }) => f.name)).toEqual(['api_url', 'api_key', 'server_id']);
    expect(res.body.data[0].fields[1]).toMatchObject({ secret: true, required: true });
  });

  it('answers 503 for enable/disable/restart without the infrastructure plugin', async () => {
    for (const verb of ['enable', 'disable', 'restart']) {
      const res = await agent.api('POST', `/dns/dnsserver/${verb}`);
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('INFRASTRUCTURE_UNAVAILABLE');
    }
  });
});

describe('dns zones and records against pdns', () => {
  it('creates a zone (201), refuses a duplicate (409) and lists it', async () => {
    const created = await agent.api('POST', '/dns/dnsserver/zones', {
      body: { name: ZONE, kind: 'Native', nameservers: ['ns1.agent-test.example.', 'ns2.agent-test.example.'] },
    });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ id: ZONE, name: ZONE, kind: 'Native', nameservers: ['ns1.agent-test.example.', 'ns2.agent-test.example.'] });
    expect(created.body.data.rrsets.map((r: { type: string }) => r.type).sort()).toEqual(['NS', 'SOA']);

    const again = await agent.api('POST', '/dns/dnsserver/zones', { body: { name: ZONE, nameservers: ['ns1.agent-test.example.'] } });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('ZONE_EXISTS');

    const list = await agent.api('GET', '/dns/dnsserver/zones');
    expect(list.body.data).toEqual([expect.objectContaining({ name: ZONE, kind: 'Native', serial: expect.any(Number) })]);
    expect(await dig(pdns, ZONE, 'NS')).toEqual(['ns1.agent-test.example.', 'ns2.agent-test.example.']);
  });

  it('replaces record sets of every supported type and they resolve with dig', async () => {
    const res = await patch([
      { name: `www.${ZONE}`, type: 'A', ttl: 300, changetype: 'REPLACE', records: [{ content: '192.0.2.10' }, { content: '192.0.2.11' }] },
      { name: `www.${ZONE}`, type: 'AAAA', ttl: 300, changetype: 'REPLACE', records: [{ content: '2001:DB8::10' }] },
      { name: `app.${ZONE}`, type: 'CNAME', ttl: 300, changetype: 'REPLACE', records: [{ content: `www.${ZONE}` }] },
      { name: ZONE, type: 'MX', ttl: 300, changetype: 'REPLACE', records: [{ content: `10 mail.${ZONE}` }] },
      { name: ZONE, type: 'TXT', ttl: 300, changetype: 'REPLACE', records: [{ content: '"v=spf1 -all"' }, { content: 'plain "quoted" text' }] },
      { name: `_sip._tcp.${ZONE}`, type: 'SRV', ttl: 300, changetype: 'REPLACE', records: [{ content: `10 60 5060 sip.${ZONE}` }] },
      { name: ZONE, type: 'CAA', ttl: 300, changetype: 'REPLACE', records: [{ content: '0 issue "letsencrypt.org"' }] },
      { name: `sub.${ZONE}`, type: 'NS', ttl: 300, changetype: 'REPLACE', records: [{ content: 'ns.elsewhere.example.' }] },
    ]);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.rrsets.length).toBeGreaterThanOrEqual(10);

    expect(await dig(pdns, `www.${ZONE}`, 'A')).toEqual(['192.0.2.10', '192.0.2.11']);
    expect(await dig(pdns, `www.${ZONE}`, 'AAAA')).toEqual(['2001:db8::10']);
    expect(await dig(pdns, `app.${ZONE}`, 'CNAME')).toEqual([`www.${ZONE}`]);
    expect(await dig(pdns, ZONE, 'MX')).toEqual([`10 mail.${ZONE}`]);
    expect(await dig(pdns, ZONE, 'TXT')).toEqual(['"plain \\"quoted\\" text"', '"v=spf1 -all"']);
    expect(await dig(pdns, `_sip._tcp.${ZONE}`, 'SRV')).toEqual([`10 60 5060 sip.${ZONE}`]);
    expect(await dig(pdns, ZONE, 'CAA')).toEqual(['0 issue "letsencrypt.org"']);

    const details = await agent.api('GET', `/dns/dnsserver/zones/${ZONE.slice(0, -1)}`);
    expect(details.status).toBe(200);
    expect(details.body.data.rrsets).toContainEqual({
      name: `www.${ZONE}`,
      type: 'A',
      ttl: 300,
      records: [
        { content: '192.0.2.10', disabled: false },
        { content: '192.0.2.11', disabled: false },
      ],
    });
  });

  it('deletes a record set and it stops resolving', async () => {
    const res = await patch([{ name: `www.${ZONE}`, type: 'AAAA', changetype: 'DELETE' }]);
    expect(res.status).toBe(200);
    expect(await dig(pdns, `www.${ZONE}`, 'AAAA')).toEqual([]);
    expect(await dig(pdns, `www.${ZONE}`, 'A')).toEqual(['192.0.2.10', '192.0.2.11']);
  });

  it('plans a change with the record diff, applies it, and refuses a plan made stale by another change', async () => {
    const plan = await patch(
      [
        { name: `www.${ZONE}`, type: 'A', ttl: 300, changetype: 'REPLACE', records: [{ content: '192.0.2.20' }] },
        { name: `new.${ZONE}`, type: 'A', ttl: 60, changetype: 'REPLACE', records: [{ content: '192.0.2.30' }] },
        { name: `_sip._tcp.${ZONE}`, type: 'SRV', changetype: 'DELETE' },
      ],
      { plan: 'true' },
    );
    expect(plan.status).toBe(201);
    const changes = plan.body.data.changes;
    expect(changes).toEqual([
      {
        type: 'dns_rrset',
        id: `www.${ZONE} A`,
        actions: ['update'],
        before: { ttl: 300, records: ['192.0.2.10', '192.0.2.11'] },
        after: { ttl: 300, records: ['192.0.2.20'] },
      },
      { type: 'dns_rrset', id: `new.${ZONE} A`, actions: ['create'], after: { ttl: 60, records: ['192.0.2.30'] } },
      { type: 'dns_rrset', id: `_sip._tcp.${ZONE} SRV`, actions: ['delete'], before: { ttl: 300, records: [`10 60 5060 sip.${ZONE}`] } },
    ]);
    // Nothing changed yet.
    expect(await dig(pdns, `new.${ZONE}`, 'A')).toEqual([]);

    const applied = await agent.api('POST', `/plans/${plan.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(200);
    expect(await dig(pdns, `new.${ZONE}`, 'A')).toEqual(['192.0.2.30']);
    expect(await dig(pdns, `www.${ZONE}`, 'A')).toEqual(['192.0.2.20']);
    expect(await dig(pdns, `_sip._tcp.${ZONE}`, 'SRV')).toEqual([]);

    const stale = await patch([{ name: `new.${ZONE}`, type: 'A', ttl: 60, changetype: 'REPLACE', records: [{ content: '192.0.2.31' }] }], { plan: 'true' });
    expect(stale.status).toBe(201);
    // Another change to the zone moves its serial.
    expect((await patch([{ name: `other.${ZONE}`, type: 'A', ttl: 60, changetype: 'REPLACE', records: [{ content: '192.0.2.40' }] }])).status).toBe(200);
    const refused = await agent.api('POST', `/plans/${stale.body.data.id}/apply`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('PLAN_STALE');
    expect(refused.body.drifted).toContain('record:serial');
    expect(await dig(pdns, `new.${ZONE}`, 'A')).toEqual(['192.0.2.30']);
  });

  it('refuses bad record content, names outside the zone and malformed changes with 400, changing nothing', async () => {
    const before = (await agent.api('GET', `/dns/dnsserver/zones/${ZONE}`)).body.data;
    const cases: [unknown, string][] = [
      [{ name: `x.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '999.1.1.1' }] }, 'rrsets[0].records[0].content'],
      [{ name: `x.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.1; rm -rf /' }] }, 'rrsets[0].records[0].content'],
      [{ name: `x.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '010.1.1.1' }] }, 'rrsets[0].records[0].content'],
      [{ name: `x.${ZONE}`, type: 'AAAA', changetype: 'REPLACE', records: [{ content: '192.0.2.1' }] }, 'rrsets[0].records[0].content'],
      [{ name: `x.${ZONE}`, type: 'CNAME', changetype: 'REPLACE', records: [{ content: 'no-trailing-dot.example' }] }, 'rrsets[0].records[0].content'],
      [{ name: `x.${ZONE}`, type: 'CNAME', changetype: 'REPLACE', records: [{ content: 'a.example.' }, { content: 'b.example.' }] }, 'rrsets[0].records'],
      [{ name: ZONE, type: 'CNAME', changetype: 'REPLACE', records: [{ content: 'a.example.' }] }, 'rrsets[0].name'],
      [{ name: ZONE, type: 'MX', changetype: 'REPLACE', records: [{ content: 'mail.example.' }] }, 'rrsets[0].records[0].content'],
      [{ name: ZONE, type: 'MX', changetype: 'REPLACE', records: [{ content: '70000 mail.example.' }] }, 'rrsets[0].records[0].content'],
      [{ name: ZONE, type: 'TXT', changetype: 'REPLACE', records: [{ content: '"unterminated' }] }, 'rrsets[0].records[0].content'],
      [{ name: ZONE, type: 'TXT', changetype: 'REPLACE', records: [{ content: `"${'x'.repeat(300)}"` }] }, 'rrsets[0].records[0].content'],
      [{ name: ZONE, type: 'TXT', changetype: 'REPLACE', records: [{ content: 'line\nbreak' }] }, 'rrsets[0].records[0].content'],
      [{ name: `_sip._tcp.${ZONE}`, type: 'SRV', changetype: 'REPLACE', records: [{ content: '10 60 sip.example.' }] }, 'rrsets[0].records[0].content'],
      [{ name: `sip.${ZONE}`, type: 'SRV', changetype: 'REPLACE', records: [{ content: '10 60 5060 sip.example.' }] }, 'rrsets[0].name'],
      [{ name: ZONE, type: 'CAA', changetype: 'REPLACE', records: [{ content: '0 issue letsencrypt.org' }] }, 'rrsets[0].records[0].content'],
      [{ name: ZONE, type: 'CAA', changetype: 'REPLACE', records: [{ content: '0 bogus "x"' }] }, 'rrsets[0].records[0].content'],
      [{ name: ZONE, type: 'NS', changetype: 'REPLACE', records: [{ content: '192.0.2.1' }] }, 'rrsets[0].records[0].content'],
      [{ name: 'www.other-zone.example.', type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.1' }] }, 'rrsets[0].name'],
      [{ name: 'www.agent-test.example', type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.1' }] }, 'rrsets[0].name'],
      [{ name: `a..b.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.1' }] }, 'rrsets[0].name'],
      [{ name: `x.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [] }, 'rrsets[0].records'],
      [{ name: `x.${ZONE}`, type: 'A', changetype: 'DELETE', records: [{ content: '192.0.2.1' }] }, 'rrsets[0].records'],
    ];
    for (const [rrset, field] of cases) {
      const res = await patch([rrset]);
      expect(res.status, JSON.stringify(rrset)).toBe(400);
      expect(res.body, JSON.stringify(rrset)).toMatchObject({ code: 'VALIDATION_FAILED', error: expect.stringContaining(field), field });
    }
    const schemaCases = [
      { name: `x.${ZONE}`, type: 'PTR', changetype: 'REPLACE', records: [{ content: 'a.example.' }] },
      { name: `x.${ZONE}`, type: 'A', changetype: 'ADD', records: [{ content: '192.0.2.1' }] },
      { name: `x.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.1', extra: 1 }] },
      { name: `x y.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.1' }] },
    ];
    for (const rrset of schemaCases) {
      const res = await patch([rrset]);
      expect(res.status, JSON.stringify(rrset)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    const duplicate = await patch([
      { name: `x.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.1' }] },
      { name: `X.${ZONE}`, type: 'A', changetype: 'DELETE' },
    ]);
    expect(duplicate.status).toBe(400);
    const huge = await patch(
      Array.from({ length: 501 }, (_, i) => ({ name: `h${i}.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.1' }] })),
    );
    expect(huge.status).toBe(400);
    // One bad set in a batch of good ones: nothing is applied.
    const mixed = await patch([
      { name: `good.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '192.0.2.50' }] },
      { name: `bad.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: 'not-an-ip' }] },
    ]);
    expect(mixed.status).toBe(400);
    expect(mixed.body.field).toBe('rrsets[1].records[0].content');
    expect(await dig(pdns, `good.${ZONE}`, 'A')).toEqual([]);
    // What only the server can judge (a CNAME beside other records) comes back as its own message.
    const conflict = await patch([{ name: `www.${ZONE}`, type: 'CNAME', changetype: 'REPLACE', records: [{ content: 'elsewhere.example.' }] }]);
    expect(conflict.status).toBe(400);
    expect(conflict.body).toMatchObject({ code: 'DNS_REJECTED', error: expect.stringContaining('CNAME') });
    const after = (await agent.api('GET', `/dns/dnsserver/zones/${ZONE}`)).body.data;
    expect(after).toEqual(before);
  });

  it('refuses bad zone names with 400 and unknown zones with 404', async () => {
    const bad = [
      'no-trailing-dot.example',
      'example.',
      '.',
      'a..example.',
      '-bad.example.',
      'bad_.example.',
      `${'a'.repeat(64)}.example.`,
      'ex ample.org.',
      "x.example.'; DROP",
      '../etc/passwd.',
    ];
    for (const name of bad) {
      const res = await agent.api('POST', '/dns/dnsserver/zones', { body: { name, nameservers: ['ns1.example.org.'] } });
      expect(res.status, name).toBe(400);
      expect(res.body.code, name).toBe('VALIDATION_FAILED');
    }
    const badNs = await agent.api('POST', '/dns/dnsserver/zones', { body: { name: 'fine.example.', nameservers: ['ns1.example.org'] } });
    expect(badNs.status).toBe(400);
    expect(badNs.body.field).toBe('nameservers[0]');
    const noNs = await agent.api('POST', '/dns/dnsserver/zones', { body: { name: 'fine.example.' } });
    expect(noNs.status).toBe(400);
    const badKind = await agent.api('POST', '/dns/dnsserver/zones', { body: { name: 'fine.example.', kind: 'Slave', nameservers: ['ns1.example.org.'] } });
    expect(badKind.status).toBe(400);
    for (const path of ['/dns/dnsserver/zones/missing.example.', '/dns/dnsserver/zones/missing.example']) {
      const res = await agent.api('GET', path);
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('ZONE_NOT_FOUND');
    }
    expect((await agent.api('DELETE', '/dns/dnsserver/zones/missing.example.')).status).toBe(404);
    expect(
      (
        await agent.api('PATCH', '/dns/dnsserver/zones/missing.example.', {
          body: { rrsets: [{ name: 'a.missing.example.', type: 'A', changetype: 'DELETE' }] },
        })
      ).status,
    ).toBe(404);
    expect((await agent.api('GET', '/dns/dnsserver/zones/..%2F..%2Fetc')).status).toBe(400);
    const zones = await agent.api('GET', '/dns/dnsserver/zones');
    expect(zones.body.data.map((z: { name: string }) => z.name)).toEqual([ZONE]);
  });

  it('plans and applies a zone creation and deletion', async () => {
    const plan = await agent.api('POST', '/dns/dnsserver/zones', {
      body: { name: 'Planned.Example.', kind: 'Master', nameservers: ['ns1.planned.example.'] },
      query: { plan: 'true' },
    });
    expect(plan.status).toBe(201);
    expect(plan.body.data.changes[0]).toMatchObject({ type: 'dns_zone', id: 'planned.example.', actions: ['create'] });
    expect((await agent.api('GET', '/dns/dnsserver/zones/planned.example.')).status).toBe(404);
    const applied = await agent.api('POST', `/plans/${plan.body.data.id}/apply`);
    expect(applied.status, applied.text).toBe(201);
    expect(applied.body.data.result).toMatchObject({ name: 'planned.example.', kind: 'Master' });
    expect(await dig(pdns, 'planned.example.', 'NS')).toEqual(['ns1.planned.example.']);
    // Planning the same creation again is refused: the zone exists now.
    const again = await agent.api('POST', '/dns/dnsserver/zones', {
      body: { name: 'planned.example.', nameservers: ['ns1.planned.example.'] },
      query: { plan: 'true' },
    });
    expect(again.status).toBe(409);

    const del = await agent.api('DELETE', '/dns/dnsserver/zones/planned.example.', { query: { plan: 'true' } });
    expect(del.status).toBe(201);
    expect(del.body.data.changes[0]).toMatchObject({ type: 'dns_zone', id: 'planned.example.', actions: ['delete'] });
    expect((await agent.api('POST', `/plans/${del.body.data.id}/apply`)).status).toBe(200);
    expect((await agent.api('GET', '/dns/dnsserver/zones/planned.example.')).status).toBe(404);
  });

  it('refuses a preview as it refuses the request (same status, code and field), storing no plan and changing nothing', async () => {
    const plans = async () => (await agent.api('GET', '/plans')).body.data.length as number;
    const storedPlans = await plans();
    const serial = (await agent.api('GET', `/dns/dnsserver/zones/${ZONE}`)).body.data.serial;
    const refusals: [string, string, unknown, number, string][] = [
      ['POST', '/dns/dnsserver/zones', { name: ZONE, nameservers: ['ns1.agent-test.example.'] }, 409, 'ZONE_EXISTS'],
      // No name server given, and the dns setting default_nameservers is empty.
      ['POST', '/dns/dnsserver/zones', { name: 'fresh.example.' }, 400, 'VALIDATION_FAILED'],
      ['POST', '/dns/dnsserver/zones', { name: 'no-trailing-dot.example', nameservers: ['ns1.example.'] }, 400, 'VALIDATION_FAILED'],
      [
        'PATCH',
        `/dns/dnsserver/zones/${ZONE}`,
        { rrsets: [{ name: `x.${ZONE}`, type: 'A', changetype: 'REPLACE', records: [{ content: '999.1.1.1' }] }] },
        400,
        'VALIDATION_FAILED',
      ],
      ['PATCH', `/dns/dnsserver/zones/${ZONE}`, { rrsets: [{ name: 'x.elsewhere.example.', type: 'A', changetype: 'DELETE' }] }, 400, 'VALIDATION_FAILED'],
      ['PATCH', '/dns/dnsserver/zones/missing.example.', { rrsets: [{ name: 'a.missing.example.', type: 'A', changetype: 'DELETE' }] }, 404, 'ZONE_NOT_FOUND'],
      ['DELETE', '/dns/dnsserver/zones/missing.example.', undefined, 404, 'ZONE_NOT_FOUND'],
    ];
    for (const [method, path, body, status, code] of refusals) {
      const asked = await agent.api(method, path, { body });
      const previewed = await agent.api(method, path, { body, query: { plan: 'true' } });
      expect([asked.status, asked.body.code], `${method} ${path} ${JSON.stringify(body)}`).toEqual([status, code]);
      expect([previewed.status, previewed.body.code, previewed.body.field], `preview of ${method} ${path}`).toEqual([status, code, asked.body.field]);
    }
    expect(await plans()).toBe(storedPlans);
    expect((await agent.api('GET', `/dns/dnsserver/zones/${ZONE}`)).body.data.serial).toBe(serial);
    expect((await agent.api('GET', '/dns/dnsserver/zones')).body.data.map((z: { name: string }) => z.name)).toEqual([ZONE]);
  });

  it('deletes a zone and its names stop resolving', async () => {
    const res = await agent.api('DELETE', `/dns/dnsserver/zones/${ZONE}`);
    expect(res.status).toBe(200);
    expect((await agent.api('GET', '/dns/dnsserver/zones')).body.data).toEqual([]);
    expect(await dig(pdns, `www.${ZONE}`, 'A')).toEqual([]);
  });
});
