/**
 * Redaction of secrets in anything the agent shows back: plans, audit details, logs.
 * A value is secret when its schema says `writeOnly`, or its key looks like one.
 */
export const REDACTED = '[redacted]';
const SECRET_KEY = /(passw(or)?d|passphrase|secret|token|api_?key|credentials?|private_?key|access_?key|secret_?key)s?$/i;
export const isSecretKey = (key) => SECRET_KEY.test(key);
/** Copies `value`, replacing every secret-looking key's value. */
export function redactDeep(value, depth = 0) {
    if (depth > 20 || value === null || typeof value !== 'object')
        return value;
    if (Array.isArray(value))
        return value.map((v) => redactDeep(v, depth + 1));
    const out = {};
    for (const [k, v] of Object.entries(value)) {
        out[k] = isSecretKey(k) && v !== null && v !== undefined && v !== '' && typeof v !== 'boolean' ? REDACTED : redactDeep(v, depth + 1);
    }
    return out;
}
/** Redacts what the schema marks `writeOnly`, then anything that looks secret. */
export function redactBySchema(value, schema) {
    const walk = (v, s) => {
        if (!s || v === null || typeof v !== 'object')
            return v;
        if (Array.isArray(v))
            return s.items ? v.map((item) => walk(item, s.items)) : v;
        const out = { ...v };
        const variants = [s, ...(s.anyOf ?? []), ...(s.oneOf ?? [])];
        for (const variant of variants) {
            for (const [k, sub] of Object.entries(variant.properties ?? {})) {
                if (!(k in out))
                    continue;
                out[k] = sub.writeOnly ? REDACTED : walk(out[k], sub);
            }
        }
        return out;
    };
    return redactDeep(walk(value, schema));
}
//# sourceMappingURL=redact.js.map