/** Access tokens: HS256 JWTs (jose), issuer `agent`. Verified tokens are cached until they expire. */
import type { TokenClaims } from '@agent/sdk';

// jose is loaded on first use: it is a large module graph that the start-up path does not need.
let jose: Promise<typeof import('jose')> | null = null;
const loadJose = () => (jose ??= import('jose'));

export class TokenService {
  private readonly cache = new Map<string, TokenClaims>();

  constructor(
    private readonly key: Uint8Array,
    private readonly ttlSeconds: number,
  ) {}

  /** `ttlSeconds` overrides the configured lifetime (app tokens live as long as the agent run they belong to). */
  async issue(sub: string, tokenVersion: number, maxExpiry?: number, ttlSeconds = this.ttlSeconds): Promise<{ token: string; expires_at: string }> {
    let exp = Math.floor(Date.now() / 1000) + ttlSeconds;
    if (maxExpiry !== undefined) exp = Math.min(exp, maxExpiry);
    const { SignJWT } = await loadJose();
    const token = await new SignJWT({ tv: tokenVersion })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer('agent')
      .setSubject(sub)
      .setIssuedAt()
      .setExpirationTime(exp)
      .sign(this.key);
    return { token, expires_at: new Date(exp * 1000).toISOString() };
  }

  /** The claims of a valid token, or null. */
  async verify(token: string): Promise<TokenClaims | null> {
    const now = Date.now() / 1000;
    const cached = this.cache.get(token);
    if (cached) {
      if (cached.exp > now) return cached;
      this.cache.delete(token);
      return null;
    }
    try {
      const { jwtVerify } = await loadJose();
      const { payload } = await jwtVerify(token, this.key, { issuer: 'agent', algorithms: ['HS256'] });
      if (typeof payload.sub !== 'string' || typeof payload.tv !== 'number' || typeof payload.exp !== 'number') return null;
      const claims: TokenClaims = { sub: payload.sub, tv: payload.tv, exp: payload.exp };
      if (this.cache.size >= 10_000) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(token, claims);
      return claims;
    } catch {
      return null;
    }
  }
}
