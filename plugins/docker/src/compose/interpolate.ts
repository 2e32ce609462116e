/** Compose-style `${VAR}` interpolation, so the host-safety policy checks the values compose will really use. */

const PATTERN = /\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g;

export function interpolateString(value: string, env: Record<string, string>): string {
  return value.replace(PATTERN, (whole, braced?: string, op?: string, arg?: string, bare?: string) => {
    if (whole === '$$') return '$';
    const name = braced ?? bare!;
    const set = Object.prototype.hasOwnProperty.call(env, name);
    const current = set ? env[name]! : '';
    switch (op) {
      case ':-':
        return set && current !== '' ? current : interpolateString(arg ?? '', env);
      case '-':
        return set ? current : interpolateString(arg ?? '', env);
      case ':+':
        return set && current !== '' ? interpolateString(arg ?? '', env) : '';
      case '+':
        return set ? interpolateString(arg ?? '', env) : '';
      default:
        return current;
    }
  });
}

/** Interpolates every string value (keys are left alone, as compose does). */
export function interpolate<T>(value: T, env: Record<string, string>): T {
  if (typeof value === 'string') return interpolateString(value, env) as T;
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env)) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env);
    return out as T;
  }
  return value;
}
