/**
 * Named connection profiles in the user's config folder (`$XDG_CONFIG_HOME/agentctl/config.json`, else
 * `~/.config/agentctl/config.json`). The file holds tokens, so the folder is 0700 and the file 0600, written
 * atomically. Flags and `AGENTCTL_URL` / `AGENTCTL_TOKEN` / `AGENTCTL_PROFILE` override what is stored.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { normaliseUrl } from './agent-client.js';

export interface Profile {
  url: string;
  /** A JWT (password login) or an API key. */
  token: string;
  auth: 'password' | 'api_key' | 'token';
  username?: string;
  /** When the stored token stops working (JWTs); absent for API keys. */
  expires_at?: string;
  /** Set when the login happened. */
  saved_at: string;
}

export interface ProfileFile {
  current?: string;
  profiles: Record<string, Profile>;
}

export const DEFAULT_PROFILE = 'default';
const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith('/') ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'agentctl');
}

export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME && env.XDG_CACHE_HOME.startsWith('/') ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(base, 'agentctl');
}

export function checkProfileName(name: string): string {
  if (!PROFILE_NAME.test(name)) throw new Error(`invalid profile name '${name}' (letters, digits, '.', '_', '-'; up to 64)`);
  return name;
}

/** Writes a file readable by its owner only, atomically (temp file + rename). */
export function writePrivateFile(path: string, content: string): void {
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(tmp, content, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export class ProfileStore {
  readonly dir: string;
  readonly path: string;

  constructor(env: NodeJS.ProcessEnv = process.env) {
    this.dir = configDir(env);
    this.path = join(this.dir, 'config.json');
  }

  read(): ProfileFile {
    if (!existsSync(this.path)) return { profiles: {} };
    let parsed: ProfileFile;
    try {
      parsed = JSON.parse(readFileSync(this.path, 'utf8')) as ProfileFile;
    } catch (err) {
      throw new Error(`${this.path} is not valid JSON (${(err as Error).message}); fix or remove it`);
    }
    return { current: parsed.current, profiles: parsed.profiles ?? {} };
  }

  write(file: ProfileFile): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
    writePrivateFile(this.path, JSON.stringify(file, null, 2) + '\n');
  }

  get(name: string): Profile | undefined {
    return this.read().profiles[name];
  }

  /** Stores a profile and makes it the current one. */
  save(name: string, profile: Omit<Profile, 'saved_at' | 'url'> & { url: string }): Profile {
    checkProfileName(name);
    const file = this.read();
    const stored: Profile = { ...profile, url: normaliseUrl(profile.url), saved_at: new Date().toISOString() };
    file.profiles[name] = stored;
    file.current = name;
    this.write(file);
    return stored;
  }

  use(name: string): void {
    const file = this.read();
    if (!file.profiles[name]) throw new Error(`no profile '${name}' (known: ${Object.keys(file.profiles).join(', ') || 'none'})`);
    file.current = name;
    this.write(file);
  }

  remove(name: string): boolean {
    const file = this.read();
    if (!file.profiles[name]) return false;
    delete file.profiles[name];
    if (file.current === name) file.current = Object.keys(file.profiles)[0];
    this.write(file);
    return true;
  }
}

export interface ConnectionInput {
  /** `--profile` */
  profile?: string;
  /** `--url` */
  url?: string;
  /** `--token` */
  token?: string;
  env?: NodeJS.ProcessEnv;
  store?: ProfileStore;
}

export interface Connection {
  /** The profile in use (even when flags override parts of it). */
  profileName: string;
  profile?: Profile;
  url?: string;
  token?: string;
  /** Where the URL and the token came from, for messages. */
  source: { url: 'flag' | 'env' | 'profile' | 'none'; token: 'flag' | 'env' | 'profile' | 'none' };
}

/**
 * Resolves URL and token: flags, then environment, then the profile. A stored token is only used for the URL
 * it was issued by, so `--url https://elsewhere` never sends a profile's token to another server.
 */
export function resolveConnection(input: ConnectionInput = {}): Connection {
  const env = input.env ?? process.env;
  const store = input.store ?? new ProfileStore(env);
  const file = store.read();
  const profileName = input.profile ?? env.AGENTCTL_PROFILE ?? file.current ?? DEFAULT_PROFILE;
  const explicitProfile = input.profile !== undefined || env.AGENTCTL_PROFILE !== undefined;
  const profile = file.profiles[profileName];
  if (!profile && explicitProfile)
    throw new Error(
      `no profile '${profileName}' (known: ${Object.keys(file.profiles).join(', ') || 'none'}); create it with: agentctl login --profile ${profileName} --url …`,
    );
  const source: Connection['source'] = { url: 'none', token: 'none' };
  let url: string | undefined;
  if (input.url) {
    url = normaliseUrl(input.url);
    source.url = 'flag';
  } else if (env.AGENTCTL_URL) {
    url = normaliseUrl(env.AGENTCTL_URL);
    source.url = 'env';
  } else if (profile) {
    url = profile.url;
    source.url = 'profile';
  }
  let token: string | undefined;
  if (input.token) {
    token = input.token;
    source.token = 'flag';
  } else if (env.AGENTCTL_TOKEN) {
    token = env.AGENTCTL_TOKEN;
    source.token = 'env';
  } else if (profile && url === profile.url) {
    token = profile.token;
    source.token = 'profile';
  }
  return { profileName, profile, url, token, source };
}
