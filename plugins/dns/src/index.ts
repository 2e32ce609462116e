/**
 * dns: the authoritative DNS server the agent manages, through the PowerDNS HTTP API (routes under the
 * `dnsserver` segment). Zones and record sets are validated here before the server sees them; zone changes are plannable
 * (the plan holds the record diff and goes stale when the zone's serial or the touched sets change).
 */
import { definePlugin, optional } from '@agent/sdk';
import { infrastructureService } from '@agent/plugin-infrastructure/api';
import { serverOperations } from './operations/server.js';
import { zoneOperations } from './operations/zones.js';
import { PowerDnsClient } from './pdns.js';
import { serverRoutes } from './routes/server.js';
import { zoneRoutes } from './routes/zones.js';
import { dnsSettings } from './settings.js';
import { serverStatus } from './status.js';

export default definePlugin({
  name: 'dns',
  version: '0.1.0',
  description: 'Authoritative DNS (PowerDNS API): server status and control, zones, record sets',
  // Global: the zones are the host's, whatever deployment a record points at; only principals with global scope reach them.
  resources: { dns: { description: 'DNS server, zones and records (global)', operator: 'write', viewer: 'read', owner: 'global' } },
  deps: { infrastructure: optional(infrastructureService) },

  async setup(ctx, deps) {
    const settings = await dnsSettings(ctx);
    const pdns = new PowerDnsClient(() => ({ url: settings.settings.get().api_url, key: settings.apiKey(), serverId: settings.settings.get().server_id }));
    const infrastructure = () => deps.infrastructure;
    const status = serverStatus(pdns, settings, infrastructure, ctx.log);

    ctx.doctor({
      id: 'dns.server',
      title: 'DNS server API (PowerDNS)',
      run: async () => {
        const url = settings.settings.get().api_url;
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

    // Each change is an operation (src/operations), run by its route (src/routes): checks in `prepare`, the change in `apply`.
    serverRoutes(ctx, status, serverOperations(infrastructure, settings, status));
    zoneRoutes(ctx, pdns, zoneOperations(pdns, settings));
  },
});
