/**
 * Login throttling: failures are counted per username and per client IP inside a window; past the limit, further
 * attempts get 429 until the lockout ends. A success clears the username's count.
 */
export class LoginLimiter {
    perUser;
    perIp;
    lockoutMs;
    failures = new Map();
    constructor(perUser, perIp, lockoutMs) {
        this.perUser = perUser;
        this.perIp = perIp;
        this.lockoutMs = lockoutMs;
    }
    /** Seconds until the caller may try again, or 0. */
    retryAfter(username, ip) {
        const t = Date.now();
        let until = 0;
        for (const key of [username !== null ? `u:${username.toLowerCase()}` : null, `ip:${ip}`]) {
            if (!key)
                continue;
            const entry = this.failures.get(key);
            if (entry && entry.lockedUntil > t)
                until = Math.max(until, entry.lockedUntil);
        }
        return until ? Math.ceil((until - t) / 1000) : 0;
    }
    fail(username, ip) {
        const t = Date.now();
        const bump = (key, limit) => {
            let entry = this.failures.get(key);
            if (!entry || t - entry.first > this.lockoutMs)
                entry = { count: 0, first: t, lockedUntil: 0 };
            entry.count++;
            if (entry.count >= limit)
                entry.lockedUntil = t + this.lockoutMs;
            this.failures.set(key, entry);
        };
        if (username !== null)
            bump(`u:${username.toLowerCase()}`, this.perUser);
        bump(`ip:${ip}`, this.perIp);
        if (this.failures.size > 50_000)
            this.prune(t);
    }
    succeed(username) {
        this.failures.delete(`u:${username.toLowerCase()}`);
    }
    prune(t) {
        for (const [key, entry] of this.failures) {
            if (entry.lockedUntil < t && t - entry.first > this.lockoutMs)
                this.failures.delete(key);
        }
    }
}
//# sourceMappingURL=login-limiter.js.map