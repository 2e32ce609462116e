/** The DNS server's status: whether its API answers (and with which version and how many zones), and the state of the `dns` infrastructure service. */
import type { Logger } from '@agent/sdk';
import type { InfrastructureService } from '@agent/plugin-infrastructure/api';
import type { PowerDnsClient } from './pdns.js';
import type { DnsSettings } from './settings.js';

/** Name of the DNS server among the infrastructure services. */
export const DNS_SERVICE = 'dns';

export type ServerStatusOf = ReturnType<typeof serverStatus>;

export function serverStatus(pdns: PowerDnsClient, { settings }: DnsSettings, infrastructure: () => InfrastructureService | undefined, log: Logger) {
  return async () => {
    const s = settings.get();
    const base = { provider: 'powerdns', api_url: s.api_url, server_id: s.server_id };
    let service: { status: string; health: string } | null = null;
    const infra = infrastructure();
    if (infra) {
      try {
        const st = await infra.get(DNS_SERVICE);
        service = { status: st.status, health: st.health };
      } catch (err) {
        log.debug('no DNS infrastructure service', { error: String(err) });
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
}
