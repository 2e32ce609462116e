/**
 * Redaction of secrets in anything the agent shows back: plans, audit details, logs.
 * A value is secret when its schema says `writeOnly`, or its key looks like one.
 */
export const REDACTED = '[redacted]';

const SECRET_KEY = /(passw(or)?d|passphrase|secret|token|api_?key|credentials?|private_?key|access_?key|secret_?key)s?$/i;

/** Copies `value`, replacing every secret-looking key's value. */
export function redactDeep(value: unknown, depth = 0): unknown {
  if (depth > 20 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = SECRET_KEY.test(k) && v !== null && v !== undefined && v !== '' && typeof v !== 'boolean' ? REDACTED : redactDeep(v, depth + 1);
  }
  return out;
}

interface SchemaLike {
  type?: unknown;
  properties?: Record<string, SchemaLike>;
  items?: SchemaLike;
  writeOnly?: boolean;
  anyOf?: SchemaLike[];
  oneOf?: SchemaLike[];
}

/** Redacts what the schema marks `writeOnly`, then anything that looks secret. */
export function redactBySchema(value: unknown, schema: SchemaLike | undefined): unknown {
  const walk = (v: unknown, s: SchemaLike | undefined): unknown => {
    if (!s || v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return s.items ? v.map((item) => walk(item, s.items)) : v;
    const out: Record<string, unknown> = { ...(v as Record<string, unknown>) };
    const variants = [s, ...(s.anyOf ?? []), ...(s.oneOf ?? [])];
    for (const variant of variants) {
      for (const [k, sub] of Object.entries(variant.properties ?? {})) {
        if (!(k in out)) continue;
        out[k] = sub.writeOnly ? REDACTED : walk(out[k], sub);
      }
    }
    return out;
  };
  return redactDeep(walk(value, schema));
}
