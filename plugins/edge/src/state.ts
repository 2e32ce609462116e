/** The edge plugin's persistent state (one JSON document): domains, certificates' metadata, contributors' folders. */

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

export interface CertificateMeta {
  domain: string;
  names: string[];
  auto_renew: boolean;
  deployment: string | null;
  last_error: string | null;
  last_attempt_at: string | null;
}

/** The security rules an older edge kept in this document, until the security plugin takes them (see legacy.ts). */
export const LEGACY_SECURITY_KEYS = ['blocked', 'whitelist', 'protected', 'deployment_security'] as const;

export interface EdgeState {
  next_id: number;
  domains: DomainEntry[];
  certificates: CertificateMeta[];
  /**
   * Folders of the contributors rendered by the last applied configuration: the files of one that is no longer
   * loaded (its plugin disabled) are removed at the next change, so nginx keeps nothing of it.
   */
  contributors: string[];
}

export const emptyState = (): EdgeState => ({ next_id: 1, domains: [], certificates: [], contributors: [] });

/** Every host name a domain entry answers to. */
export const namesOf = (d: Pick<DomainEntry, 'domain' | 'aliases'>) => [d.domain, ...d.aliases];
