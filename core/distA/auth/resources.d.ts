import type { ResourcePolicy, Role } from '@agent/sdk';
export declare class ResourceCatalog {
    private readonly policies;
    private cache;
    declare(policy: ResourcePolicy): void;
    /** Forgets the resources of a plugin whose setup failed. */
    dropPlugin(plugin: string): void;
    has(name: string): boolean;
    list(): ResourcePolicy[];
    rolePermissions(role: Role): string[];
    isValidPermission(permission: string): boolean;
}
//# sourceMappingURL=resources.d.ts.map