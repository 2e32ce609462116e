/** `.env` files: parse, serialise, and spot which values are secrets (by their key). */

export const ENV_KEY = '^[A-Za-z_][A-Za-z0-9_]{0,127}$';
const KEY_RE = new RegExp(ENV_KEY);
const SECRET_KEY = /(pass(word|wd)?|secret|token|(api|private|access|secret)_?key|credential|auth|salt|dsn|jwt|cert)/i;

export const isSecretKey = (key: string): boolean => SECRET_KEY.test(key);
export const REDACTED = '********';

/**
 * One binding: optional `export`, the key, `=` (blanks around it), then the value. Anything else on a line (a
 * comment, a blank line, a name without `=`) is not a binding and is skipped, as compose v1 skips it.
 */
const BINDING = /[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*/y;
/** What may follow a closing quote: blanks and a comment, up to the end of the line. */
const AFTER_QUOTE = /[ \t]*(?:#[^\n]*)?(?:\n|$)/y;
/** Escapes of double-quoted values that compose v1 (python-dotenv) and v2 (compose-go) both decode. */
const ESCAPES: Record<string, string> = { '\\': '\\', "'": "'", '"': '"', a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };

/**
 * Reads a `.env` file the way compose does where its two flavours agree (the agent hands compose these values
 * again, in a copy it writes: what is read here is what compose gets). `export`, blanks around `=`, comments
 * (whole lines, or after a blank in an unquoted value), empty values, `=` in values, single and double quotes
 * (a value may span lines inside them; text after the closing quote but a comment is an error, and so is a quote
 * never closed: the binding is left out), double-quoted escapes (`\\ \" \' \n \t \r \a \b \f \v`; another
 * backslash stays), `\'` in single quotes. Later keys win. `${VAR}` is left as written: compose expands it in
 * the copy. Not the `dotenv` package: it keeps `\"` and `\\` as written (so our own `serializeEnv` output
 * would not read back), drops backticks and cuts `a#b` at the `#`, where compose does neither (test/env-file.test.ts).
 */
export function parseEnv(text: string): Record<string, string> {
  const src = text.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
  const endOfLine = (from: number) => {
    const at = src.indexOf('\n', from);
    return at === -1 ? src.length : at;
  };
  const out: Record<string, string> = {};
  let at = 0;
  while (at < src.length) {
    BINDING.lastIndex = at;
    const binding = BINDING.exec(src);
    if (!binding) {
      at = endOfLine(at) + 1;
      continue;
    }
    const start = BINDING.lastIndex;
    const quote = src[start];
    if (quote !== '"' && quote !== "'") {
      const end = endOfLine(start);
      out[binding[1]!] = src
        .slice(start, end)
        .replace(/\s+#.*$/, '')
        .trimEnd();
      at = end + 1;
      continue;
    }
    let close = start + 1;
    while (close < src.length && src[close] !== quote) close += src[close] === '\\' ? 2 : 1;
    // Never closed: the rest of the line where it opened is skipped, and reading goes on at the next one.
    if (close >= src.length) {
      at = endOfLine(start) + 1;
      continue;
    }
    AFTER_QUOTE.lastIndex = close + 1;
    if (!AFTER_QUOTE.test(src)) {
      at = endOfLine(close) + 1;
      continue;
    }
    const raw = src.slice(start + 1, close);
    out[binding[1]!] = quote === '"' ? raw.replace(/\\([\\'"abfnrtv])/g, (_, c: string) => ESCAPES[c]!) : raw.replace(/\\'/g, "'");
    at = AFTER_QUOTE.lastIndex;
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
