/**
 * Typed service references: how plugins share capabilities without importing each other's code. A provider lists
 * the ref in `provides` and returns the implementation from `setup`; a consumer lists it in `deps` and receives it.
 * A provider's refs and contract types live in its package's `api` entry (e.g. `@agent/plugin-docker/api`).
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
