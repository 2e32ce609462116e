/** Getting the description of an agent: from the cache when it is current, from the agent otherwise. */
import type { AgentClient } from './agent-client.js';
import { ApiDescription } from './description.js';
import { DescriptionCache } from './description-cache.js';

export interface LoadOptions {
  cache?: DescriptionCache;
  /** Download even when a cached copy exists. */
  refresh?: boolean;
  /** A cached copy older than this is downloaded again (default 10 minutes). */
  maxAgeMs?: number;
}

export interface LoadedDescription {
  description: ApiDescription;
  /** True when it was downloaded by this call. */
  fresh: boolean;
  version: string;
}

export const DEFAULT_DESCRIPTION_MAX_AGE_MS = 10 * 60_000;

export async function loadDescription(client: AgentClient, options: LoadOptions = {}): Promise<LoadedDescription> {
  const cache = options.cache ?? new DescriptionCache();
  // The version is public: a cheap request tells whether the cached copy still describes this agent.
  const { version } = await client.health();
  const maxAge = options.maxAgeMs ?? DEFAULT_DESCRIPTION_MAX_AGE_MS;
  if (!options.refresh) {
    const cached = cache.get(client.url, version);
    if (cached && Date.now() - Date.parse(cached.fetched_at) < maxAge) {
      return { description: new ApiDescription(cached.document), fresh: false, version };
    }
  }
  const document = await client.description();
  cache.put(client.url, version, document);
  return { description: new ApiDescription(document), fresh: true, version };
}
