/**
 * Changes of zones as operations, all plannable: create a zone, delete one, replace or delete record sets. `prepare`
 * validates the request here (zone names, record content per type), asks the server what is there (a zone that
 * exists, one that does not) and plans the change (a PATCH plans the record diff), so a `?plan=true` preview refuses
 * what the request refuses; `apply` sends the change. A plan depends on the zone's serial (SOA-EDIT-API bumps it on
 * every API change) and, for a PATCH, the record sets it touches: both read from the input alone, so an edited zone
 * is 409 PLAN_STALE before the checks run again.
 */
import { defineOperation, errors, type PlanChange } from '@agent/sdk';
import { diff, normaliseChanges, touchedSets } from '../changes.js';
import type { PowerDnsClient } from '../pdns.js';
import { CreateZoneBody, PatchZoneInput, ZoneIdParams } from '../schemas.js';
import type { DnsSettings } from '../settings.js';
import { toDetails, zoneCreation, zoneIdOf } from '../zones.js';

export type ZoneOperations = ReturnType<typeof zoneOperations>;

export function zoneOperations(pdns: PowerDnsClient, { settings }: DnsSettings) {
  const createZone = defineOperation({
    name: 'dns.createZone',
    input: CreateZoneBody,
    resource: (input) => ({ type: 'dns_zone', id: input.name.toLowerCase() }),
    snapshot: async (input) => ({ records: { zone: (await pdns.findZone(input.name.toLowerCase()))?.serial } }),
    prepare: async (input) => {
      const zone = zoneCreation(input, settings.get().default_nameservers);
      if (await pdns.findZone(zone.name)) throw errors.conflict(`zone '${zone.name}' already exists`, 'ZONE_EXISTS');
      return {
        value: zone,
        preview: {
          summary: `create zone ${zone.name}`,
          changes: [
            { type: 'dns_zone', id: zone.name, actions: ['create'], after: { kind: zone.kind } },
            { type: 'dns_rrset', id: `${zone.name} NS`, actions: ['create'], after: { records: zone.nameservers } },
          ],
        },
      };
    },
    apply: async (zone) => {
      // SOA-EDIT-API bumps the serial on every API change, which secondaries and plans rely on.
      await pdns.createZone({ ...zone, soa_edit_api: 'DEFAULT' });
      return toDetails(await pdns.getZone(zone.name));
    },
  });

  const deleteZone = defineOperation({
    name: 'dns.deleteZone',
    input: ZoneIdParams,
    resource: (input) => ({ type: 'dns_zone', id: zoneIdOf(input.zoneId) }),
    snapshot: async (input) => {
      const zone = await pdns.findZone(zoneIdOf(input.zoneId));
      return { records: { serial: zone?.serial, rrsets: zone ? toDetails(zone).rrsets : undefined } };
    },
    prepare: async (input) => {
      const id = zoneIdOf(input.zoneId);
      const zone = await pdns.getZone(id);
      const changes: PlanChange[] = [
        { type: 'dns_zone', id: zone.name, actions: ['delete'], before: { kind: zone.kind, serial: zone.serial, record_sets: zone.rrsets?.length ?? 0 } },
      ];
      return { value: id, preview: { summary: `delete zone ${zone.name} and its ${zone.rrsets?.length ?? 0} record sets`, changes } };
    },
    apply: async (id) => {
      await pdns.deleteZone(id);
      return id;
    },
  });

  const updateRecords = defineOperation({
    name: 'dns.updateRecords',
    input: PatchZoneInput,
    resource: (input) => ({ type: 'dns_zone', id: zoneIdOf(input.zoneId) }),
    // Stale when the zone's serial moved or any touched record set changed since the plan was made.
    snapshot: async (input) => {
      const id = zoneIdOf(input.zoneId);
      const zone = await pdns.findZone(id);
      if (!zone) return { records: { serial: undefined } };
      const changes = normaliseChanges(id, input.rrsets, settings.get().default_ttl);
      return { records: { serial: `${zone.serial}/${zone.edited_serial ?? ''}`, ...touchedSets(zone, changes) } };
    },
    prepare: async (input) => {
      const id = zoneIdOf(input.zoneId);
      const changes = normaliseChanges(id, input.rrsets, settings.get().default_ttl);
      const planned = diff(await pdns.getZone(id), changes);
      const count = (a: string) => planned.filter((c) => c.actions[0] === a).length;
      return {
        value: { id, changes },
        preview: {
          summary: `zone ${id}: ${count('create')} to create, ${count('update')} to update, ${count('delete')} to delete, ${count('no-op')} unchanged`,
          changes: planned,
        },
      };
    },
    apply: async ({ id, changes }) => {
      await pdns.patchZone(id, changes);
      return { id, changed: changes.length, zone: toDetails(await pdns.getZone(id)) };
    },
  });

  return { createZone, deleteZone, updateRecords };
}
