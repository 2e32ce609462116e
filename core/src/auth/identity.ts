/**
 * Users, API keys and deployment grants (core-owned principals), stored in one lowdb document, indexed in memory,
 * and the construction of a request's principal from them.
 */
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import {
  DEPLOYMENT_NAME, errors, lowerLevel, principalFrom, retiredName,
  type AccessLevel, type ApiKeyRecord, type DeploymentGrant, type Document, type IdentityService, type Principal,
  type PrincipalInfo, type Role, type Scope, type UserRecord,
} from '@agent/sdk';
import { hashPassword, passwordProblem, verifyPassword } from './passwords.js';
import type { ResourceCatalog } from './resources.js';
import type { TokenService } from './tokens.js';

interface StoredUser extends UserRecord {
  password_hash: string;
  token_version: number;
}

interface StoredKey extends ApiKeyRecord {
  key_hash: string;
}

export interface IdentityDoc {
  users: StoredUser[];
  api_keys: StoredKey[];
  grants: DeploymentGrant[];
  next_user_id: number;
  next_key_id: number;
}

export const emptyIdentity = (): IdentityDoc => ({ users: [], api_keys: [], grants: [], next_user_id: 1, next_key_id: 1 });

export const API_KEY_PREFIX = 'agk_';
const DEPLOYMENT_NAME_RE = new RegExp(DEPLOYMENT_NAME);
export const USERNAME = /^[A-Za-z0-9][A-Za-z0-9._-]{1,63}$/;
const EMAIL = /^[^\s@<>()"',;]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}$/;

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const now = (): string => new Date().toISOString();
const publicUser = ({ password_hash: _h, token_version: _t, ...u }: StoredUser): UserRecord => ({ ...u, permissions: [...u.permissions] });
const publicKey = ({ key_hash: _h, ...k }: StoredKey): ApiKeyRecord => ({ ...k, permissions: [...k.permissions], deployments: [...k.deployments] });

const ROLE_RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

/** The deployment level a role gives at most (and everywhere, for a global principal). */
const roleLevel = (role: Role): AccessLevel => (role === 'admin' ? 'admin' : role === 'operator' ? 'write' : 'read');

/** Caps a deployment level by what a role may do at most. */
const capByRole = (level: AccessLevel | null, role: Role): AccessLevel | null => lowerLevel(level, roleLevel(role));

/** Admins are global; every other role is limited to its deployments unless made global on purpose. */
const scopeFor = (role: Role, asked: Scope | undefined): Scope => {
  if (role === 'admin') {
    if (asked === 'deployments') throw errors.badRequest('scope: an admin is always global (give a scoped user the operator role and admin grants instead)', 'VALIDATION_FAILED', { field: 'scope' });
    return 'global';
  }
  return asked ?? 'deployments';
};

export class Identity implements IdentityService {
  private usersById = new Map<number, StoredUser>();
  private usersByName = new Map<string, StoredUser>();
  private keysById = new Map<number, StoredKey>();
  private keysByHash = new Map<string, StoredKey>();
  private principals = new Map<string, Principal>();
  /** Verified user tokens → principal; emptied with the principal cache whenever users, keys or grants change. */
  private readonly userTokens = new Map<string, { principal: Principal; exp: number }>();
  private lastUsedDirty = false;
  /** App plugins' own principals; their tokens are only valid for this run of the agent. */
  private readonly systemNames = new Set<string>();
  private readonly bootNonce = randomInt(1, 2 ** 31);
  /** A hash of a random string: checking an unknown user against it costs the same as a real check. */
  private readonly dummyHash = hashPassword(randomBytes(16).toString('hex'));

  constructor(
    private readonly doc: Document<IdentityDoc>,
    private readonly catalog: ResourceCatalog,
    private readonly tokens: TokenService,
  ) {
    this.reindex();
  }

  private reindex(): void {
    // Users stored before scopes existed: admins are global, everyone else is limited to their grants.
    for (const u of this.doc.data.users) u.scope ??= u.role === 'admin' ? 'global' : 'deployments';
    this.usersById = new Map(this.doc.data.users.map((u) => [u.id, u]));
    this.usersByName = new Map(this.doc.data.users.map((u) => [u.username.toLowerCase(), u]));
    this.keysById = new Map(this.doc.data.api_keys.map((k) => [k.id, k]));
    this.keysByHash = new Map(this.doc.data.api_keys.map((k) => [k.key_hash, k]));
    this.principals.clear();
    this.userTokens.clear();
  }

  private async change<R>(fn: (d: IdentityDoc) => R): Promise<R> {
    const result = await this.doc.update(fn);
    this.reindex();
    return result;
  }

  /** Drops cached principals (role presets change when plugins declare resources). */
  invalidate(): void {
    this.principals.clear();
    this.userTokens.clear();
  }

  private checkPermissions(permissions: string[]): void {
    for (const p of permissions) {
      if (!this.catalog.isValidPermission(p)) throw errors.badRequest(`unknown permission '${p}'`, 'INVALID_PERMISSION');
    }
  }

  // ---- users ----
  users: IdentityService['users'] = {
    list: () => this.doc.data.users.map(publicUser),
    get: (id) => {
      const u = this.usersById.get(id);
      return u ? publicUser(u) : undefined;
    },
    findByUsername: (username) => {
      const u = this.usersByName.get(username.toLowerCase());
      return u ? publicUser(u) : undefined;
    },
    create: async (input) => {
      if (!USERNAME.test(input.username)) throw errors.badRequest('username must be 2-64 characters of letters, digits, . _ -', 'INVALID_USERNAME');
      if (!EMAIL.test(input.email)) throw errors.badRequest(`'${input.email}' is not an e-mail address`, 'INVALID_EMAIL');
      this.checkPermissions(input.permissions ?? []);
      if (this.usersByName.has(input.username.toLowerCase())) throw errors.conflict(`user '${input.username}' exists`, 'USER_EXISTS');
      const hash = await hashPassword(input.password);
      return this.change((d) => {
        const user: StoredUser = {
          id: d.next_user_id++, username: input.username, email: input.email, role: input.role,
          permissions: [...new Set(input.permissions ?? [])], scope: scopeFor(input.role, input.scope), is_active: input.is_active ?? true,
          created_at: now(), updated_at: now(), last_login_at: null, password_hash: hash, token_version: 1,
        };
        d.users.push(user);
        return publicUser(user);
      });
    },
    update: async (id, patch) => {
      if (!this.usersById.has(id)) throw errors.notFound(`user ${id} not found`);
      if (patch.email !== undefined && !EMAIL.test(patch.email)) throw errors.badRequest(`'${patch.email}' is not an e-mail address`, 'INVALID_EMAIL');
      if (patch.permissions) this.checkPermissions(patch.permissions);
      const current = this.usersById.get(id)!;
      const role = patch.role ?? current.role;
      // Promoting to admin makes global; leaving admin returns to the deployments unless a scope is given.
      const scope = scopeFor(role, patch.scope ?? (role === 'admin' || current.role === 'admin' ? undefined : current.scope));
      return this.change((d) => {
        const u = d.users.find((x) => x.id === id)!;
        if (patch.email !== undefined) u.email = patch.email;
        if (patch.role !== undefined) u.role = patch.role;
        u.scope = scope;
        if (patch.permissions !== undefined) u.permissions = [...new Set(patch.permissions)];
        if (patch.is_active !== undefined) u.is_active = patch.is_active;
        u.updated_at = now();
        return publicUser(u);
      });
    },
    delete: async (id) => {
      if (!this.usersById.has(id)) throw errors.notFound(`user ${id} not found`);
      await this.change((d) => {
        d.users = d.users.filter((u) => u.id !== id);
        d.api_keys = d.api_keys.filter((k) => k.user_id !== id);
        d.grants = d.grants.filter((g) => g.user_id !== id);
      });
    },
    verifyPassword: async (id, password) => {
      const u = this.usersById.get(id);
      return !!u && verifyPassword(u.password_hash, password);
    },
    setPassword: async (id, password, options) => {
      if (!this.usersById.has(id)) throw errors.notFound(`user ${id} not found`);
      const hash = await hashPassword(password);
      await this.change((d) => {
        const u = d.users.find((x) => x.id === id)!;
        u.password_hash = hash;
        if (!options?.keepSessions) u.token_version++;
        u.updated_at = now();
      });
    },
    passwordProblem,
    issueToken: async (id) => {
      const u = this.usersById.get(id);
      if (!u) throw errors.notFound(`user ${id} not found`);
      return (await this.tokens.issue(`u:${u.id}`, u.token_version)).token;
    },
  };

  // ---- API keys ----
  apiKeys: IdentityService['apiKeys'] = {
    list: (filter) => this.doc.data.api_keys.filter((k) => filter?.user_id === undefined || k.user_id === filter.user_id).map(publicKey),
    get: (id) => {
      const k = this.keysById.get(id);
      return k ? publicKey(k) : undefined;
    },
    create: async (input) => {
      if (!this.usersById.has(input.user_id)) throw errors.notFound(`user ${input.user_id} not found`);
      this.checkPermissions(input.permissions ?? []);
      const key = API_KEY_PREFIX + randomBytes(32).toString('base64url');
      const record = await this.change((d) => {
        const k: StoredKey = {
          id: d.next_key_id++, user_id: input.user_id, name: input.name, description: input.description ?? '',
          role: input.role, permissions: [...new Set(input.permissions ?? [])], deployments: [...new Set(input.deployments ?? [])],
          key_prefix: key.slice(0, API_KEY_PREFIX.length + 6), active: true, created_at: now(),
          expires_at: input.expires_in ? new Date(Date.now() + input.expires_in * 1000).toISOString() : null,
          revoked_at: null, last_used_at: null, last_used_ip: null, key_hash: sha256(key),
        };
        d.api_keys.push(k);
        return publicKey(k);
      });
      return { record, key };
    },
    revoke: async (id) => {
      if (!this.keysById.has(id)) throw errors.notFound(`API key ${id} not found`);
      return this.change((d) => {
        const k = d.api_keys.find((x) => x.id === id)!;
        if (k.active) {
          k.active = false;
          k.revoked_at = now();
        }
        return publicKey(k);
      });
    },
    delete: async (id) => {
      if (!this.keysById.has(id)) throw errors.notFound(`API key ${id} not found`);
      await this.change((d) => {
        d.api_keys = d.api_keys.filter((k) => k.id !== id);
      });
    },
  };

  // ---- deployment grants ----
  grants: IdentityService['grants'] = {
    list: (filter) =>
      this.doc.data.grants
        .filter((g) => (filter?.user_id === undefined || g.user_id === filter.user_id) && (filter?.deployment === undefined || g.deployment === filter.deployment))
        .map((g) => ({ ...g })),
    set: async (user_id, deployment, level) => {
      if (!this.usersById.has(user_id)) throw errors.notFound(`user ${user_id} not found`);
      return this.change((d) => {
        let g = d.grants.find((x) => x.user_id === user_id && x.deployment === deployment);
        if (g) g.access_level = level;
        else {
          g = { user_id, deployment, access_level: level, granted_at: now() };
          d.grants.push(g);
        }
        return { ...g };
      });
    },
    remove: async (user_id, deployment) =>
      this.change((d) => {
        const before = d.grants.length;
        d.grants = d.grants.filter((g) => !(g.user_id === user_id && g.deployment === deployment));
        return d.grants.length !== before;
      }),
    removeDeployment: async (deployment) => {
      const keyed = this.doc.data.api_keys.some((k) => k.deployments.includes(deployment));
      if (!keyed && !this.doc.data.grants.some((g) => g.deployment === deployment)) return;
      const retired = retiredName(deployment, new Date());
      await this.change((d) => {
        d.grants = d.grants.filter((g) => g.deployment !== deployment);
        // A key listed for the deployment stays limited to its list: the name is retired there, never dropped (an
        // empty list would mean every deployment of the owner) and never left to reach a new deployment of that name.
        for (const k of d.api_keys) k.deployments = k.deployments.map((n) => (n === deployment ? retired : n));
      });
    },
    grantCreator: async (principal, deployment) => {
      // Whoever reaches every deployment as admin already has it; anyone else becomes admin of what they created.
      if (principal.user_id === null || principal.deploymentLevel('*') === 'admin') return;
      await this.grants.set(principal.user_id, deployment, 'admin');
    },
  };

  resources = () => this.catalog.list();
  resourcesByOwner = () => this.catalog.byOwner();
  rolePermissions = (role: Role) => this.catalog.rolePermissions(role);
  isValidPermission = (p: string) => this.catalog.isValidPermission(p);

  // ---- principals ----

  private userInfo(u: StoredUser): PrincipalInfo {
    const scope: Scope = u.role === 'admin' ? 'global' : u.scope;
    const deployments: Record<string, AccessLevel> = {};
    // A global principal reaches every deployment at its role's level; grants add to that, never lower it.
    if (scope === 'global') deployments['*'] = roleLevel(u.role);
    if (u.role !== 'admin') {
      for (const g of this.doc.data.grants) if (g.user_id === u.id) deployments[g.deployment] = g.access_level;
    }
    const permissions = u.role === 'admin' ? ['*:write'] : [...new Set([...this.catalog.rolePermissions(u.role), ...u.permissions])];
    return { type: 'user', id: `user:${u.id}`, name: u.username, role: u.role, user_id: u.id, permissions, deployments, scope };
  }

  /**
   * A key is the lower of itself and its owner. A key with a `deployments` list is scoped to them (and to what its
   * owner holds there), and never an admin: its role is capped at operator.
   */
  private keyInfo(k: StoredKey, owner: StoredUser): PrincipalInfo {
    const ownerInfo = this.userInfo(owner);
    const ownerP = principalFrom(ownerInfo);
    const listed = k.deployments.length > 0;
    const keyRole: Role = listed && k.role === 'admin' ? 'operator' : k.role;
    const role: Role = ROLE_RANK[keyRole] <= ROLE_RANK[owner.role] ? keyRole : owner.role;
    const keyPerms = keyRole === 'admin' ? ['*:write'] : [...new Set([...this.catalog.rolePermissions(keyRole), ...k.permissions])];
    let permissions: string[];
    if (keyPerms.includes('*:write')) permissions = ownerInfo.permissions;
    else {
      // The lower of the two: a key's write becomes read when the owner only reads.
      permissions = [];
      for (const p of keyPerms) {
        if (p === '*:write' || p === '*:read') continue;
        if (ownerP.can(p)) permissions.push(p);
        else if (p.endsWith(':write') && ownerP.can(p.replace(/:write$/, ':read'))) permissions.push(p.replace(/:write$/, ':read'));
      }
      permissions = [...new Set(permissions)];
    }
    const scope: Scope = listed ? 'deployments' : ownerInfo.scope;
    const deployments: Record<string, AccessLevel> = {};
    const names = listed ? k.deployments.filter((n) => DEPLOYMENT_NAME_RE.test(n)) : Object.keys(ownerInfo.deployments);
    for (const name of names) {
      const level = capByRole(name === '*' ? ownerInfo.deployments['*'] ?? null : ownerP.deploymentLevel(name), keyRole);
      if (level) deployments[name] = level;
    }
    return { type: 'api_key', id: `api_key:${k.id}`, name: k.name, role, user_id: owner.id, permissions, deployments, scope };
  }

  private systemInfo(name: string): PrincipalInfo {
    return { type: 'system', id: `system:${name}`, name, role: 'admin', user_id: null, permissions: ['*:write'], deployments: { '*': 'admin' }, scope: 'global' };
  }

  /** A token for an app plugin's system principal (admin rights; valid until the agent restarts). */
  async issueSystemToken(name: string): Promise<string> {
    this.systemNames.add(name);
    // Bound to this run by the boot nonce, so it needs no short expiry: the app keeps it until the agent restarts.
    return (await this.tokens.issue(`s:${name}`, this.bootNonce, undefined, 10 * 365 * 86400)).token;
  }

  /** Resolves a principal id (`user:3`, `api_key:5`, `system:observability`) to what it may do now. */
  principalById(id: string): PrincipalInfo | null {
    const [kind, rest] = [id.slice(0, id.indexOf(':')), id.slice(id.indexOf(':') + 1)];
    if (kind === 'user') return this.principalOf({ user_id: Number(rest) });
    if (kind === 'api_key') return this.principalOf({ api_key_id: Number(rest) });
    if (kind === 'system' && this.systemNames.has(rest)) return this.systemInfo(rest);
    return null;
  }

  principalOf(subject: { user_id: number } | { api_key_id: number }): PrincipalInfo | null {
    if ('user_id' in subject) {
      const u = this.usersById.get(subject.user_id);
      return u && u.is_active ? this.userInfo(u) : null;
    }
    const k = this.keysById.get(subject.api_key_id);
    if (!k || !this.keyUsable(k)) return null;
    const owner = this.usersById.get(k.user_id);
    return owner && owner.is_active ? this.keyInfo(k, owner) : null;
  }

  private keyUsable(k: StoredKey): boolean {
    return k.active && (k.expires_at === null || Date.parse(k.expires_at) > Date.now());
  }

  private cachedPrincipal(cacheKey: string, build: () => PrincipalInfo | null): Principal | null {
    const hit = this.principals.get(cacheKey);
    if (hit) return hit;
    const info = build();
    if (!info) return null;
    const p = principalFrom(info);
    this.principals.set(cacheKey, p);
    return p;
  }

  /** Password login; null when the user is unknown, inactive or the password is wrong. */
  async loginWithPassword(username: string, password: string): Promise<{ token: string; expires_at: string; user: UserRecord } | null> {
    const u = this.usersByName.get(username.toLowerCase());
    // Hash even for unknown users so timing does not reveal which names exist.
    const ok = await verifyPassword(u?.password_hash ?? (await this.dummyHash), password);
    if (!u || !ok || !u.is_active) return null;
    await this.change((d) => {
      d.users.find((x) => x.id === u.id)!.last_login_at = now();
    });
    const issued = await this.tokens.issue(`u:${u.id}`, u.token_version);
    return { ...issued, user: publicUser(this.usersById.get(u.id)!) };
  }

  /** API key login: exchanges a key for a token that expires no later than the key. */
  async loginWithApiKey(key: string, ip: string): Promise<{ token: string; expires_at: string; api_key: ApiKeyRecord } | null> {
    const k = this.findKey(key);
    if (!k || !this.principalOf({ api_key_id: k.id })) return null;
    this.touchKey(k, ip);
    const maxExpiry = k.expires_at ? Math.floor(Date.parse(k.expires_at) / 1000) : undefined;
    const issued = await this.tokens.issue(`k:${k.id}`, 0, maxExpiry);
    return { ...issued, api_key: publicKey(k) };
  }

  private findKey(key: string): StoredKey | undefined {
    if (!key.startsWith(API_KEY_PREFIX)) return undefined;
    const hash = sha256(key);
    const k = this.keysByHash.get(hash);
    // The map lookup already matched; the constant-time compare guards against a future index change.
    return k && timingSafeEqual(Buffer.from(k.key_hash), Buffer.from(hash)) ? k : undefined;
  }

  private touchKey(k: StoredKey, ip: string): void {
    k.last_used_at = now();
    k.last_used_ip = ip;
    if (!this.lastUsedDirty) {
      this.lastUsedDirty = true;
      // Usage stamps are written at most every few seconds, not once per request.
      setTimeout(() => {
        this.lastUsedDirty = false;
        void this.doc.update(() => undefined).catch(() => undefined);
      }, 5000).unref();
    }
  }

  /** The principal behind a bearer credential (JWT or raw API key), or null. */
  /** Synchronous for API keys and user tokens seen before (the common case): no promise per request. */
  authenticate(bearer: string, ip: string): Principal | null | Promise<Principal | null> {
    if (bearer.startsWith(API_KEY_PREFIX)) {
      const k = this.findKey(bearer);
      if (!k) return null;
      const p = this.cachedPrincipal(`k:${k.id}`, () => this.principalOf({ api_key_id: k.id }));
      if (p && !this.keyUsable(k)) return null;
      if (p) this.touchKey(k, ip);
      return p;
    }
    const known = this.userTokens.get(bearer);
    if (known) {
      if (known.exp > Date.now() / 1000) return known.principal;
      this.userTokens.delete(bearer);
    }
    return this.authenticateToken(bearer, ip);
  }

  private async authenticateToken(bearer: string, ip: string): Promise<Principal | null> {
    const claims = await this.tokens.verify(bearer);
    if (!claims) return null;
    const [kind, rawId] = claims.sub.split(':');
    const id = Number(rawId);

    if (kind === 'u') {
      const u = this.usersById.get(id);
      if (!u || u.token_version !== claims.tv) return null;
      const principal = this.cachedPrincipal(`u:${id}`, () => this.principalOf({ user_id: id }));
      if (principal) {
        if (this.userTokens.size >= 10_000) this.userTokens.delete(this.userTokens.keys().next().value!);
        this.userTokens.set(bearer, { principal, exp: claims.exp });
      }
      return principal;
    }
    if (kind === 'k') {
      const k = this.keysById.get(id);
      if (!k || !this.keyUsable(k)) return null;
      this.touchKey(k, ip);
      return this.cachedPrincipal(`k:${id}`, () => this.principalOf({ api_key_id: id }));
    }
    if (kind === 's' && this.systemNames.has(rawId!) && claims.tv === this.bootNonce) {
      return this.cachedPrincipal(`s:${rawId}`, () => this.systemInfo(rawId!));
    }
    return null;
  }

  /** Creates `admin` on first start. Returns the generated password when none was configured. */
  async bootstrapAdmin(configured: string | null): Promise<{ created: boolean; generated: string | null }> {
    if (this.doc.data.users.length > 0) return { created: false, generated: null };
    const generated = configured ? null : randomBytes(15).toString('base64url');
    const hash = await hashPassword(configured ?? generated!);
    await this.change((d) => {
      d.users.push({
        id: d.next_user_id++, username: 'admin', email: 'admin@localhost.localdomain', role: 'admin', permissions: [], scope: 'global',
        is_active: true, created_at: now(), updated_at: now(), last_login_at: null, password_hash: hash, token_version: 1,
      });
    });
    return { created: true, generated };
  }

  /** Writes pending `last_used_at` stamps (at shutdown). */
  async flush(): Promise<void> {
    if (this.lastUsedDirty) await this.doc.update(() => undefined);
  }
}

