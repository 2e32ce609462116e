/**
 * The delegation rule: a principal never hands out more than it holds — a role above its own, a permission it
 * lacks, a deployment level above its own, or a global scope when it is limited to deployments. These are plain
 * capability checks: a global admin passes them because it holds everything, not because of a short-cut.
 */
import { errors, levelRank, type AccessLevel, type Principal, type Role, type Scope } from '@agent/sdk';
import type { IdentityService } from './api.js';

export const ROLE_RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

export function assertRoleWithin(principal: Principal, role: Role): void {
  if (ROLE_RANK[role] > ROLE_RANK[principal.role]) {
    throw errors.forbidden(`role '${role}' is above your own role '${principal.role}'`, 'GRANT_EXCEEDS_OWN');
  }
}

/** Every permission of `role` plus `extra` must be held by the principal. */
export function assertPermissionsWithin(principal: Principal, identity: IdentityService, role: Role, extra: string[]): void {
  for (const p of extra) {
    if (!identity.isValidPermission(p)) throw errors.badRequest(`unknown permission '${p}'`, 'INVALID_PERMISSION', { field: 'permissions' });
  }
  for (const p of [...identity.rolePermissions(role), ...extra]) {
    if (((p === '*:write' || p === '*:read') && !principal.can('*:write')) || !principal.can(p)) {
      throw errors.forbidden(`you cannot grant '${p}': you do not hold it`, 'GRANT_EXCEEDS_OWN');
    }
  }
}

/** Only a global principal makes another one global. */
export function assertScopeWithin(principal: Principal, scope: Scope): void {
  if (scope === 'global' && !principal.isGlobal)
    throw errors.forbidden('you are limited to your deployments: you cannot make a global user', 'GRANT_EXCEEDS_OWN');
}

export function assertLevelWithin(principal: Principal, deployment: string, level: AccessLevel): void {
  const own = principal.deploymentLevel(deployment);
  if (levelRank(own) < levelRank(level)) {
    throw errors.forbidden(`you cannot grant '${level}' on deployment '${deployment}': your level is ${own ?? 'none'}`, 'GRANT_EXCEEDS_OWN');
  }
}
