/**
 * dns: the authoritative DNS server the agent manages, through the PowerDNS HTTP API (routes under the
 * `dnsserver` segment). Zones and record sets are validated here before the server sees them; zone changes are plannable
 * (the plan holds the record diff and goes stale when the zone's serial or the touched sets change).
 */
import { randomBytes } from 'node:crypto';
import { definePlugin, errors, optional, reply, Type, type PlanChange, compareText } from '@agent/sdk';
import { infrastructureService, type InfrastructureService } from '@agent/plugin-infrastructure/api';
import { diff, normaliseChanges, touchedSets } from './changes.js';
import { PowerDnsClient, type PdnsZone } from './pdns.js';
import { checkFqdn, checkZoneName, RECORD_TYPES } from './records.js';
import { CreateZoneBody, PatchZoneBody, Provider, ServerStatus, ZoneDetails, ZoneIdParams, ZoneSummary } from './schemas.js';

/** Name of the DNS server among the infrastructure services. */
const DNS_SERVICE = 'dns';

const Settings = Type.Object({
  api_url: Type.String({
    default: 'http://127.0.0.1:8081',
    pattern: '^https?://[A-Za-z0-9.:\\[\\]_-]+(/[A-Za-z0-9._~/-]*)?$',
    description: 'base URL of the PowerDNS HTTP API',
  }),
  api_key: Type.String({ default: '', maxLength: 512, description: 'PowerDNS API key (generated when empty; stored encrypted)' }),
  server_id: Type.String({ default: 'localhost', pattern: '^[A-Za-z0-9._-]{1,64}$', description: 'PowerDNS server id' }),
  default_nameservers: Type.Array(Type.String({ pattern: '^[A-Za-z0-9_.-]{1,254}$' }), {
    default: [],
    maxItems: 10,
    description: 'name servers of new zones when a request gives none',
  }),
  default_ttl: Type.Integer({ default: 3600, minimum: 1, maximum: 2147483647, description: 'TTL of record sets given without one' }),
});

const toSummary = (z: PdnsZone) => ({
  id: z.id,
  name: z.name,
  kind: z.kind,
  serial: z.serial ?? 0,
  dnssec: z.dnssec ?? false,
  account: z.account ?? '',
});

const toDetails = (z: PdnsZone) => {
  const rrsets = (z.rrsets ?? [])
    .map((s) => ({ name: s.name, type: s.type, ttl: s.ttl, records: s.records.map((r) => ({ content: r.content, disabled: r.disabled })) }))
    .sort((a, b) => compareText(a.name, b.name) || compareText(a.type, b.type));
  const ns = rrsets.find((s) => s.type === 'NS' && s.name === z.name);
  return { ...toSummary(z), nameservers: ns ? ns.records.map((r) => r.content) : [], rrsets };
};

/** A zone id from the path: lower case, with its trailing dot. */
const zoneIdOf = (raw: string) => checkZoneName(raw.endsWith('.') ? raw : `${raw}.`, 'zoneId');

export default definePlugin({
  name: 'dns',
  version: '0.1.0',
  description: 'Authoritative DNS (PowerDNS API): server status and control, zones, record sets',
  // Global: the zones are the host's, whatever deployment a record points at; only principals with global scope reach them.
  resources: { dns: { description: 'DNS server, zones and records (global)', operator: 'write', viewer: 'read', owner: 'global' } },
  deps: { infrastructure: optional(infrastructureService) },

  async setup(ctx, deps) {
    const settings = ctx.settings(Settings, { secret: ['api_key'] });

    // The key is kept sealed in the settings document; a key set in clear through PUT /api/settings is sealed at once.
    const sealIfClear = async (value: string) => {
      if (value && !value.startsWith('v1.')) await settings.set({ api_key: ctx.sealer.seal(value) });
    };
    if (!settings.get().api_key) await settings.set({ api_key: ctx.sealer.seal(randomBytes(24).toString('base64url')) });
    else await sealIfClear(settings.get().api_key);
    settings.onChange((v) => {
      void sealIfClear(v.api_key).catch((err) => ctx.log.error('could not seal the DNS API key', { error: String(err) }));
    });
    const apiKey = () => {
      const stored = settings.get().api_key;
      try {
        return stored.startsWith('v1.') ? ctx.sealer.open(stored) : stored;
      } catch {
        return stored;
      }
    };

    const pdns = new PowerDnsClient(() => ({ url: settings.get().api_url, key: apiKey(), serverId: settings.get().server_id }));
    const infra = (): InfrastructureService => {
      const service = deps.infrastructure;
      if (!service)
        throw errors.unavailable('the DNS server is controlled through the infrastructure plugin, which is not enabled', 'INFRASTRUCTURE_UNAVAILABLE');
      return service;
    };

    const status = async () => {
      const s = settings.get();
      const base = { provider: 'powerdns', api_url: s.api_url, server_id: s.server_id };
      let service: { status: string; health: string } | null = null;
      const infraService = deps.infrastructure;
      if (infraService) {
        try {
          const st = await infraService.get(DNS_SERVICE);
          service = { status: st.status, health: st.health };
        } catch (err) {
          ctx.log.debug('no DNS infrastructure service', { error: String(err) });
        }
      }
      try {
        const [server, zones] = await Promise.all([pdns.server(), pdns.listZones()]);
        return { ...base, reachable: true, version: server.version ?? null, zone_count: zones.length, error: null, service };
      } catch (err) {
        const e = err as { code?: string; message?: string };
        // A refused key still means the server answered.
        return { ...base, reachable: e.code === 'DNS_SERVER_AUTH_FAILED', version: null, zone_count: null, error: e.message ?? String(err), service };
      }
    };

    ctx.doctor({
      id: 'dns.server',
      title: 'DNS server API (PowerDNS)',
      run: async () => {
        const url = settings.get().api_url;
        try {
          const server = await pdns.server();
          return { status: 'ok', detail: `PowerDNS ${server.version ?? '(version unknown)'} at ${url}` };
        } catch (err) {
          const code = (err as { code?: string }).code;
          const fix =
            code === 'DNS_SERVER_AUTH_FAILED'
              ? "set the server's API key in the dns settings: agentctl settings update -f dns.api_key=<key>"
              : `start the server (agentctl dns enable, with the infrastructure plugin) or set dns.api_url; without a DNS server, disable the plugin (plugins.enabled: ['*', '!dns'])`;
          return { status: 'failed', detail: (err as Error).message, fix };
        }
      },
    });

    /** Settings the DNS infrastructure template gets from here: the API key and the API port of api_url. */
    const serviceSettings = () => {
      const url = new URL(settings.get().api_url);
      return { api_key: apiKey(), api_port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) };
    };

    ctx.route({
      method: 'GET',
      path: '/dns/providers',
      permission: 'dns:read',
      operationId: 'dns.providers',
      summary: 'DNS providers this agent supports and the fields each needs',
      response: Type.Array(Provider),
      handler: () => [
        {
          name: 'powerdns',
          label: 'PowerDNS (authoritative server managed by the agent)',
          segment: 'dnsserver',
          description: 'Zones and records through the PowerDNS HTTP API; the server runs as the "dns" infrastructure service or elsewhere.',
          record_types: [...RECORD_TYPES],
          fields: [
            { name: 'api_url', type: 'url', required: true, secret: false, description: 'base URL of the HTTP API', default: 'http://127.0.0.1:8081' },
            { name: 'api_key', type: 'string', required: true, secret: true, description: 'X-API-Key of the server (generated when empty)', default: null },
            { name: 'server_id', type: 'string', required: false, secret: false, description: 'server id in API paths', default: 'localhost' },
          ],
        },
      ],
    });

    ctx.route({
      method: 'GET',
      path: '/dns/dnsserver/status',
      permission: 'dns:read',
      operationId: 'dns.status',
      summary: 'DNS server status: reachable, version, zone count',
      response: ServerStatus,
      handler: status,
    });

    for (const [verb, run] of [
      ['enable', (i: InfrastructureService) => i.start(DNS_SERVICE, { settings: serviceSettings() })],
      ['disable', (i: InfrastructureService) => i.stop(DNS_SERVICE)],
      [
        'restart',
        async (i: InfrastructureService) => {
          await i.configure(DNS_SERVICE, serviceSettings());
          return i.restart(DNS_SERVICE);
        },
      ],
    ] as const) {
      ctx.route({
        method: 'POST',
        path: `/dns/dnsserver/${verb}`,
        permission: 'dns:write',
        operationId: `dns.${verb}`,
        summary: `${verb[0]!.toUpperCase()}${verb.slice(1)} the DNS server (the "${DNS_SERVICE}" infrastructure service)`,
        response: ServerStatus,
        handler: async () => {
          await run(infra());
          return reply.ok(await status(), `DNS server ${verb}d`);
        },
      });
    }

    ctx.route({
      method: 'GET',
      path: '/dns/dnsserver/zones',
      permission: 'dns:read',
      operationId: 'dns.listZones',
      summary: 'List zones',
      response: Type.Array(ZoneSummary),
      handler: async () => (await pdns.listZones()).map(toSummary).sort((a, b) => compareText(a.name, b.name)),
    });

    const zoneCreation = (body: { name: string; kind?: 'Native' | 'Master'; nameservers?: string[] }) => {
      const name = checkZoneName(body.name);
      const given = body.nameservers?.length ? body.nameservers : settings.get().default_nameservers;
      if (!given.length)
        throw errors.badRequest('nameservers: give at least one (or set the dns setting default_nameservers)', 'VALIDATION_FAILED', { field: 'nameservers' });
      const nameservers = given.map((ns, i) => checkFqdn(ns, `nameservers[${i}]`));
      if (new Set(nameservers).size !== nameservers.length) throw errors.badRequest('nameservers: listed twice', 'VALIDATION_FAILED', { field: 'nameservers' });
      return { name, kind: body.kind ?? 'Native', nameservers };
    };

    ctx.route({
      method: 'POST',
      path: '/dns/dnsserver/zones',
      permission: 'dns:write',
      operationId: 'dns.createZone',
      creates: 'name',
      status: 201,
      summary: 'Create a zone (409 ZONE_EXISTS when it exists)',
      body: CreateZoneBody,
      response: ZoneDetails,
      plan: {
        resource: (req) => ({ type: 'dns_zone', id: req.body.name.toLowerCase() }),
        preview: async (req) => {
          const zone = zoneCreation(req.body);
          if (await pdns.findZone(zone.name)) throw errors.conflict(`zone '${zone.name}' already exists`, 'ZONE_EXISTS');
          return {
            summary: `create zone ${zone.name}`,
            changes: [
              { type: 'dns_zone', id: zone.name, actions: ['create'], after: { kind: zone.kind } },
              { type: 'dns_rrset', id: `${zone.name} NS`, actions: ['create'], after: { records: zone.nameservers } },
            ],
          };
        },
        snapshot: async (req) => ({ records: { zone: (await pdns.findZone(req.body.name.toLowerCase()))?.serial } }),
      },
      handler: async (req) => {
        const zone = zoneCreation(req.body);
        if (await pdns.findZone(zone.name)) throw errors.conflict(`zone '${zone.name}' already exists`, 'ZONE_EXISTS');
        // SOA-EDIT-API bumps the serial on every API change, which secondaries and plans rely on.
        await pdns.createZone({ ...zone, soa_edit_api: 'DEFAULT' });
        return reply.created(toDetails(await pdns.getZone(zone.name)), `zone ${zone.name} created`);
      },
    });

    ctx.route({
      method: 'GET',
      path: '/dns/dnsserver/zones/:zoneId',
      permission: 'dns:read',
      operationId: 'dns.getZone',
      summary: 'A zone with its record sets',
      params: ZoneIdParams,
      response: ZoneDetails,
      handler: async (req) => toDetails(await pdns.getZone(zoneIdOf(req.params.zoneId))),
    });

    ctx.route({
      method: 'DELETE',
      path: '/dns/dnsserver/zones/:zoneId',
      permission: 'dns:write',
      operationId: 'dns.deleteZone',
      summary: 'Delete a zone and all its records',
      params: ZoneIdParams,
      plan: {
        resource: (req) => ({ type: 'dns_zone', id: zoneIdOf(req.params.zoneId) }),
        preview: async (req) => {
          const zone = await pdns.getZone(zoneIdOf(req.params.zoneId));
          const changes: PlanChange[] = [
            { type: 'dns_zone', id: zone.name, actions: ['delete'], before: { kind: zone.kind, serial: zone.serial, record_sets: zone.rrsets?.length ?? 0 } },
          ];
          return { summary: `delete zone ${zone.name} and its ${zone.rrsets?.length ?? 0} record sets`, changes };
        },
        snapshot: async (req) => {
          const zone = await pdns.findZone(zoneIdOf(req.params.zoneId));
          return { records: { serial: zone?.serial, rrsets: zone ? toDetails(zone).rrsets : undefined } };
        },
      },
      handler: async (req) => {
        const id = zoneIdOf(req.params.zoneId);
        await pdns.getZone(id);
        await pdns.deleteZone(id);
        return reply.ok(null, `zone ${id} deleted`);
      },
    });

    const prepare = async (zoneIdRaw: string, rrsets: Parameters<typeof normaliseChanges>[1]) => {
      const id = zoneIdOf(zoneIdRaw);
      const changes = normaliseChanges(id, rrsets, settings.get().default_ttl);
      const zone = await pdns.getZone(id);
      return { id, zone, changes };
    };

    ctx.route({
      method: 'PATCH',
      path: '/dns/dnsserver/zones/:zoneId',
      permission: 'dns:write',
      operationId: 'dns.updateRecords',
      summary: 'Replace or delete record sets of a zone',
      description: `changetype REPLACE (records required) or DELETE. Types: ${RECORD_TYPES.join(', ')}; content is checked per type.`,
      params: ZoneIdParams,
      body: PatchZoneBody,
      response: ZoneDetails,
      plan: {
        resource: (req) => ({ type: 'dns_zone', id: zoneIdOf(req.params.zoneId) }),
        preview: async (req) => {
          const { id, zone, changes } = await prepare(req.params.zoneId, req.body.rrsets);
          const planned = diff(zone, changes);
          const count = (a: string) => planned.filter((c) => c.actions[0] === a).length;
          return {
            summary: `zone ${id}: ${count('create')} to create, ${count('update')} to update, ${count('delete')} to delete, ${count('no-op')} unchanged`,
            changes: planned,
          };
        },
        // Stale when the zone's serial moved or any touched record set changed since the plan was made.
        snapshot: async (req) => {
          const id = zoneIdOf(req.params.zoneId);
          const zone = await pdns.findZone(id);
          if (!zone) return { records: { serial: undefined } };
          const changes = normaliseChanges(id, req.body.rrsets, settings.get().default_ttl);
          return { records: { serial: `${zone.serial}/${zone.edited_serial ?? ''}`, ...touchedSets(zone, changes) } };
        },
      },
      handler: async (req) => {
        const { id, changes } = await prepare(req.params.zoneId, req.body.rrsets);
        await pdns.patchZone(id, changes);
        return reply.ok(toDetails(await pdns.getZone(id)), `${changes.length} record set${changes.length === 1 ? '' : 's'} changed in ${id}`);
      },
    });
  },
});
