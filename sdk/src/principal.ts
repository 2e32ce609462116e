/** Who is making a request, and what they may do. Built by the core; plugins only read it. */

export type Access = 'read' | 'write';
export type Permission = `${string}:${Access}`;
export type AccessLevel = 'read' | 'write' | 'admin';
export type Role = 'admin' | 'operator' | 'viewer';
export type PrincipalType = 'user' | 'api_key' | 'system';
/**
 * `global`: may act on global state (users, settings, infrastructure, DNS, …) as far as its permissions go, and
 * on every deployment at the level its role gives. `deployments`: reaches only the deployments it holds grants on
 * (a user) or that its `deployments` list names (an API key), whatever its role and permissions say.
 */
export type Scope = 'global' | 'deployments';
export const SCOPES: readonly Scope[] = ['global', 'deployments'];

export const ROLES: readonly Role[] = ['admin', 'operator', 'viewer'];
export const ACCESS_LEVELS: readonly AccessLevel[] = ['read', 'write', 'admin'];

/** Ordering of deployment access levels: read < write < admin. */
export const levelRank = (level: AccessLevel | null | undefined): number => (level === 'admin' ? 3 : level === 'write' ? 2 : level === 'read' ? 1 : 0);

export const lowerLevel = (a: AccessLevel | null, b: AccessLevel | null): AccessLevel | null => (levelRank(a) <= levelRank(b) ? a : b);

/** The serialisable part of a principal: what apps behind the plugin proxy receive. */
export interface PrincipalInfo {
  type: PrincipalType;
  /** `user:<id>`, `api_key:<id>` or `system:<name>`. */
  id: string;
  name: string;
  role: Role;
  /** The user who owns this principal (the user itself, or the key's owner). */
  user_id: number | null;
  /** Effective permissions, e.g. `deployments:read`; `*:write` for admins. */
  permissions: string[];
  /** Deployment grants by name; `"*"` means every deployment at that level (global principals only). */
  deployments: Record<string, AccessLevel>;
  scope: Scope;
}

export interface Principal extends PrincipalInfo {
  /** A global principal that holds every permission. Never true for a scoped principal. */
  readonly isAdmin: boolean;
  /** `scope === 'global'`: may act on global state (within its permissions). */
  readonly isGlobal: boolean;
  /** Whether the principal holds `resource:access` (write implies read). */
  can(permission: Permission | string): boolean;
  /** The principal's level on one deployment, or null when it has none. */
  deploymentLevel(name: string): AccessLevel | null;
  /** Shorthand for `levelRank(deploymentLevel(name)) >= levelRank(level)`. */
  canAccessDeployment(name: string, level?: AccessLevel): boolean;
  toJSON(): PrincipalInfo;
}

/** Builds a `Principal` from its serialisable form (used by the core and by apps). */
export function principalFrom(info: PrincipalInfo): Principal {
  const perms = new Set(info.permissions);
  const isGlobal = info.scope === 'global';
  const isAdmin = isGlobal && info.role === 'admin' && perms.has('*:write');
  const can = (permission: string): boolean => {
    if (perms.has('*:write') || perms.has(permission)) return true;
    const [resource, access] = permission.split(':');
    if (access === 'read' && (perms.has(`${resource}:write`) || perms.has('*:read'))) return true;
    return false;
  };
  // A grant adds to the level every deployment has (`*`), it never lowers it; `*` counts for global principals only.
  const everywhere = isGlobal ? (info.deployments['*'] ?? null) : null;
  const deploymentLevel = (name: string): AccessLevel | null => {
    const own = info.deployments[name] ?? null;
    return levelRank(own) >= levelRank(everywhere) ? own : everywhere;
  };
  return {
    ...info,
    isAdmin,
    isGlobal,
    can,
    deploymentLevel,
    canAccessDeployment: (name, level = 'read') => levelRank(deploymentLevel(name)) >= levelRank(level),
    toJSON: () => ({ ...info }),
  };
}
