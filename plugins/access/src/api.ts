/**
 * The `identity` service: users, API keys and deployment grants as other plugins see them (provided by the access
 * plugin, which also is the agent's principal directory). Secrets (password hashes, key hashes) never leave it.
 */
import { createServiceRef, type AccessLevel, type Principal, type PrincipalInfo, type ResourcePolicy, type Role, type Scope } from '@agent/sdk';

export interface UserRecord {
  id: number;
  username: string;
  email: string;
  role: Role;
  permissions: string[];
  /** `deployments`: reaches only the deployments granted to it (the default for every role but admin). */
  scope: Scope;
  is_active: boolean;
  created_at: string;
  updated_at: string;
  last_login_at: string | null;
}

export interface ApiKeyRecord {
  id: number;
  user_id: number;
  name: string;
  description: string;
  role: Role;
  permissions: string[];
  deployments: string[];
  key_prefix: string;
  active: boolean;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  last_used_ip: string | null;
}

export interface DeploymentGrant {
  user_id: number;
  deployment: string;
  access_level: AccessLevel;
  granted_at: string;
}

export interface IdentityService {
  users: {
    list(): UserRecord[];
    get(id: number): UserRecord | undefined;
    findByUsername(username: string): UserRecord | undefined;
    create(input: {
      username: string; email: string; password: string; role: Role; permissions?: string[]; scope?: Scope; is_active?: boolean;
    }): Promise<UserRecord>;
    update(id: number, patch: Partial<Pick<UserRecord, 'email' | 'role' | 'permissions' | 'scope' | 'is_active'>>): Promise<UserRecord>;
    delete(id: number): Promise<void>;
    verifyPassword(id: number, password: string): Promise<boolean>;
    /** Sets the password; all existing tokens of the user stop working unless `keepSessions`. */
    setPassword(id: number, password: string, options?: { keepSessions?: boolean }): Promise<void>;
    /** Why a password is too weak, or null. */
    passwordProblem(password: string, username?: string): string | null;
    /** Issues a fresh token for the user (after a password change, for the session that made it). */
    issueToken(id: number): Promise<string>;
  };
  apiKeys: {
    list(filter?: { user_id?: number }): ApiKeyRecord[];
    get(id: number): ApiKeyRecord | undefined;
    create(input: {
      user_id: number; name: string; description?: string; role: Role; permissions?: string[]; deployments?: string[]; expires_in?: number;
    }): Promise<{ record: ApiKeyRecord; key: string }>;
    revoke(id: number): Promise<ApiKeyRecord>;
    delete(id: number): Promise<void>;
  };
  grants: {
    list(filter?: { user_id?: number; deployment?: string }): DeploymentGrant[];
    set(user_id: number, deployment: string, level: AccessLevel): Promise<DeploymentGrant>;
    remove(user_id: number, deployment: string): Promise<boolean>;
    /** Drops every grant on a deployment (when it is deleted). */
    removeDeployment(deployment: string): Promise<void>;
    /** Grants `admin` on a new deployment to whoever created it (the key's owner for an API key). */
    grantCreator(principal: Principal, deployment: string): Promise<void>;
  };
  /** Resource policies every plugin declared: the complete permission catalogue. */
  resources(): readonly ResourcePolicy[];
  /** Permissions a role preset grants, e.g. `deployments:write`. */
  rolePermissions(role: Role): string[];
  /** The principal of a user or key as the core would build it now (null when inactive/unknown). */
  principalOf(subject: { user_id: number } | { api_key_id: number }): PrincipalInfo | null;
  isValidPermission(permission: string): boolean;
}

export const identityService = createServiceRef<IdentityService>('identity', 'users, API keys and deployment grants');
