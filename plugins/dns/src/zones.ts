/** Zones as answered (summary, details with sorted record sets) and the names of zones taken from requests. */
import { compareText, errors } from '@agent/sdk';
import type { PdnsZone } from './pdns.js';
import { checkFqdn, checkZoneName } from './records.js';

export const toSummary = (z: PdnsZone) => ({
  id: z.id,
  name: z.name,
  kind: z.kind,
  serial: z.serial ?? 0,
  dnssec: z.dnssec ?? false,
  account: z.account ?? '',
});

export const toDetails = (z: PdnsZone) => {
  const rrsets = (z.rrsets ?? [])
    .map((s) => ({ name: s.name, type: s.type, ttl: s.ttl, records: s.records.map((r) => ({ content: r.content, disabled: r.disabled })) }))
    .sort((a, b) => compareText(a.name, b.name) || compareText(a.type, b.type));
  const ns = rrsets.find((s) => s.type === 'NS' && s.name === z.name);
  return { ...toSummary(z), nameservers: ns ? ns.records.map((r) => r.content) : [], rrsets };
};

/** A zone id from the path: lower case, with its trailing dot. */
export const zoneIdOf = (raw: string) => checkZoneName(raw.endsWith('.') ? raw : `${raw}.`, 'zoneId');

/** A zone to create, checked: its name, kind, and name servers (the request's, else the default ones). */
export function zoneCreation(body: { name: string; kind?: 'Native' | 'Master'; nameservers?: string[] }, defaultNameservers: string[]) {
  const name = checkZoneName(body.name);
  const given = body.nameservers?.length ? body.nameservers : defaultNameservers;
  if (!given.length)
    throw errors.badRequest('nameservers: give at least one (or set the dns setting default_nameservers)', 'VALIDATION_FAILED', { field: 'nameservers' });
  const nameservers = given.map((ns, i) => checkFqdn(ns, `nameservers[${i}]`));
  if (new Set(nameservers).size !== nameservers.length) throw errors.badRequest('nameservers: listed twice', 'VALIDATION_FAILED', { field: 'nameservers' });
  return { name, kind: body.kind ?? 'Native', nameservers };
}
