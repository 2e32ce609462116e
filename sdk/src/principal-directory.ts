/**
 * Who is behind a request. The kernel checks every route's permission against a principal, but it does not keep
 * users or keys itself: a plugin (the built-in `access`) provides the principal directory, and the kernel lends
 * that plugin what it needs to be one (token signing, the permission catalogue, the login settings).
 */
import { createServiceRef } from './services.js';
import type { Principal, PrincipalInfo, Role } from './principal.js';

/** What the kernel asks about principals: exactly one plugin must provide it. */
export interface PrincipalDirectory {
  /**
   * The principal behind a bearer credential (a token or a raw API key), or null. Synchronous when the answer is
   * in memory (the common case): no promise per request.
   */
  authenticate(bearer: string, ip: string): Principal | null | Promise<Principal | null>;
  /** What a principal id (`user:3`, `api_key:5`, `system:observability`) may do now; null when it no longer can act. */
  principalById(id: string): PrincipalInfo | null;
  /** A token for an app plugin's own principal (admin rights; valid until the agent restarts). */
  issueSystemToken(plugin: string): Promise<string>;
}

export const principalDirectory = createServiceRef<PrincipalDirectory>('principals', 'who is behind a bearer credential or a principal id');

export interface TokenClaims {
  /** Opaque to the kernel: the directory's own subject, e.g. `u:3`. */
  sub: string;
  /** A version the directory compares (a user's password change bumps it and kills older tokens). */
  tv: number;
  /** Expiry, epoch seconds. */
  exp: number;
}

/** A resource a plugin declares: its permissions, what the role presets get, and who owns it (tenancy). */
export interface ResourcePolicy {
  name: string;
  description: string;
  /** What the `operator` and `viewer` presets get on this resource. */
  operator: 'none' | 'read' | 'write';
  viewer: 'none' | 'read';
  /** Tenancy: `deployment`-owned, `global`, or `both`. */
  owner: 'deployment' | 'global' | 'both';
  plugin: string;
}

/** The permission catalogue every plugin declares into, as the principal directory reads it. */
export interface ResourceCatalogue {
  list(): readonly ResourcePolicy[];
  /** Permissions a role preset grants, e.g. `deployments:write`. */
  rolePermissions(role: Role): string[];
  isValidPermission(permission: string): boolean;
  /** Called whenever a plugin declares or drops resources (role presets change then). */
  onChange(listener: () => void): () => void;
}

/** What the kernel lends the principal directory. */
export interface AuthKernel {
  /** Signs a token (HS256, the agent's key); `notAfter` (epoch seconds) caps the expiry, `ttlSeconds` replaces `auth.token_ttl`. */
  issueToken(sub: string, version: number, options?: { notAfter?: number; ttlSeconds?: number }): Promise<{ token: string; expires_at: string }>;
  /** The claims of a token this agent signed and that has not expired, or null. */
  verifyToken(token: string): Promise<TokenClaims | null>;
  readonly resources: ResourceCatalogue;
  /** The `auth` and `admin_password` settings of the agent's configuration (durations in seconds). */
  readonly settings: {
    admin_password: string | null;
    token_ttl: number;
    login_max_failures: number;
    login_max_failures_per_ip: number;
    lockout: number;
  };
  /**
   * Tells the operator, once, what only they may read (the first admin password): one log record, `message` with
   * `fields` (a JSON line when the log is not a terminal, as the journal and a pipe get it), or the `banner` lines
   * alone on a terminal. Whatever `fields` holds appears in no other log line.
   */
  announce(notice: {
    /** Names the record, for readers that pick it out (`"event":"admin.first_password"`). */
    event: string;
    message: string;
    fields: Record<string, string>;
    banner: string[];
  }): void;
}
