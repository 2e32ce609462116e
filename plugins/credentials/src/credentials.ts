/**
 * Stored credentials: a document sealed with the agent's data key (AES-256-GCM), never answered in clear.
 *
 * A secret stays bound to where it was entered: each credential keeps the registry URL its password was given for
 * (`bound_url`). Moving it elsewhere (another registry) needs the password again in the same request; a credential
 * whose registry no longer answers at that URL is neither tested nor used for pulls until its password is re-entered.
 */
import { errors, HttpError, type Document } from '@agent/sdk';
import type { RegistryCatalog } from './registries.js';

export const MASK = '********';

export interface StoredCredential {
  id: number;
  name: string;
  type: 'registry';
  registry: string;
  username: string;
  password: string;
  description: string;
  created_at: string;
  updated_at: string;
  last_test: { at: string; valid: boolean; message: string } | null;
  /** The registry API URL the password was entered for: the only place it is ever sent. */
  bound_url: string;
}

export interface CredentialsDoc {
  next_id: number;
  credentials: StoredCredential[];
}

/** The URL a credential's password would go to now, or null when its registry is gone. */
export const currentUrl = (catalog: RegistryCatalog, c: StoredCredential): string | null => {
  const registry = catalog.get(c.registry);
  return registry ? catalog.apiBase(registry) : null;
};

/** Whether the credential may be sent to its registry: it answers at the URL the password was entered for. */
export const isBound = (catalog: RegistryCatalog, c: StoredCredential): boolean => currentUrl(catalog, c) === c.bound_url;

/** A password sent in clear (not absent, not the mask read back): the secret is entered again. */
export const reentered = (password: string | undefined): password is string => password !== undefined && password !== MASK;

export const reentryRequired = (message: string, credentials: number[], status = 400) =>
  new HttpError(status, 'SECRET_REENTRY_REQUIRED', message, { credentials });

export function findCredential(doc: Document<CredentialsDoc>, id: number): StoredCredential {
  const c = doc.data.credentials.find((x) => x.id === id);
  if (!c) throw errors.notFound(`credential ${id} not found`);
  return c;
}

/** A credential as answered: the password masked, with its registry's host and whether it is still bound there. */
export function credentialView(catalog: RegistryCatalog, c: StoredCredential) {
  return {
    id: c.id,
    name: c.name,
    type: c.type,
    registry: c.registry,
    registry_host: catalog.get(c.registry)?.host ?? null,
    credentials: { username: c.username, password: MASK as typeof MASK },
    description: c.description,
    created_at: c.created_at,
    updated_at: c.updated_at,
    last_test: c.last_test,
    bound_url: c.bound_url,
    bound: isBound(catalog, c),
  };
}
