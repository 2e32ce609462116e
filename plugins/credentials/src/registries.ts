/**
 * Registry configurations: the hosted registries are built in and read-only; custom ones (a private registry,
 * a self-hosted GitLab, …) are created, changed and removed by slug.
 */
import type { Document } from '@agent/sdk';

export const REGISTRY_TYPES = ['dockerhub', 'ghcr', 'gitlab', 'quay', 'generic'] as const;
export type RegistryType = (typeof REGISTRY_TYPES)[number];

export const SLUG = '^[a-z0-9][a-z0-9-]{0,62}$';
/** `host[:port]`, lower case: a DNS name or an IPv4 address. */
export const REGISTRY_HOST = '^(?=.{1,253}(:|$))[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*(?::[0-9]{1,5})?$';

export interface Registry {
  slug: string;
  name: string;
  type: RegistryType;
  /** Host (and port) as it appears in image references. */
  host: string;
  /** Plain HTTP instead of HTTPS (a registry on loopback or a trusted LAN). */
  insecure: boolean;
  description: string;
  builtin: boolean;
  created_at: string | null;
  updated_at: string | null;
}

interface BuiltinRegistry extends Registry {
  /** Other hosts image references use for the same registry. */
  aliases: string[];
  /** Where the registry API answers, when it differs from `host`. */
  api_host?: string;
}

const builtin = (slug: string, name: string, type: RegistryType, host: string, extra: Partial<BuiltinRegistry> = {}): BuiltinRegistry => ({
  slug,
  name,
  type,
  host,
  insecure: false,
  description: `${name} (built in)`,
  builtin: true,
  created_at: null,
  updated_at: null,
  aliases: [],
  ...extra,
});

export const BUILTIN_REGISTRIES: readonly BuiltinRegistry[] = [
  builtin('dockerhub', 'Docker Hub', 'dockerhub', 'docker.io', { aliases: ['index.docker.io', 'registry-1.docker.io'], api_host: 'registry-1.docker.io' }),
  builtin('ghcr', 'GitHub Container Registry', 'ghcr', 'ghcr.io'),
  builtin('gitlab', 'GitLab Container Registry', 'gitlab', 'registry.gitlab.com'),
  builtin('quay', 'Quay.io', 'quay', 'quay.io'),
];

export interface RegistriesDoc {
  registries: Registry[];
}

const isLoopback = (host: string) => /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost)(:\d+)?$/.test(host);

export class RegistryCatalog {
  constructor(private readonly doc: Document<RegistriesDoc>) {}

  list(): Registry[] {
    return [...BUILTIN_REGISTRIES.map(publicRegistry), ...this.doc.data.registries.map((r) => ({ ...r }))];
  }

  get(slug: string): Registry | undefined {
    const b = BUILTIN_REGISTRIES.find((r) => r.slug === slug);
    if (b) return publicRegistry(b);
    const r = this.doc.data.registries.find((x) => x.slug === slug);
    return r ? { ...r } : undefined;
  }

  /** Registries an image host belongs to (a host may be configured under several slugs). */
  forHost(host: string): Registry[] {
    return this.list().filter((r) => r.host === host || BUILTIN_REGISTRIES.find((b) => b.slug === r.slug)?.aliases.includes(host));
  }

  /** Base URL of the registry API (`/v2/` is appended by callers). */
  apiBase(registry: Registry): string {
    const api = BUILTIN_REGISTRIES.find((b) => b.slug === registry.slug)?.api_host ?? registry.host;
    return `${registry.insecure || isLoopback(registry.host) ? 'http' : 'https'}://${api}`;
  }

  get custom(): Document<RegistriesDoc> {
    return this.doc;
  }
}

function publicRegistry({ aliases: _a, api_host: _h, ...r }: BuiltinRegistry): Registry {
  return { ...r };
}

/** The registry host of an image reference: its first component when that names a host, else Docker Hub. */
export function imageRegistryHost(ref: string): string {
  const slash = ref.indexOf('/');
  if (slash > 0) {
    const first = ref.slice(0, slash);
    if (first.includes('.') || first.includes(':') || first === 'localhost') return first.toLowerCase();
  }
  return 'docker.io';
}
