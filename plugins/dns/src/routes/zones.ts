/** Zones and record sets: list and details (reads), create, delete and PATCH of record sets (operations, plannable). */
import { compareText, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import type { ZoneOperations } from '../operations/zones.js';
import { PDNS_ERRORS, type PowerDnsClient } from '../pdns.js';
import { RECORD_TYPES } from '../records.js';
import { CreateZoneBody, PatchZoneBody, ZoneDetails, ZoneIdParams, ZoneSummary } from '../schemas.js';
import { toDetails, toSummary, zoneIdOf } from '../zones.js';

export function zoneRoutes(ctx: PluginContext, pdns: PowerDnsClient, ops: ZoneOperations): void {
  ctx.route({
    method: 'GET',
    path: '/dns/dnsserver/zones',
    permission: 'dns:read',
    errors: PDNS_ERRORS,
    operationId: 'dns.listZones',
    summary: 'List zones',
    response: Type.Array(ZoneSummary),
    handler: async () => (await pdns.listZones()).map(toSummary).sort((a, b) => compareText(a.name, b.name)),
  });

  ctx.route(
    operationRoute(ops.createZone, {
      method: 'POST',
      path: '/dns/dnsserver/zones',
      permission: 'dns:write',
      errors: PDNS_ERRORS,
      creates: 'name',
      status: 201,
      summary: 'Create a zone (409 ZONE_EXISTS when it exists)',
      body: CreateZoneBody,
      response: ZoneDetails,
      plannable: true,
      input: (req) => req.body,
      respond: (zone) => reply.created(zone, `zone ${zone.name} created`),
    }),
  );

  ctx.route({
    method: 'GET',
    path: '/dns/dnsserver/zones/:zoneId',
    permission: 'dns:read',
    errors: PDNS_ERRORS,
    operationId: 'dns.getZone',
    summary: 'A zone with its record sets',
    params: ZoneIdParams,
    response: ZoneDetails,
    handler: async (req) => toDetails(await pdns.getZone(zoneIdOf(req.params.zoneId))),
  });

  ctx.route(
    operationRoute(ops.deleteZone, {
      method: 'DELETE',
      path: '/dns/dnsserver/zones/:zoneId',
      permission: 'dns:write',
      errors: PDNS_ERRORS,
      summary: 'Delete a zone and all its records',
      params: ZoneIdParams,
      plannable: true,
      input: (req) => req.params,
      respond: (id) => reply.ok(null, `zone ${id} deleted`),
    }),
  );

  ctx.route(
    operationRoute(ops.updateRecords, {
      method: 'PATCH',
      path: '/dns/dnsserver/zones/:zoneId',
      permission: 'dns:write',
      errors: PDNS_ERRORS,
      summary: 'Replace or delete record sets of a zone',
      description: `changetype REPLACE (records required) or DELETE. Types: ${RECORD_TYPES.join(', ')}; content is checked per type.`,
      params: ZoneIdParams,
      body: PatchZoneBody,
      response: ZoneDetails,
      plannable: true,
      input: (req) => ({ ...req.body, ...req.params }),
      respond: ({ id, changed, zone }) => reply.ok(zone, `${changed} record set${changed === 1 ? '' : 's'} changed in ${id}`),
    }),
  );
}
