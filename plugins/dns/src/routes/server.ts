/** The DNS server: its providers and status (reads), and enable/disable/restart (operations). */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { INFRASTRUCTURE_ERRORS } from '@agent/plugin-infrastructure/api';
import { SERVER_VERBS, type ServerOperations } from '../operations/server.js';
import { RECORD_TYPES } from '../records.js';
import { Provider, ServerStatus } from '../schemas.js';
import { DNS_SERVICE, type ServerStatusOf } from '../status.js';

export function serverRoutes(ctx: PluginContext, status: ServerStatusOf, ops: ServerOperations): void {
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

  for (const verb of SERVER_VERBS) {
    ctx.route(
      operationRoute(ops[verb], {
        method: 'POST',
        path: `/dns/dnsserver/${verb}`,
        permission: 'dns:write',
        summary: `${verb[0]!.toUpperCase()}${verb.slice(1)} the DNS server (the "${DNS_SERVICE}" infrastructure service)`,
        response: ServerStatus,
        // The infrastructure plugin missing, and what a change of its service answers.
        errors: mergeErrors(INFRASTRUCTURE_ERRORS, { 503: ['INFRASTRUCTURE_UNAVAILABLE'] }),
        input: () => ({}),
        respond: (current) => reply.ok(current, `DNS server ${verb}d`),
      }),
    );
  }
}
