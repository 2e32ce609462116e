/**
 * The exports of a CommonJS module loaded with `import()`. Node gives its named exports and `default` (the
 * `module.exports` object); the agent's bundle (scripts/lib.mjs) gives only `default`. Either way this returns
 * the `module.exports` object:
 *
 *   const { json } = cjsExports(await import('co-body'));
 */
export function cjsExports<T extends object>(namespace: T): T {
  const exported = (namespace as { default?: unknown }).default;
  return exported !== null && (typeof exported === 'object' || typeof exported === 'function') ? (exported as T) : namespace;
}
