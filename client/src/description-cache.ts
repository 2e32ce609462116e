/**
 * The description of each agent is cached per agent URL and version (`$XDG_CACHE_HOME/agentctl/descriptions/`),
 * so commands and completion work without downloading it every time. An upgraded agent reports another version
 * and gets a fresh download; the CLI also refreshes when a command is unknown or the copy is older than its TTL.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir, writePrivateFile } from './profiles.js';

export interface CachedDescription {
  url: string;
  version: string;
  fetched_at: string;
  document: Record<string, unknown>;
}

const urlKey = (url: string) => createHash('sha256').update(url).digest('hex').slice(0, 16);
const safeVersion = (v: string) => v.replace(/[^A-Za-z0-9._+-]/g, '_').slice(0, 64);

export class DescriptionCache {
  readonly dir: string;

  constructor(env: NodeJS.ProcessEnv = process.env) {
    this.dir = join(cacheDir(env), 'descriptions');
  }

  private file(url: string, version: string): string {
    return join(this.dir, `${urlKey(url)}-${safeVersion(version)}.json`);
  }

  private load(path: string, url: string): CachedDescription | undefined {
    try {
      const entry = JSON.parse(readFileSync(path, 'utf8')) as CachedDescription;
      return entry.url === url && entry.document ? entry : undefined;
    } catch {
      return undefined;
    }
  }

  get(url: string, version: string): CachedDescription | undefined {
    const path = this.file(url, version);
    return existsSync(path) ? this.load(path, url) : undefined;
  }

  /** The most recently fetched description of an agent, whatever its version (for offline completion). */
  latest(url: string): CachedDescription | undefined {
    if (!existsSync(this.dir)) return undefined;
    const prefix = `${urlKey(url)}-`;
    const candidates = readdirSync(this.dir)
      .filter((f) => f.startsWith(prefix) && f.endsWith('.json'))
      .map((f) => join(this.dir, f))
      .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
    for (const path of candidates) {
      const entry = this.load(path, url);
      if (entry) return entry;
    }
    return undefined;
  }

  put(url: string, version: string, document: Record<string, unknown>): CachedDescription {
    const entry: CachedDescription = { url, version, fetched_at: new Date().toISOString(), document };
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    writePrivateFile(this.file(url, version), JSON.stringify(entry));
    return entry;
  }
}
