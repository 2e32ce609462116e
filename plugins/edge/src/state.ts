/** The edge plugin's persistent state (one JSON document): domains and the security rules nginx enforces. */

export interface DomainEntry {
  id: number;
  deployment: string;
  service: string;
  domain: string;
  container_port: number;
  path_prefix: string;
  strip_prefix: boolean;
  ssl: { enabled: boolean };
  aliases: string[];
  created_at: string;
  updated_at: string;
  /** Last upstream address that resolved (`ip:port`), used while the engine does not answer. */
  last_upstream: string | null;
}

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

export interface CertificateMeta {
  domain: string;
  names: string[];
  auto_renew: boolean;
  deployment: string | null;
  last_error: string | null;
  last_attempt_at: string | null;
}

export interface EdgeState {
  next_id: number;
  domains: DomainEntry[];
  blocked: BlockedIp[];
  whitelist: WhitelistEntry[];
  protected: ProtectedRoute[];
  deployment_security: Record<string, DeploymentSecurity>;
  certificates: CertificateMeta[];
}

export const emptyState = (): EdgeState => ({
  next_id: 1,
  domains: [],
  blocked: [],
  whitelist: [],
  protected: [],
  deployment_security: {},
  certificates: [],
});

export const defaultDeploymentSecurity = (): DeploymentSecurity => ({ enabled: true, blocked_ips: [], protected_paths: [], rate_limits: [] });

/** Every host name a domain entry answers to. */
export const namesOf = (d: Pick<DomainEntry, 'domain' | 'aliases'>) => [d.domain, ...d.aliases];

export const isExpired = (b: BlockedIp, now = Date.now()) => b.expires_at !== null && Date.parse(b.expires_at) <= now;
