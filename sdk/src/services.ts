/**
 * Typed service references: how plugins share capabilities without importing each other.
 * A provider calls `ctx.services.provide(ref, impl)`; a consumer lists the ref in `requires`
 * (or `optional`) and calls `ctx.services.get(ref)`.
 */
export interface ServiceRef<T> {
  readonly id: string;
  readonly description?: string;
  /** Phantom field carrying the type; never set at run time. */
  readonly __type?: T;
}

export function createServiceRef<T>(id: string, description?: string): ServiceRef<T> {
  if (!/^[a-z][a-z0-9.-]*$/.test(id)) throw new Error(`invalid service id '${id}'`);
  return Object.freeze({ id, description }) as ServiceRef<T>;
}

export interface ServiceRegistry {
  provide<T>(ref: ServiceRef<T>, implementation: T): void;
  /** A service listed in `requires` (always present) or `optional` (throws when absent: use `optional()`). */
  get<T>(ref: ServiceRef<T>): T;
  optional<T>(ref: ServiceRef<T>): T | undefined;
}
