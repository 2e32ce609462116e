import { type ApiKeyRecord, type DeploymentGrant, type Document, type IdentityService, type Principal, type PrincipalInfo, type Role, type UserRecord } from '@agent/sdk';
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
export declare const emptyIdentity: () => IdentityDoc;
export declare const API_KEY_PREFIX = "agk_";
export declare const USERNAME: RegExp;
export declare class Identity implements IdentityService {
    private readonly doc;
    private readonly catalog;
    private readonly tokens;
    private usersById;
    private usersByName;
    private keysById;
    private keysByHash;
    private principals;
    /** Verified user tokens → principal; emptied with the principal cache whenever users, keys or grants change. */
    private readonly userTokens;
    private lastUsedDirty;
    /** App plugins' own principals; their tokens are only valid for this run of the agent. */
    private readonly systemNames;
    private readonly bootNonce;
    /** A hash of a random string: checking an unknown user against it costs the same as a real check. */
    private readonly dummyHash;
    constructor(doc: Document<IdentityDoc>, catalog: ResourceCatalog, tokens: TokenService);
    private reindex;
    private change;
    /** Drops cached principals (role presets change when plugins declare resources). */
    invalidate(): void;
    private checkPermissions;
    users: IdentityService['users'];
    apiKeys: IdentityService['apiKeys'];
    grants: IdentityService['grants'];
    resources: () => import("@agent/sdk").ResourcePolicy[];
    rolePermissions: (role: Role) => string[];
    isValidPermission: (p: string) => boolean;
    private userInfo;
    private keyInfo;
    private systemInfo;
    /** A token for an app plugin's system principal (admin rights; valid until the agent restarts). */
    issueSystemToken(name: string): Promise<string>;
    /** Resolves a principal id (`user:3`, `api_key:5`, `system:observability`) to what it may do now. */
    principalById(id: string): PrincipalInfo | null;
    principalOf(subject: {
        user_id: number;
    } | {
        api_key_id: number;
    }): PrincipalInfo | null;
    private keyUsable;
    private cachedPrincipal;
    /** Password login; null when the user is unknown, inactive or the password is wrong. */
    loginWithPassword(username: string, password: string): Promise<{
        token: string;
        expires_at: string;
        user: UserRecord;
    } | null>;
    /** API key login: exchanges a key for a token that expires no later than the key. */
    loginWithApiKey(key: string, ip: string): Promise<{
        token: string;
        expires_at: string;
        api_key: ApiKeyRecord;
    } | null>;
    private findKey;
    private touchKey;
    /** The principal behind a bearer credential (JWT or raw API key), or null. */
    /** Synchronous for API keys and user tokens seen before (the common case): no promise per request. */
    authenticate(bearer: string, ip: string): Principal | null | Promise<Principal | null>;
    private authenticateToken;
    /** Creates `admin` on first start. Returns the generated password when none was configured. */
    bootstrapAdmin(configured: string | null): Promise<{
        created: boolean;
        generated: string | null;
    }>;
    /** Writes pending `last_used_at` stamps (at shutdown). */
    flush(): Promise<void>;
}
export {};
//# sourceMappingURL=identity.d.ts.map