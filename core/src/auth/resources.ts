/** The permission catalogue: resources declared by the core and the plugins, and what each role preset gets. */
import { compareText } from '@agent/sdk';
import type { ResourceCatalogue, ResourcePolicy, Role } from '@agent/sdk';

export class ResourceCatalog implements ResourceCatalogue {
  private readonly policies = new Map<string, ResourcePolicy>();
  private readonly listeners = new Set<() => void>();
  // The catalogue changes only while plugins are set up; `/auth/validate` reads it on every call.
  private sorted: readonly ResourcePolicy[] | null = null;

  declare(policy: ResourcePolicy): void {
    if (!/^[a-z][a-z0-9-]*$/.test(policy.name)) throw new Error(`invalid resource name '${policy.name}'`);
    const existing = this.policies.get(policy.name);
    if (existing && existing.plugin !== policy.plugin) {
      throw new Error(`resource '${policy.name}' is already declared by plugin '${existing.plugin}'`);
    }
    this.policies.set(policy.name, policy);
    this.changed();
  }

  /** Forgets the resources of a plugin whose setup failed. */
  dropPlugin(plugin: string): void {
    for (const [name, p] of this.policies) if (p.plugin === plugin) this.policies.delete(name);
    this.changed();
  }

  private changed(): void {
    this.sorted = null;
    for (const listener of this.listeners) listener();
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  list(): readonly ResourcePolicy[] {
    return (this.sorted ??= Object.freeze([...this.policies.values()].sort((a, b) => compareText(a.name, b.name))));
  }

  rolePermissions(role: Role): string[] {
    if (role === 'admin') return ['*:write'];
    const perms: string[] = [];
    for (const p of this.policies.values()) {
      const level = role === 'operator' ? p.operator : p.viewer;
      if (level === 'write') perms.push(`${p.name}:read`, `${p.name}:write`);
      else if (level === 'read') perms.push(`${p.name}:read`);
    }
    return perms;
  }

  isValidPermission(permission: string): boolean {
    const m = /^([a-z][a-z0-9-]*|\*):(read|write)$/.exec(permission);
    return !!m && (m[1] === '*' || this.policies.has(m[1]!));
  }
}
