/** A PATCH of record sets: validated, normalised, and compared with the zone as it is (the plan's diff). */
import { errors, type PlanChange } from '@agent/sdk';
import type { PdnsRRsetChange, PdnsZone } from './pdns.js';
import { checkContent, checkFqdn, checkRRsetShape, inZone, type RecordType } from './records.js';

export interface RRsetInput {
  name: string;
  type: RecordType;
  ttl?: number;
  changetype: 'REPLACE' | 'DELETE';
  records?: { content: string; disabled?: boolean }[];
}

/** Validates every record set against the zone and returns what to send to the server. */
export function normaliseChanges(zone: string, rrsets: RRsetInput[], defaultTtl: number): PdnsRRsetChange[] {
  const seen = new Set<string>();
  return rrsets.map((r, i) => {
    const field = `rrsets[${i}]`;
    const name = checkFqdn(r.name, `${field}.name`, { wildcard: true, underscore: true });
    if (!inZone(name, zone))
      throw errors.badRequest(`${field}.name: '${r.name}' is not inside the zone ${zone}`, 'VALIDATION_FAILED', { field: `${field}.name` });
    const key = `${name} ${r.type}`;
    if (seen.has(key)) throw errors.badRequest(`${field}: ${key} appears twice in this change`, 'VALIDATION_FAILED', { field });
    seen.add(key);
    if (r.changetype === 'DELETE') {
      if (r.records?.length) throw errors.badRequest(`${field}.records: a DELETE takes no records`, 'VALIDATION_FAILED', { field: `${field}.records` });
      return { name, type: r.type, changetype: 'DELETE' };
    }
    if (!r.records?.length) {
      throw errors.badRequest(`${field}.records: a REPLACE needs at least one record (use DELETE to remove the set)`, 'VALIDATION_FAILED', {
        field: `${field}.records`,
      });
    }
    const records = r.records.map((rec, j) => ({
      content: checkContent(r.type, rec.content, `${field}.records[${j}].content`),
      disabled: rec.disabled ?? false,
    }));
    checkRRsetShape(
      r.type,
      name,
      zone,
      records.map((x) => x.content),
      field,
    );
    return { name, type: r.type, ttl: r.ttl ?? defaultTtl, changetype: 'REPLACE', records };
  });
}

type SetView = { ttl: number; records: string[] } | undefined;

const viewOf = (zone: PdnsZone, name: string, type: string): SetView => {
  const set = zone.rrsets?.find((s) => s.name === name && s.type === type);
  if (!set || set.records.length === 0) return undefined;
  return { ttl: set.ttl, records: set.records.map((r) => (r.disabled ? `${r.content} (disabled)` : r.content)).sort() };
};

/** The record sets a change touches, as they are now (the plan's snapshot). */
export function touchedSets(zone: PdnsZone, changes: PdnsRRsetChange[]): Record<string, SetView> {
  const out: Record<string, SetView> = {};
  for (const c of changes) out[`${c.name} ${c.type}`] = viewOf(zone, c.name, c.type);
  return out;
}

export function diff(zone: PdnsZone, changes: PdnsRRsetChange[]): PlanChange[] {
  return changes.map((c) => {
    const before = viewOf(zone, c.name, c.type);
    const after: SetView =
      c.changetype === 'DELETE' ? undefined : { ttl: c.ttl!, records: c.records!.map((r) => (r.disabled ? `${r.content} (disabled)` : r.content)).sort() };
    const same = JSON.stringify(before) === JSON.stringify(after);
    const action = same ? 'no-op' : !before ? 'create' : !after ? 'delete' : 'update';
    return { type: 'dns_rrset', id: `${c.name} ${c.type}`, actions: [action], before, after };
  });
}
