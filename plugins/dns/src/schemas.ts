/** Request and response schemas of the DNS routes. */
import { Nullable, Type } from '@agent/sdk';
import { RECORD_TYPES } from './records.js';

/** Loose shape only: the exact rules (trailing dot, labels, zone membership) are checked in code with a clear message. */
const DNS_NAME = '^[A-Za-z0-9_.*-]{1,254}$';

export const ZoneIdParams = Type.Object({
  zoneId: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,254}$', description: 'zone name, e.g. example.org. (the trailing dot may be omitted in the path)' }),
});

export const CreateZoneBody = Type.Object({
  name: Type.String({ pattern: DNS_NAME, description: 'fully qualified zone name with the trailing dot, e.g. example.org.' }),
  kind: Type.Optional(Type.Unsafe<'Native' | 'Master'>({ type: 'string', enum: ['Native', 'Master'], default: 'Native' })),
  nameservers: Type.Optional(
    Type.Array(Type.String({ pattern: DNS_NAME }), {
      maxItems: 10,
      description: "fully qualified names of the zone's name servers (default: the dns setting default_nameservers)",
    }),
  ),
});

const RecordInput = Type.Object({
  content: Type.String({ minLength: 1, maxLength: 4096, description: 'record data in presentation format (TXT: quoted; plain text is quoted for you)' }),
  disabled: Type.Optional(Type.Boolean({ default: false })),
});

export const PatchZoneBody = Type.Object({
  rrsets: Type.Array(
    Type.Object({
      name: Type.String({ pattern: DNS_NAME, description: 'fully qualified owner name inside the zone' }),
      type: Type.Unsafe<(typeof RECORD_TYPES)[number]>({ type: 'string', enum: [...RECORD_TYPES] }),
      ttl: Type.Optional(Type.Integer({ minimum: 1, maximum: 2147483647, description: 'seconds (REPLACE; default: the dns setting default_ttl)' })),
      changetype: Type.Unsafe<'REPLACE' | 'DELETE'>({ type: 'string', enum: ['REPLACE', 'DELETE'] }),
      records: Type.Optional(Type.Array(RecordInput, { maxItems: 100 })),
    }),
    { minItems: 1, maxItems: 500 },
  ),
});

export const PatchZoneInput = Type.Composite([ZoneIdParams, PatchZoneBody]);

export const Record = Type.Object({ content: Type.String(), disabled: Type.Boolean() });
export const RRset = Type.Object({ name: Type.String(), type: Type.String(), ttl: Type.Integer(), records: Type.Array(Record) });

export const ZoneSummary = Type.Object({
  id: Type.String(),
  name: Type.String(),
  kind: Type.String(),
  serial: Type.Integer(),
  dnssec: Type.Boolean(),
  account: Type.String(),
});

export const ZoneDetails = Type.Object({
  ...ZoneSummary.properties,
  nameservers: Type.Array(Type.String()),
  rrsets: Type.Array(RRset),
});

export const ServerStatus = Type.Object({
  provider: Type.String(),
  api_url: Type.String(),
  server_id: Type.String(),
  reachable: Type.Boolean(),
  version: Nullable(Type.String()),
  zone_count: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
  /** State of the DNS infrastructure service, null when this agent does not manage one. */
  service: Nullable(Type.Object({ status: Type.String(), health: Type.String() })),
});

export const Provider = Type.Object({
  name: Type.String(),
  label: Type.String(),
  description: Type.String(),
  segment: Type.String(),
  record_types: Type.Array(Type.String()),
  fields: Type.Array(
    Type.Object({
      name: Type.String(),
      type: Type.String(),
      required: Type.Boolean(),
      secret: Type.Boolean(),
      description: Type.String(),
      default: Nullable(Type.String()),
    }),
  ),
});
