export interface TokenClaims {
    /** `u:<id>` for a user, `k:<id>` for an API key login. */
    sub: string;
    /** The user's token version at issue time: a password change bumps it and kills older tokens. */
    tv: number;
    exp: number;
}
export declare class TokenService {
    private readonly key;
    private readonly ttlSeconds;
    private readonly cache;
    constructor(key: Uint8Array, ttlSeconds: number);
    /** `ttlSeconds` overrides the configured lifetime (app tokens live as long as the agent run they belong to). */
    issue(sub: string, tokenVersion: number, maxExpiry?: number, ttlSeconds?: number): Promise<{
        token: string;
        expires_at: string;
    }>;
    /** The claims of a valid token, or null. */
    verify(token: string): Promise<TokenClaims | null>;
}
//# sourceMappingURL=tokens.d.ts.map