/**
 * A small client of the PowerDNS Authoritative HTTP API (v1). Answers of the server are turned into
 * `{error, code}` errors: unreachable 503, key refused 502, unknown zone 404, conflict 409, rejected data 400.
 */
import { HttpError, type ErrorCodes } from '@agent/sdk';

export interface PdnsConfig {
  url: string;
  key: string;
  serverId: string;
}

export interface PdnsRecord {
  content: string;
  disabled: boolean;
}

export interface PdnsRRset {
  name: string;
  type: string;
  ttl: number;
  records: PdnsRecord[];
  comments?: unknown[];
}

export interface PdnsZone {
  id: string;
  name: string;
  kind: string;
  serial: number;
  edited_serial?: number;
  notified_serial?: number;
  dnssec?: boolean;
  account?: string;
  masters?: string[];
  rrsets?: PdnsRRset[];
}

export interface PdnsRRsetChange {
  name: string;
  type: string;
  ttl?: number;
  changetype: 'REPLACE' | 'DELETE';
  records?: PdnsRecord[];
}

const TIMEOUT_MS = 10_000;

/** What a call to the server's API answers (`request` below), for the `errors` of the routes that make one. */
export const PDNS_ERRORS: ErrorCodes = {
  400: ['DNS_REJECTED'],
  404: ['ZONE_NOT_FOUND'],
  409: ['ZONE_EXISTS'],
  502: ['DNS_SERVER_AUTH_FAILED', 'DNS_SERVER_ERROR'],
  503: ['DNS_SERVER_UNREACHABLE'],
};

export class PowerDnsClient {
  constructor(private readonly config: () => PdnsConfig) {}

  private zonePath(zoneId: string): string {
    return `/zones/${encodeURIComponent(zoneId)}`;
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const { url, key, serverId } = this.config();
    const target = `${url.replace(/\/+$/, '')}/api/v1/servers/${encodeURIComponent(serverId)}${path}`;
    let res: Response;
    try {
      res = await fetch(target, {
        method,
        headers: { 'X-API-Key': key, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
        redirect: 'error',
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
      throw new HttpError(503, 'DNS_SERVER_UNREACHABLE', `the DNS server API at ${url} is not reachable (${cause})`);
    }
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (res.ok) return parsed as T;
    const message = String((parsed as { error?: unknown } | null)?.error ?? text)
      .replace(/\s+/g, ' ')
      .slice(0, 300);
    if (res.status === 401 || res.status === 403)
      throw new HttpError(502, 'DNS_SERVER_AUTH_FAILED', 'the DNS server refused the API key (check the dns settings api_key)');
    if (res.status === 404) throw new HttpError(404, 'ZONE_NOT_FOUND', message || 'not found');
    if (res.status === 409) throw new HttpError(409, 'ZONE_EXISTS', message);
    if (res.status === 422 || res.status === 400) throw new HttpError(400, 'DNS_REJECTED', `the DNS server rejected the change: ${message}`);
    throw new HttpError(502, 'DNS_SERVER_ERROR', `the DNS server answered ${res.status}: ${message}`);
  }

  server(): Promise<{ id: string; version: string; daemon_type: string }> {
    return this.request('GET', '');
  }

  listZones(): Promise<PdnsZone[]> {
    return this.request('GET', '/zones');
  }

  async getZone(zoneId: string): Promise<PdnsZone> {
    try {
      return await this.request<PdnsZone>('GET', this.zonePath(zoneId));
    } catch (err) {
      // PowerDNS answers 422 "Could not find domain" for an unknown zone in some versions.
      if (err instanceof HttpError && (err.code === 'DNS_REJECTED' || err.code === 'ZONE_NOT_FOUND')) {
        throw new HttpError(404, 'ZONE_NOT_FOUND', `zone '${zoneId}' not found`);
      }
      throw err;
    }
  }

  /** The zone, or null when the server does not have it. */
  async findZone(zoneId: string): Promise<PdnsZone | null> {
    try {
      return await this.getZone(zoneId);
    } catch (err) {
      if (err instanceof HttpError && err.code === 'ZONE_NOT_FOUND') return null;
      throw err;
    }
  }

  createZone(zone: { name: string; kind: string; nameservers: string[]; soa_edit_api: string }): Promise<PdnsZone> {
    return this.request('POST', '/zones', zone);
  }

  deleteZone(zoneId: string): Promise<void> {
    return this.request('DELETE', this.zonePath(zoneId));
  }

  patchZone(zoneId: string, rrsets: PdnsRRsetChange[]): Promise<void> {
    return this.request('PATCH', this.zonePath(zoneId), { rrsets });
  }
}
