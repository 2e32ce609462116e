/**
 * Users, API keys and deployment grants (core-owned principals), stored in one lowdb document, indexed in memory,
 * and the construction of a request's principal from them.
 */
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { errors, lowerLevel, principalFrom, } from '@agent/sdk';
import { hashPassword, passwordProblem, verifyPassword } from './passwords.js';
export const emptyIdentity = () => ({ users: [], api_keys: [], grants: [], next_user_id: 1, next_key_id: 1 });
export const API_KEY_PREFIX = 'agk_';
export const USERNAME = /^[A-Za-z0-9][A-Za-z0-9._-]{1,63}$/;
const EMAIL = /^[^\s@<>()"',;]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}$/;
const sha256 = (text) => createHash('sha256').update(text).digest('hex');
const now = () => new Date().toISOString();
const publicUser = ({ password_hash: _h, token_version: _t, ...u }) => ({ ...u, permissions: [...u.permissions] });
const publicKey = ({ key_hash: _h, ...k }) => ({ ...k, permissions: [...k.permissions], deployments: [...k.deployments] });
const ROLE_RANK = { viewer: 1, operator: 2, admin: 3 };
/** Caps a deployment level by what a role may do at most. */
const capByRole = (level, role) => lowerLevel(level, role === 'admin' ? 'admin' : role === 'operator' ? 'write' : 'read');
export class Identity {
    doc;
    catalog;
    tokens;
    usersById = new Map();
    usersByName = new Map();
    keysById = new Map();
    keysByHash = new Map();
    principals = new Map();
    /** Verified user tokens → principal; emptied with the principal cache whenever users, keys or grants change. */
    userTokens = new Map();
    lastUsedDirty = false;
    /** App plugins' own principals; their tokens are only valid for this run of the agent. */
    systemNames = new Set();
    bootNonce = randomInt(1, 2 ** 31);
    /** A hash of a random string: checking an unknown user against it costs the same as a real check. */
    dummyHash = hashPassword(randomBytes(16).toString('hex'));
    constructor(doc, catalog, tokens) {
        this.doc = doc;
        this.catalog = catalog;
        this.tokens = tokens;
        this.reindex();
    }
    reindex() {
        this.usersById = new Map(this.doc.data.users.map((u) => [u.id, u]));
        this.usersByName = new Map(this.doc.data.users.map((u) => [u.username.toLowerCase(), u]));
        this.keysById = new Map(this.doc.data.api_keys.map((k) => [k.id, k]));
        this.keysByHash = new Map(this.doc.data.api_keys.map((k) => [k.key_hash, k]));
        this.principals.clear();
        this.userTokens.clear();
    }
    async change(fn) {
        const result = await this.doc.update(fn);
        this.reindex();
        return result;
    }
    /** Drops cached principals (role presets change when plugins declare resources). */
    invalidate() {
        this.principals.clear();
        this.userTokens.clear();
    }
    checkPermissions(permissions) {
        for (const p of permissions) {
            if (!this.catalog.isValidPermission(p))
                throw errors.badRequest(`unknown permission '${p}'`, 'INVALID_PERMISSION');
        }
    }
    // ---- users ----
    users = {
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
            if (!USERNAME.test(input.username))
                throw errors.badRequest('username must be 2-64 characters of letters, digits, . _ -', 'INVALID_USERNAME');
            if (!EMAIL.test(input.email))
                throw errors.badRequest(`'${input.email}' is not an e-mail address`, 'INVALID_EMAIL');
            this.checkPermissions(input.permissions ?? []);
            if (this.usersByName.has(input.username.toLowerCase()))
                throw errors.conflict(`user '${input.username}' exists`, 'USER_EXISTS');
            const hash = await hashPassword(input.password);
            return this.change((d) => {
                const user = {
                    id: d.next_user_id++, username: input.username, email: input.email, role: input.role,
                    permissions: [...new Set(input.permissions ?? [])], is_active: input.is_active ?? true,
                    created_at: now(), updated_at: now(), last_login_at: null, password_hash: hash, token_version: 1,
                };
                d.users.push(user);
                return publicUser(user);
            });
        },
        update: async (id, patch) => {
            if (!this.usersById.has(id))
                throw errors.notFound(`user ${id} not found`);
            if (patch.email !== undefined && !EMAIL.test(patch.email))
                throw errors.badRequest(`'${patch.email}' is not an e-mail address`, 'INVALID_EMAIL');
            if (patch.permissions)
                this.checkPermissions(patch.permissions);
            return this.change((d) => {
                const u = d.users.find((x) => x.id === id);
                if (patch.email !== undefined)
                    u.email = patch.email;
                if (patch.role !== undefined)
                    u.role = patch.role;
                if (patch.permissions !== undefined)
                    u.permissions = [...new Set(patch.permissions)];
                if (patch.is_active !== undefined)
                    u.is_active = patch.is_active;
                u.updated_at = now();
                return publicUser(u);
            });
        },
        delete: async (id) => {
            if (!this.usersById.has(id))
                throw errors.notFound(`user ${id} not found`);
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
            if (!this.usersById.has(id))
                throw errors.notFound(`user ${id} not found`);
            const hash = await hashPassword(password);
            await this.change((d) => {
                const u = d.users.find((x) => x.id === id);
                u.password_hash = hash;
                if (!options?.keepSessions)
                    u.token_version++;
                u.updated_at = now();
            });
        },
        passwordProblem,
        issueToken: async (id) => {
            const u = this.usersById.get(id);
            if (!u)
                throw errors.notFound(`user ${id} not found`);
            return (await this.tokens.issue(`u:${u.id}`, u.token_version)).token;
        },
    };
    // ---- API keys ----
    apiKeys = {
        list: (filter) => this.doc.data.api_keys.filter((k) => filter?.user_id === undefined || k.user_id === filter.user_id).map(publicKey),
        get: (id) => {
            const k = this.keysById.get(id);
            return k ? publicKey(k) : undefined;
        },
        create: async (input) => {
            if (!this.usersById.has(input.user_id))
                throw errors.notFound(`user ${input.user_id} not found`);
            this.checkPermissions(input.permissions ?? []);
            const key = API_KEY_PREFIX + randomBytes(32).toString('base64url');
            const record = await this.change((d) => {
                const k = {
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
            if (!this.keysById.has(id))
                throw errors.notFound(`API key ${id} not found`);
            return this.change((d) => {
                const k = d.api_keys.find((x) => x.id === id);
                if (k.active) {
                    k.active = false;
                    k.revoked_at = now();
                }
                return publicKey(k);
            });
        },
        delete: async (id) => {
            if (!this.keysById.has(id))
                throw errors.notFound(`API key ${id} not found`);
            await this.change((d) => {
                d.api_keys = d.api_keys.filter((k) => k.id !== id);
            });
        },
    };
    // ---- deployment grants ----
    grants = {
        list: (filter) => this.doc.data.grants
            .filter((g) => (filter?.user_id === undefined || g.user_id === filter.user_id) && (filter?.deployment === undefined || g.deployment === filter.deployment))
            .map((g) => ({ ...g })),
        set: async (user_id, deployment, level) => {
            if (!this.usersById.has(user_id))
                throw errors.notFound(`user ${user_id} not found`);
            return this.change((d) => {
                let g = d.grants.find((x) => x.user_id === user_id && x.deployment === deployment);
                if (g)
                    g.access_level = level;
                else {
                    g = { user_id, deployment, access_level: level, granted_at: now() };
                    d.grants.push(g);
                }
                return { ...g };
            });
        },
        remove: async (user_id, deployment) => this.change((d) => {
            const before = d.grants.length;
            d.grants = d.grants.filter((g) => !(g.user_id === user_id && g.deployment === deployment));
            return d.grants.length !== before;
        }),
        removeDeployment: async (deployment) => {
            if (!this.doc.data.grants.some((g) => g.deployment === deployment))
                return;
            await this.change((d) => {
                d.grants = d.grants.filter((g) => g.deployment !== deployment);
            });
        },
        grantCreator: async (principal, deployment) => {
            if (principal.user_id === null || principal.isAdmin)
                return;
            await this.grants.set(principal.user_id, deployment, 'admin');
        },
    };
    resources = () => this.catalog.list();
    rolePermissions = (role) => this.catalog.rolePermissions(role);
    isValidPermission = (p) => this.catalog.isValidPermission(p);
    // ---- principals ----
    userInfo(u) {
        const deployments = {};
        if (u.role === 'admin')
            deployments['*'] = 'admin';
        else
            for (const g of this.doc.data.grants)
                if (g.user_id === u.id)
                    deployments[g.deployment] = g.access_level;
        const permissions = u.role === 'admin' ? ['*:write'] : [...new Set([...this.catalog.rolePermissions(u.role), ...u.permissions])];
        return { type: 'user', id: `user:${u.id}`, name: u.username, role: u.role, user_id: u.id, permissions, deployments };
    }
    keyInfo(k, owner) {
        const ownerInfo = this.userInfo(owner);
        const ownerP = principalFrom(ownerInfo);
        const role = ROLE_RANK[k.role] <= ROLE_RANK[owner.role] ? k.role : owner.role;
        const keyPerms = k.role === 'admin' ? ['*:write'] : [...new Set([...this.catalog.rolePermissions(k.role), ...k.permissions])];
        let permissions;
        if (keyPerms.includes('*:write'))
            permissions = ownerInfo.permissions;
        else {
            // The lower of the two: a key's write becomes read when the owner only reads.
            permissions = [];
            for (const p of keyPerms) {
                if (ownerP.can(p))
                    permissions.push(p);
                else if (p.endsWith(':write') && ownerP.can(p.replace(/:write$/, ':read')))
                    permissions.push(p.replace(/:write$/, ':read'));
            }
            permissions = [...new Set(permissions)];
        }
        const deployments = {};
        const names = k.deployments.length > 0 ? k.deployments : Object.keys(ownerInfo.deployments);
        for (const name of names) {
            const level = capByRole(ownerP.deploymentLevel(name), k.role);
            if (level)
                deployments[name] = level;
        }
        return { type: 'api_key', id: `api_key:${k.id}`, name: k.name, role, user_id: owner.id, permissions, deployments };
    }
    systemInfo(name) {
        return { type: 'system', id: `system:${name}`, name, role: 'admin', user_id: null, permissions: ['*:write'], deployments: { '*': 'admin' } };
    }
    /** A token for an app plugin's system principal (admin rights; valid until the agent restarts). */
    async issueSystemToken(name) {
        this.systemNames.add(name);
        // Bound to this run by the boot nonce, so it needs no short expiry: the app keeps it until the agent restarts.
        return (await this.tokens.issue(`s:${name}`, this.bootNonce, undefined, 10 * 365 * 86400)).token;
    }
    /** Resolves a principal id (`user:3`, `api_key:5`, `system:observability`) to what it may do now. */
    principalById(id) {
        const [kind, rest] = [id.slice(0, id.indexOf(':')), id.slice(id.indexOf(':') + 1)];
        if (kind === 'user')
            return this.principalOf({ user_id: Number(rest) });
        if (kind === 'api_key')
            return this.principalOf({ api_key_id: Number(rest) });
        if (kind === 'system' && this.systemNames.has(rest))
            return this.systemInfo(rest);
        return null;
    }
    principalOf(subject) {
        if ('user_id' in subject) {
            const u = this.usersById.get(subject.user_id);
            return u && u.is_active ? this.userInfo(u) : null;
        }
        const k = this.keysById.get(subject.api_key_id);
        if (!k || !this.keyUsable(k))
            return null;
        const owner = this.usersById.get(k.user_id);
        return owner && owner.is_active ? this.keyInfo(k, owner) : null;
    }
    keyUsable(k) {
        return k.active && (k.expires_at === null || Date.parse(k.expires_at) > Date.now());
    }
    cachedPrincipal(cacheKey, build) {
        const hit = this.principals.get(cacheKey);
        if (hit)
            return hit;
        const info = build();
        if (!info)
            return null;
        const p = principalFrom(info);
        this.principals.set(cacheKey, p);
        return p;
    }
    /** Password login; null when the user is unknown, inactive or the password is wrong. */
    async loginWithPassword(username, password) {
        const u = this.usersByName.get(username.toLowerCase());
        // Hash even for unknown users so timing does not reveal which names exist.
        const ok = await verifyPassword(u?.password_hash ?? (await this.dummyHash), password);
        if (!u || !ok || !u.is_active)
            return null;
        await this.change((d) => {
            d.users.find((x) => x.id === u.id).last_login_at = now();
        });
        const issued = await this.tokens.issue(`u:${u.id}`, u.token_version);
        return { ...issued, user: publicUser(this.usersById.get(u.id)) };
    }
    /** API key login: exchanges a key for a token that expires no later than the key. */
    async loginWithApiKey(key, ip) {
        const k = this.findKey(key);
        if (!k || !this.principalOf({ api_key_id: k.id }))
            return null;
        this.touchKey(k, ip);
        const maxExpiry = k.expires_at ? Math.floor(Date.parse(k.expires_at) / 1000) : undefined;
        const issued = await this.tokens.issue(`k:${k.id}`, 0, maxExpiry);
        return { ...issued, api_key: publicKey(k) };
    }
    findKey(key) {
        if (!key.startsWith(API_KEY_PREFIX))
            return undefined;
        const hash = sha256(key);
        const k = this.keysByHash.get(hash);
        // The map lookup already matched; the constant-time compare guards against a future index change.
        return k && timingSafeEqual(Buffer.from(k.key_hash), Buffer.from(hash)) ? k : undefined;
    }
    touchKey(k, ip) {
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
    authenticate(bearer, ip) {
        if (bearer.startsWith(API_KEY_PREFIX)) {
            const k = this.findKey(bearer);
            if (!k)
                return null;
            const p = this.cachedPrincipal(`k:${k.id}`, () => this.principalOf({ api_key_id: k.id }));
            if (p && !this.keyUsable(k))
                return null;
            if (p)
                this.touchKey(k, ip);
            return p;
        }
        const known = this.userTokens.get(bearer);
        if (known) {
            if (known.exp > Date.now() / 1000)
                return known.principal;
            this.userTokens.delete(bearer);
        }
        return this.authenticateToken(bearer, ip);
    }
    async authenticateToken(bearer, ip) {
        const claims = await this.tokens.verify(bearer);
        if (!claims)
            return null;
        const [kind, rawId] = claims.sub.split(':');
        const id = Number(rawId);
        if (kind === 'u') {
            const u = this.usersById.get(id);
            if (!u || u.token_version !== claims.tv)
                return null;
            const principal = this.cachedPrincipal(`u:${id}`, () => this.principalOf({ user_id: id }));
            if (principal) {
                if (this.userTokens.size >= 10_000)
                    this.userTokens.delete(this.userTokens.keys().next().value);
                this.userTokens.set(bearer, { principal, exp: claims.exp });
            }
            return principal;
        }
        if (kind === 'k') {
            const k = this.keysById.get(id);
            if (!k || !this.keyUsable(k))
                return null;
            this.touchKey(k, ip);
            return this.cachedPrincipal(`k:${id}`, () => this.principalOf({ api_key_id: id }));
        }
        if (kind === 's' && this.systemNames.has(rawId) && claims.tv === this.bootNonce) {
            return this.cachedPrincipal(`s:${rawId}`, () => this.systemInfo(rawId));
        }
        return null;
    }
    /** Creates `admin` on first start. Returns the generated password when none was configured. */
    async bootstrapAdmin(configured) {
        if (this.doc.data.users.length > 0)
            return { created: false, generated: null };
        const generated = configured ? null : randomBytes(15).toString('base64url');
        const hash = await hashPassword(configured ?? generated);
        await this.change((d) => {
            d.users.push({
                id: d.next_user_id++, username: 'admin', email: 'admin@localhost.localdomain', role: 'admin', permissions: [],
                is_active: true, created_at: now(), updated_at: now(), last_login_at: null, password_hash: hash, token_version: 1,
            });
        });
        return { created: true, generated };
    }
    /** Writes pending `last_used_at` stamps (at shutdown). */
    async flush() {
        if (this.lastUsedDirty)
            await this.doc.update(() => undefined);
    }
}
//# sourceMappingURL=identity.js.map