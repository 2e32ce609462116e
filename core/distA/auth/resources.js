/** The permission catalogue: resources declared by the core and the plugins, and what each role preset gets. */
import { compareText } from '@agent/sdk';
export class ResourceCatalog {
    policies = new Map();
    cache = new Map();
    declare(policy) {
        if (!/^[a-z][a-z0-9-]*$/.test(policy.name))
            throw new Error(`invalid resource name '${policy.name}'`);
        const existing = this.policies.get(policy.name);
        if (existing && existing.plugin !== policy.plugin) {
            throw new Error(`resource '${policy.name}' is already declared by plugin '${existing.plugin}'`);
        }
        this.policies.set(policy.name, policy);
        this.cache.clear();
    }
    /** Forgets the resources of a plugin whose setup failed. */
    dropPlugin(plugin) {
        for (const [name, p] of this.policies)
            if (p.plugin === plugin)
                this.policies.delete(name);
        this.cache.clear();
    }
    has(name) {
        return this.policies.has(name);
    }
    list() {
        return [...this.policies.values()].sort((a, b) => compareText(a.name, b.name));
    }
    rolePermissions(role) {
        const cached = this.cache.get(role);
        if (cached)
            return cached;
        let perms;
        if (role === 'admin')
            perms = ['*:write'];
        else {
            perms = [];
            for (const p of this.policies.values()) {
                const level = role === 'operator' ? p.operator : p.viewer;
                if (level === 'write')
                    perms.push(`${p.name}:read`, `${p.name}:write`);
                else if (level === 'read')
                    perms.push(`${p.name}:read`);
            }
        }
        this.cache.set(role, perms);
        return perms;
    }
    isValidPermission(permission) {
        const m = /^([a-z][a-z0-9-]*|\*):(read|write)$/.exec(permission);
        return !!m && (m[1] === '*' || this.policies.has(m[1]));
    }
}
//# sourceMappingURL=resources.js.map