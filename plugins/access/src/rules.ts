/**
 * The delegation rule: a principal never hands out more than it holds — a role above its own, a permission it
 * lacks, or a deployment level above its own. Admins hold everything.
 */
import { errors, levelRank, type AccessLevel, type IdentityService, type Principal, type Role } from '@agent/sdk';

export const ROLE_RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

export function assertRoleWithin(principal: Principal, role: Role): void {
  if (principal.isAdmin) return;
  if (ROLE_RANK[role] > ROLE_RANK[principal.role]) {
    throw errors.forbidden(`role '${role}' is above your own role '${principal.role}'`, 'GRANT_EXCEEDS_OWN');
  }
}

/** Every permission of `role` plus `extra` must be held by the principal. */
export function assertPermissionsWithin(principal: Principal, identity: IdentityService, role: Role, extra: string[]): void {
  for (const p of extra) {
    if (!identity.isValidPermission(p)) throw errors.badRequest(`unknown permission '${p}'`, 'INVALID_PERMISSION', { field: 'permissions' });
  }
  if (principal.isAdmin) return;
  for (const p of [...identity.rolePermissions(role), ...extra]) {
    if (p === '*:write' || p === '*:read' || !principal.can(p)) {
      throw errors.forbidden(`you cannot grant '${p}': you do not hold it`, 'GRANT_EXCEEDS_OWN');
    }
  }
}

export function assertLevelWithin(principal: Principal, deployment: string, level: AccessLevel): void {
  if (principal.isAdmin) return;
  const own = principal.deploymentLevel(deployment);
  if (levelRank(own) < levelRank(level)) {
    throw errors.forbidden(`you cannot grant '${level}' on deployment '${deployment}': your level is ${own ?? 'none'}`, 'GRANT_EXCEEDS_OWN');
  }
}
