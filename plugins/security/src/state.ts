/** The security plugin's persistent state (one JSON document): the rules nginx enforces. */

export interface BlockedIp {
  ip: string;
  reason: string;
  /** Set for blocks that only apply to one deployment. */
  deployment: string | null;
  auto: boolean;
  created_at: string;
  expires_at: string | null;
}

export interface WhitelistEntry {
  id: number;
  type: 'ip' | 'cidr' | 'path';
  value: string;
  description: string;
  created_at: string;
}

export interface ProtectedRoute {
  id: number;
  path: string;
  method: string;
  auth_type: 'basic';
  username: string;
  /** bcrypt hash; the password is never stored. */
  password_hash: string;
  deployment: string;
  enabled: boolean;
  created_at: string;
  updated_at: string;
}

export interface DeploymentSecurity {
  enabled: boolean;
  blocked_ips: string[];
  protected_paths: { pattern: string; enabled: boolean }[];
  rate_limits: { path: string; rate: number; burst: number; enabled: boolean }[];
}

export interface SecurityState {
  next_id: number;
  blocked: BlockedIp[];
  whitelist: WhitelistEntry[];
  protected: ProtectedRoute[];
  deployment_security: Record<string, DeploymentSecurity>;
  /** When the rules of an older edge were taken over (null: there were none to take, or not yet). */
  imported_from_edge_at: string | null;
}

export const emptyState = (): SecurityState => ({
  next_id: 1,
  blocked: [],
  whitelist: [],
  protected: [],
  deployment_security: {},
  imported_from_edge_at: null,
});

export const defaultDeploymentSecurity = (): DeploymentSecurity => ({ enabled: true, blocked_ips: [], protected_paths: [], rate_limits: [] });

export const isExpired = (b: BlockedIp, now = Date.now()) => b.expires_at !== null && Date.parse(b.expires_at) <= now;

/** Whether the state holds anything of a deployment (its rules go when it is deleted). */
export const holds = (s: SecurityState, deployment: string) =>
  s.protected.some((p) => p.deployment === deployment) || !!s.deployment_security[deployment] || s.blocked.some((b) => b.deployment === deployment);

/** Drops a deployment's rules from a state; true when there were some. */
export function forget(s: SecurityState, deployment: string): boolean {
  if (!holds(s, deployment)) return false;
  s.protected = s.protected.filter((p) => p.deployment !== deployment);
  delete s.deployment_security[deployment];
  s.blocked = s.blocked.filter((b) => b.deployment !== deployment);
  return true;
}
