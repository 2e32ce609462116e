/**
 * Login throttling. An attempt is counted when it starts, before the (slow) password check, so concurrent requests
 * cannot each slip one guess past the limit; a success takes its attempt back. Two budgets, inside a window:
 * - per username and client IP: guessing one account from one place (an anonymous stranger can lock out only
 *   its own address for that account, never the account itself);
 * - per client IP: guessing many accounts from one place.
 * The client IP is the socket's address unless `api.trust_proxy` is on, so a forged X-Forwarded-For buys nothing.
 */
interface Budget {
  count: number;
  first: number;
  lockedUntil: number;
}

/** Budgets kept before expired ones are looked for. */
const PRUNE_FROM = 50_000;

export class LoginLimiter {
  private readonly budgets = new Map<string, Budget>();
  /**
   * The size that starts the next look for expired budgets: twice what the last look left. Looking at every
   * attempt once past PRUNE_FROM (what this did) scanned the whole map per attempt while none had expired yet:
   * ≈0.5 ms an attempt at 50,000 addresses within a lockout window, growing with them.
   */
  private pruneAt = PRUNE_FROM;

  constructor(
    private readonly perUserAndIp: number,
    private readonly perIp: number,
    private readonly lockoutMs: number,
  ) {}

  private keys(username: string | null, ip: string): [string, number][] {
    const keys: [string, number][] = [[`ip:${ip}`, this.perIp]];
    if (username !== null) keys.push([`u:${username.toLowerCase()}\u0000${ip}`, this.perUserAndIp]);
    return keys;
  }

  /**
   * Starts an attempt: seconds to wait when a budget is spent (nothing counted then), else 0 and the attempt is
   * counted until `succeed` gives it back.
   */
  begin(username: string | null, ip: string): number {
    const t = Date.now();
    const keys = this.keys(username, ip);
    let until = 0;
    for (const [key, limit] of keys) {
      const b = this.current(key, t);
      if (b.lockedUntil > t) until = Math.max(until, b.lockedUntil);
      else if (b.count >= limit) until = Math.max(until, b.first + this.lockoutMs);
    }
    if (until) return Math.max(1, Math.ceil((until - t) / 1000));
    for (const [key, limit] of keys) {
      const b = this.current(key, t);
      b.count++;
      if (b.count >= limit) b.lockedUntil = t + this.lockoutMs;
      this.budgets.set(key, b);
    }
    if (this.budgets.size > this.pruneAt) {
      this.prune(t);
      this.pruneAt = Math.max(PRUNE_FROM, this.budgets.size * 2);
    }
    return 0;
  }

  /** A successful login: its attempt does not count, and the account's failures from that address are forgotten. */
  succeed(username: string | null, ip: string): void {
    if (username !== null) this.budgets.delete(`u:${username.toLowerCase()}\u0000${ip}`);
    const b = this.budgets.get(`ip:${ip}`);
    if (b && b.count > 0) {
      b.count--;
      if (b.count < this.perIp) b.lockedUntil = 0;
    }
  }

  private current(key: string, t: number): Budget {
    const b = this.budgets.get(key);
    return !b || (t - b.first > this.lockoutMs && b.lockedUntil <= t) ? { count: 0, first: t, lockedUntil: 0 } : b;
  }

  private prune(t: number): void {
    for (const [key, b] of this.budgets) {
      if (b.lockedUntil < t && t - b.first > this.lockoutMs) this.budgets.delete(key);
    }
  }
}
