/**
 * Users, API keys and deployment grants: the agent's principal directory. Every record is held in memory (each
 * request is authenticated from there, never from disk) and every change is written through to the SQLite store
 * before it is applied in memory, so what a request saw acknowledged is on disk.
 */
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import {
  DEPLOYMENT_NAME,
  errors,
  lowerLevel,
  principalFrom,
  retiredName,
  type AccessLevel,
  type AuthKernel,
  type Principal,
  type PrincipalDirectory,
  type PrincipalInfo,
  type Role,
  type Scope,
} from '@agent/sdk';
import type { ApiKeyRecord, DeploymentGrant, IdentityService, UserRecord } from '../api.js';
import { hashPassword, passwordProblem, verifyPassword } from './passwords.js';
import type { IdentityStore, StoredKey, StoredUser } from './store.js';

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
    if (asked === 'deployments') {
      const why = 'scope: an admin is always global (give a scoped user the operator role and admin grants instead)';
      throw errors.badRequest(why, 'VALIDATION_FAILED', { field: 'scope' });
    }
    return 'global';
  }
  return asked ?? 'deployments';
};

const grantKey = (user_id: number, deployment: string) => `${user_id}\u0000${deployment}`;

/** Whether an update takes rights away: deactivation, a lower role, a narrower scope, a permission withdrawn. */
const lowers = (before: StoredUser, after: StoredUser): boolean =>
  (before.is_active && !after.is_active) ||
  ROLE_RANK[after.role] < ROLE_RANK[before.role] ||
  (before.scope === 'global' && after.scope === 'deployments') ||
  before.permissions.some((p) => !after.permissions.includes(p));

export class Identity implements IdentityService, PrincipalDirectory {
  private readonly usersById = new Map<number, StoredUser>();
  private readonly usersByName = new Map<string, StoredUser>();
  private readonly keysById = new Map<number, StoredKey>();
  private readonly keysByHash = new Map<string, StoredKey>();
  private readonly grantsByKey = new Map<string, DeploymentGrant>();
  private readonly grantsByUser = new Map<number, Map<string, DeploymentGrant>>();
  private readonly principals = new Map<string, Principal>();
  /** Verified user tokens → principal; emptied with the principal cache whenever users, keys or grants change. */
  private readonly userTokens = new Map<string, { principal: Principal; exp: number }>();
  /** Keys whose usage stamps changed since they were last written. */
  private readonly usedKeys = new Set<StoredKey>();
  private usageTimer: NodeJS.Timeout | null = null;
  /** App plugins' own principals; their tokens are only valid for this run of the agent. */
  private readonly systemNames = new Set<string>();
  private readonly bootNonce = randomInt(1, 2 ** 31);
  /** A hash of a random string: checking an unknown user against it costs the same as a real check. */
  private readonly dummyHash = hashPassword(randomBytes(16).toString('hex'));

  private readonly catalog: AuthKernel['resources'];

  /**
   * `changed` hears whose rights changed (users; a key's change is its owner's), once the change is in effect: the
   * plugin emits it as `principals.changed`, and the kernel checks those users' open connections again.
   */
  constructor(
    private readonly store: IdentityStore,
    private readonly kernel: AuthKernel,
    private readonly changed: (userIds: number[]) => void = () => undefined,
  ) {
    this.catalog = kernel.resources;
    const loaded = store.load();
    for (const u of loaded.users) this.indexUser(u);
    for (const k of loaded.api_keys) this.indexKey(k);
    for (const g of loaded.grants) this.indexGrant(g);
    // Role presets change when plugins declare resources.
    this.catalog.onChange(() => this.invalidate([...this.usersById.keys()]));
  }

  private indexUser(u: StoredUser): void {
    this.usersById.set(u.id, u);
    this.usersByName.set(u.username.toLowerCase(), u);
  }

  private indexKey(k: StoredKey): void {
    const before = this.keysById.get(k.id);
    if (before) this.usedKeys.delete(before);
    this.keysById.set(k.id, k);
    this.keysByHash.set(k.key_hash, k);
  }

  private unindexKey(k: StoredKey): void {
    this.keysById.delete(k.id);
    this.keysByHash.delete(k.key_hash);
    this.usedKeys.delete(k);
  }

  private indexGrant(g: DeploymentGrant): void {
    this.grantsByKey.set(grantKey(g.user_id, g.deployment), g);
    let own = this.grantsByUser.get(g.user_id);
    if (!own) this.grantsByUser.set(g.user_id, (own = new Map()));
    own.set(g.deployment, g);
  }

  private unindexGrant(user_id: number, deployment: string): void {
    this.grantsByKey.delete(grantKey(user_id, deployment));
    this.grantsByUser.get(user_id)?.delete(deployment);
  }

  /**
   * Drops cached principals after every change of users, keys or grants, and when role presets change; then tells
   * whose rights changed (`userIds`), so that their open connections are checked again at once.
   */
  invalidate(userIds: number[]): void {
    this.principals.clear();
    this.userTokens.clear();
    if (userIds.length > 0) this.changed(userIds);
  }

  private checkPermissions(permissions: string[]): void {
    for (const p of permissions) {
      if (!this.catalog.isValidPermission(p)) throw errors.badRequest(`unknown permission '${p}'`, 'INVALID_PERMISSION');
    }
  }

  // ---- users ----
  users: IdentityService['users'] = {
    list: () => [...this.usersById.values()].map(publicUser),
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
      const scope = scopeFor(input.role, input.scope);
      const hash = await hashPassword(input.password);
      // Checked again: another request may have taken the name while the password was hashed.
      if (this.usersByName.has(input.username.toLowerCase())) throw errors.conflict(`user '${input.username}' exists`, 'USER_EXISTS');
      const user = this.store.insertUser((id) => ({
        id,
        username: input.username,
        email: input.email,
        role: input.role,
        permissions: [...new Set(input.permissions ?? [])],
        scope,
        is_active: input.is_active ?? true,
        created_at: now(),
        updated_at: now(),
        last_login_at: null,
        password_hash: hash,
        token_version: 1,
      }));
      this.indexUser(user);
      this.invalidate([user.id]);
      return publicUser(user);
    },
    update: async (id, patch) => {
      if (!this.usersById.has(id)) throw errors.notFound(`user ${id} not found`);
      if (patch.email !== undefined && !EMAIL.test(patch.email)) throw errors.badRequest(`'${patch.email}' is not an e-mail address`, 'INVALID_EMAIL');
      if (patch.permissions) this.checkPermissions(patch.permissions);
      const current = this.usersById.get(id)!;
      const role = patch.role ?? current.role;
      // Promoting to admin makes global; leaving admin returns to the deployments unless a scope is given.
      const scope = scopeFor(role, patch.scope ?? (role === 'admin' || current.role === 'admin' ? undefined : current.scope));
      const u: StoredUser = { ...current, scope, updated_at: now() };
      if (patch.email !== undefined) u.email = patch.email;
      if (patch.role !== undefined) u.role = patch.role;
      if (patch.permissions !== undefined) u.permissions = [...new Set(patch.permissions)];
      if (patch.is_active !== undefined) u.is_active = patch.is_active;
      // Rights taken away sign the user out: its tokens stop working (also once it is active again).
      if (lowers(current, u)) u.token_version = current.token_version + 1;
      this.saveUser(u);
      return publicUser(u);
    },
    delete: async (id) => {
      if (!this.usersById.has(id)) throw errors.notFound(`user ${id} not found`);
      this.store.deleteUser(id);
      const u = this.usersById.get(id)!;
      this.usersById.delete(id);
      this.usersByName.delete(u.username.toLowerCase());
      for (const k of [...this.keysById.values()]) if (k.user_id === id) this.unindexKey(k);
      for (const deployment of [...(this.grantsByUser.get(id)?.keys() ?? [])]) this.unindexGrant(id, deployment);
      this.grantsByUser.delete(id);
      this.invalidate([id]);
    },
    verifyPassword: async (id, password) => {
      const u = this.usersById.get(id);
      return !!u && verifyPassword(u.password_hash, password);
    },
    setPassword: async (id, password, options) => {
      if (!this.usersById.has(id)) throw errors.notFound(`user ${id} not found`);
      const hash = await hashPassword(password);
      const current = this.usersById.get(id);
      if (!current) throw errors.notFound(`user ${id} not found`);
      this.saveUser({ ...current, password_hash: hash, token_version: current.token_version + (options?.keepSessions ? 0 : 1), updated_at: now() });
    },
    passwordProblem,
    issueToken: async (id) => {
      const u = this.usersById.get(id);
      if (!u) throw errors.notFound(`user ${id} not found`);
      return (await this.kernel.issueToken(`u:${u.id}`, u.token_version)).token;
    },
  };

  // ---- API keys ----
  apiKeys: IdentityService['apiKeys'] = {
    list: (filter) => [...this.keysById.values()].filter((k) => filter?.user_id === undefined || k.user_id === filter.user_id).map(publicKey),
    get: (id) => {
      const k = this.keysById.get(id);
      return k ? publicKey(k) : undefined;
    },
    create: async (input) => {
      if (!this.usersById.has(input.user_id)) throw errors.notFound(`user ${input.user_id} not found`);
      this.checkPermissions(input.permissions ?? []);
      const key = API_KEY_PREFIX + randomBytes(32).toString('base64url');
      const stored = this.store.insertKey((id) => ({
        id,
        user_id: input.user_id,
        name: input.name,
        description: input.description ?? '',
        role: input.role,
        permissions: [...new Set(input.permissions ?? [])],
        deployments: [...new Set(input.deployments ?? [])],
        key_prefix: key.slice(0, API_KEY_PREFIX.length + 6),
        active: true,
        created_at: now(),
        expires_at: input.expires_in ? new Date(Date.now() + input.expires_in * 1000).toISOString() : null,
        revoked_at: null,
        last_used_at: null,
        last_used_ip: null,
        key_hash: sha256(key),
      }));
      this.indexKey(stored);
      this.invalidate([stored.user_id]);
      return { record: publicKey(stored), key };
    },
    revoke: async (id) => {
      const current = this.keysById.get(id);
      if (!current) throw errors.notFound(`API key ${id} not found`);
      if (!current.active) return publicKey(current);
      const k: StoredKey = { ...current, active: false, revoked_at: now() };
      this.store.updateKeys([k]);
      this.indexKey(k);
      this.invalidate([k.user_id]);
      return publicKey(k);
    },
    delete: async (id) => {
      const k = this.keysById.get(id);
      if (!k) throw errors.notFound(`API key ${id} not found`);
      this.store.deleteKey(id);
      this.unindexKey(k);
      this.invalidate([k.user_id]);
    },
  };

  // ---- deployment grants ----
  grants: IdentityService['grants'] = {
    list: (filter) => {
      const source = filter?.user_id !== undefined ? (this.grantsByUser.get(filter.user_id)?.values() ?? []) : this.grantsByKey.values();
      return [...source].filter((g) => filter?.deployment === undefined || g.deployment === filter.deployment).map((g) => ({ ...g }));
    },
    set: async (user_id, deployment, level) => this.setGrant(user_id, deployment, level),
    remove: async (user_id, deployment) => {
      if (!this.grantsByKey.has(grantKey(user_id, deployment))) return false;
      this.store.deleteGrant(user_id, deployment);
      this.unindexGrant(user_id, deployment);
      this.invalidate([user_id]);
      return true;
    },
    removeDeployment: async (deployment) => this.removeDeployment(deployment),
    grantCreator: async (principal, deployment) => this.grantCreator(principal, deployment),
  };

  /** Synchronous, so a grant is in place when the event that asked for it has been delivered. */
  private setGrant(user_id: number, deployment: string, level: AccessLevel): DeploymentGrant {
    if (!this.usersById.has(user_id)) throw errors.notFound(`user ${user_id} not found`);
    const current = this.grantsByKey.get(grantKey(user_id, deployment));
    const g: DeploymentGrant = current ? { ...current, access_level: level } : { user_id, deployment, access_level: level, granted_at: now() };
    this.store.putGrant(g);
    this.indexGrant(g);
    this.invalidate([user_id]);
    return { ...g };
  }

  /** Whoever reaches every deployment as admin already has a new one; anyone else becomes admin of what they created. */
  grantCreator(principal: Principal, deployment: string): void {
    if (principal.user_id === null || principal.deploymentLevel('*') === 'admin') return;
    this.setGrant(principal.user_id, deployment, 'admin');
  }

  /** Drops the grants on a deleted deployment (synchronous, like `setGrant`). */
  removeDeployment(deployment: string): void {
    const retired = retiredName(deployment, new Date());
    // A key listed for the deployment stays limited to its list: the name is retired there, never dropped (an
    // empty list would mean every deployment of the owner) and never left to reach a new deployment of that name.
    const keys = [...this.keysById.values()]
      .filter((k) => k.deployments.includes(deployment))
      .map((k) => ({ ...k, deployments: k.deployments.map((n) => (n === deployment ? retired : n)) }));
    const grants = [...this.grantsByKey.values()].filter((g) => g.deployment === deployment);
    if (!keys.length && !grants.length) return;
    this.store.removeDeployment(deployment, keys);
    for (const g of grants) this.unindexGrant(g.user_id, deployment);
    for (const k of keys) this.indexKey(k);
    this.invalidate([...new Set([...grants.map((g) => g.user_id), ...keys.map((k) => k.user_id)])]);
  }

  private saveUser(u: StoredUser): void {
    this.store.updateUser(u);
    this.indexUser(u);
    this.invalidate([u.id]);
  }

  resources = () => this.catalog.list();
  rolePermissions = (role: Role) => this.catalog.rolePermissions(role);
  isValidPermission = (p: string) => this.catalog.isValidPermission(p);

  // ---- principals ----

  private userInfo(u: StoredUser): PrincipalInfo {
    const scope: Scope = u.role === 'admin' ? 'global' : u.scope;
    const deployments: Record<string, AccessLevel> = {};
    // A global principal reaches every deployment at its role's level; grants add to that, never lower it.
    if (scope === 'global') deployments['*'] = roleLevel(u.role);
    if (u.role !== 'admin') {
      for (const g of this.grantsByUser.get(u.id)?.values() ?? []) deployments[g.deployment] = g.access_level;
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
      const level = capByRole(name === '*' ? (ownerInfo.deployments['*'] ?? null) : ownerP.deploymentLevel(name), keyRole);
      if (level) deployments[name] = level;
    }
    return { type: 'api_key', id: `api_key:${k.id}`, name: k.name, role, user_id: owner.id, permissions, deployments, scope };
  }

  private systemInfo(name: string): PrincipalInfo {
    return {
      type: 'system',
      id: `system:${name}`,
      name,
      role: 'admin',
      user_id: null,
      permissions: ['*:write'],
      deployments: { '*': 'admin' },
      scope: 'global',
    };
  }

  /** A token for an app plugin's system principal (admin rights; valid until the agent restarts). */
  async issueSystemToken(name: string): Promise<string> {
    this.systemNames.add(name);
    // Bound to this run by the boot nonce, so it needs no short expiry: the app keeps it until the agent restarts.
    return (await this.kernel.issueToken(`s:${name}`, this.bootNonce, { ttlSeconds: 10 * 365 * 86400 })).token;
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
    const current = this.usersById.get(u.id);
    if (!current) return null;
    const stamped = { ...current, last_login_at: now() };
    // Stamping the login changes no right: the cached principals stay.
    this.store.updateUser(stamped);
    this.indexUser(stamped);
    const issued = await this.kernel.issueToken(`u:${u.id}`, stamped.token_version);
    return { ...issued, user: publicUser(stamped) };
  }

  /** API key login: exchanges a key for a token that expires no later than the key. */
  async loginWithApiKey(key: string, ip: string): Promise<{ token: string; expires_at: string; api_key: ApiKeyRecord } | null> {
    const k = this.findKey(key);
    if (!k || !this.principalOf({ api_key_id: k.id })) return null;
    this.touchKey(k, ip);
    const maxExpiry = k.expires_at ? Math.floor(Date.parse(k.expires_at) / 1000) : undefined;
    const issued = await this.kernel.issueToken(`k:${k.id}`, 0, { notAfter: maxExpiry });
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
    this.usedKeys.add(k);
    // Usage stamps are written at most every few seconds, not once per request.
    this.usageTimer ??= setTimeout(() => this.flush(), 5000).unref();
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
    const claims = await this.kernel.verifyToken(bearer);
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
    if (this.usersById.size > 0) return { created: false, generated: null };
    const generated = configured ? null : randomBytes(15).toString('base64url');
    const hash = await hashPassword(configured ?? generated!);
    const admin = this.store.insertUser((id) => ({
      id,
      username: 'admin',
      email: 'admin@localhost.localdomain',
      role: 'admin',
      permissions: [],
      scope: 'global',
      is_active: true,
      created_at: now(),
      updated_at: now(),
      last_login_at: null,
      password_hash: hash,
      token_version: 1,
    }));
    this.indexUser(admin);
    return { created: true, generated };
  }

  /** Writes pending `last_used_at` stamps (every few seconds, and at shutdown). */
  flush(): void {
    if (this.usageTimer) clearTimeout(this.usageTimer);
    this.usageTimer = null;
    const used = [...this.usedKeys].filter((k) => this.keysById.get(k.id) === k);
    this.usedKeys.clear();
    if (used.length) this.store.updateKeys(used);
  }
}
