/** `.env` files: parse, serialise, and spot which values are secrets (by their key). */

export const ENV_KEY = '^[A-Za-z_][A-Za-z0-9_]{0,127}$';
const KEY_RE = new RegExp(ENV_KEY);
const SECRET_KEY = /(pass(word|wd)?|secret|token|(api|private|access|secret)_?key|credential|auth|salt|dsn|jwt|cert)/i;

export const isSecretKey = (key: string): boolean => SECRET_KEY.test(key);
export const REDACTED = '********';

/** Parses `KEY=value` lines (comments, blank lines, `export`, single/double quotes). Later keys win. */
export function parseEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)$/.exec(line);
    if (!m) continue;
    let value = m[2]!;
    if (value.length >= 2 && ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'")))) {
      const quoted = value[0] === '"';
      value = value.slice(1, -1);
      if (quoted) value = value.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    } else {
      value = value.replace(/\s+#.*$/, '');
    }
    out[m[1]!] = value;
  }
  return out;
}

/** Serialises values so both compose v1 and v2 read them back unchanged. */
export function serializeEnv(vars: Record<string, string>): string {
  const lines = Object.entries(vars).map(([k, v]) => {
    if (/^[A-Za-z0-9_./:@+,-]*$/.test(v)) return `${k}=${v}`;
    return `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
  });
  return lines.length ? lines.join('\n') + '\n' : '';
}

/** Problems with `env_vars` from a request: bad or duplicate keys, control characters. */
export function envProblems(vars: { key: string; value: string }[], field = 'env_vars'): string | null {
  const seen = new Set<string>();
  for (const [i, { key, value }] of vars.entries()) {
    if (!KEY_RE.test(key)) return `${field}[${i}].key: '${key}' is not a valid variable name`;
    if (seen.has(key)) return `${field}[${i}].key: '${key}' is given twice`;
    seen.add(key);
    if (/[\0\r]/.test(value)) return `${field}[${i}].value: control characters are not allowed`;
  }
  return null;
}

export function redactEnv(vars: Record<string, string>): { key: string; value: string; secret: boolean }[] {
  return Object.entries(vars).map(([key, value]) => (isSecretKey(key) ? { key, value: REDACTED, secret: true } : { key, value, secret: false }));
}
