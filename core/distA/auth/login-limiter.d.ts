/**
 * Login throttling: failures are counted per username and per client IP inside a window; past the limit, further
 * attempts get 429 until the lockout ends. A success clears the username's count.
 */
export declare class LoginLimiter {
    private readonly perUser;
    private readonly perIp;
    private readonly lockoutMs;
    private readonly failures;
    constructor(perUser: number, perIp: number, lockoutMs: number);
    /** Seconds until the caller may try again, or 0. */
    retryAfter(username: string | null, ip: string): number;
    fail(username: string | null, ip: string): void;
    succeed(username: string): void;
    private prune;
}
//# sourceMappingURL=login-limiter.d.ts.map