import { afterEach, describe, expect, it, vi } from 'vitest';
import { LoginLimiter } from '../src/identity/login-limiter.js';

afterEach(() => vi.useRealTimers());

describe('login limiter', () => {
  it('counts attempts per account and address and per address, takes a success back, counts nothing while locked', () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const limiter = new LoginLimiter(3, 5, 60_000);
    for (let i = 0; i < 3; i++) expect(limiter.begin('ada', '10.0.0.1')).toBe(0);
    // Locked from the third attempt for the lockout; the answer is the wait in seconds.
    vi.advanceTimersByTime(10_000);
    expect(limiter.begin('Ada', '10.0.0.1')).toBe(50);
    // The account from another address, another account from this one: their own budgets.
    expect(limiter.begin('ada', '10.0.0.2')).toBe(0);
    expect(limiter.begin('bob', '10.0.0.1')).toBe(0);
    // The address has spent 4 of 5 (the refused attempt was not counted): one more, then it is locked.
    expect(limiter.begin('cy', '10.0.0.1')).toBe(0);
    expect(limiter.begin('dee', '10.0.0.1')).toBe(60);
    // A success gives its attempt back and forgets the account's failures from that address.
    limiter.succeed('bob', '10.0.0.1');
    expect(limiter.begin('eve', '10.0.0.1')).toBe(0);
    vi.advanceTimersByTime(60_001);
    expect(limiter.begin('ada', '10.0.0.1')).toBe(0);
  });

  it('stays cheap with many addresses inside one lockout window', () => {
    // 150,000 addresses, none expired: the old pruning scanned the whole map at every attempt past 50,000 budgets.
    const limiter = new LoginLimiter(5, 20, 900_000);
    const started = performance.now();
    // ≈0.4 s on a quiet 2-core machine; the old pruning took minutes (each of 125,000 attempts scanned 50–300k).
    for (let i = 0; i < 150_000; i++) limiter.begin('admin', `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    expect(performance.now() - started).toBeLessThan(10_000);
  }, 60_000);
});
