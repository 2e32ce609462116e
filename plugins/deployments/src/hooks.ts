/**
 * Deploy hooks: `POST /api/hooks/deployments/:name/redeploy`, called by CI without an API key. A call is
 * authenticated by an HMAC-SHA256 signature with the deployment's hook secret over
 *
 *     <X-Agent-Timestamp> "." <X-Agent-Delivery> "." <raw body>
 *
 * sent as `X-Agent-Signature: sha256=<hex>`, compared in constant time. The timestamp (Unix seconds) must be within
 * ±5 minutes of the agent's clock, and a delivery id is accepted once: it is remembered (in the journal, so also
 * across a restart) for as long as its timestamp could pass. Secrets are 256 random bits, sealed at rest with the
 * agent's data key, shown once when created or rotated. Calls are rate limited per deployment: signed calls
 * (`deployments.hook_rate_limit` per minute) and refused ones (as many again, beyond which they are neither checked
 * nor audited).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { errors, HttpError, type Sealer, type SqlDatabase } from '@agent/sdk';

export const HOOK_HEADERS = { timestamp: 'X-Agent-Timestamp', delivery: 'X-Agent-Delivery', signature: 'X-Agent-Signature' } as const;
export const HOOK_SIGNATURE_BASE = '<X-Agent-Timestamp> "." <X-Agent-Delivery> "." <raw body>, HMAC-SHA256 with the secret (its UTF-8 bytes), as sha256=<hex>';
/** How far a call's timestamp may be from the agent's clock; delivery ids are remembered as long as that allows. */
export const HOOK_WINDOW_SECONDS = 300;
export const HOOK_BODY_LIMIT = 64 * 1024;
const DELIVERY = /^[A-Za-z0-9._:-]{1,128}$/;
const TIMESTAMP = /^[0-9]{1,12}$/;
const SIGNATURE = /^sha256=([0-9a-f]{64})$/i;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS deploy_hooks (
  deployment TEXT PRIMARY KEY,
  secret TEXT NOT NULL,
  created_at TEXT NOT NULL,
  created_by TEXT NOT NULL,
  last_used_at TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hook_deliveries (
  deployment TEXT NOT NULL,
  delivery TEXT NOT NULL,
  seen_at INTEGER NOT NULL,
  PRIMARY KEY (deployment, delivery)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS hook_deliveries_seen ON hook_deliveries(seen_at);
`;

export interface HookRecord {
  deployment: string;
  created_at: string;
  created_by: string;
  last_used_at: string | null;
}

/** The signature a call carries: HMAC-SHA256 of the signature base with the secret. */
export function hookSignature(secret: string, timestamp: string, delivery: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${delivery}.`).update(body).digest('hex')}`;
}

/** Sliding one-minute windows of call times per deployment. */
class Windows {
  private readonly calls = new Map<string, number[]>();

  /** Counts a call unless `limit` calls were counted in the last minute; then the seconds until one leaves. */
  take(key: string, limit: number, now: number): number | null {
    const list = (this.calls.get(key) ?? []).filter((t) => t > now - 60_000);
    if (list.length >= limit) {
      this.calls.set(key, list);
      return Math.max(1, Math.ceil((list[0]! + 60_000 - now) / 1000));
    }
    list.push(now);
    this.calls.set(key, list);
    return null;
  }

  forget(key: string): void {
    this.calls.delete(key);
  }
}

const tooMany = (seconds: number, what: string) =>
  new HttpError(
    429,
    'RATE_LIMITED',
    `too many ${what} for this deployment's hook; retry in ${seconds} s`,
    { retry_after: seconds },
    { 'Retry-After': String(seconds) },
  );

export class Hooks {
  /** Opened secrets (a call must not decrypt one each time); dropped on rotation and removal. */
  private readonly secrets = new Map<string, string>();
  private readonly signed = new Windows();
  private readonly refused = new Windows();

  constructor(
    private readonly db: SqlDatabase,
    private readonly sealer: Sealer,
    private readonly limit: () => number,
  ) {
    db.exec(SCHEMA);
  }

  get(deployment: string): HookRecord | null {
    return (
      (this.db.prepare('SELECT deployment, created_at, created_by, last_used_at FROM deploy_hooks WHERE deployment = ?').get(deployment) as
        HookRecord | undefined) ?? null
    );
  }

  /** A new secret for the deployment's hook (the old one, if any, stops working at once); the secret in clear. */
  rotate(deployment: string, createdBy: string): { secret: string; record: HookRecord } {
    const secret = `hks_${randomBytes(32).toString('base64url')}`;
    const now = new Date().toISOString();
    this.db
      .prepare('INSERT OR REPLACE INTO deploy_hooks (deployment, secret, created_at, created_by, last_used_at) VALUES (?, ?, ?, ?, NULL)')
      .run(deployment, this.sealer.seal(secret), now, createdBy);
    this.secrets.delete(deployment);
    return { secret, record: this.get(deployment)! };
  }

  /** Disables the hook (its secret is forgotten); false when there was none. */
  remove(deployment: string): boolean {
    this.secrets.delete(deployment);
    this.signed.forget(deployment);
    this.refused.forget(deployment);
    this.db.prepare('DELETE FROM hook_deliveries WHERE deployment = ?').run(deployment);
    return this.db.prepare('DELETE FROM deploy_hooks WHERE deployment = ?').run(deployment).changes > 0;
  }

  private secretOf(deployment: string): string | null {
    const cached = this.secrets.get(deployment);
    if (cached) return cached;
    const row = this.db.prepare('SELECT secret FROM deploy_hooks WHERE deployment = ?').get(deployment) as { secret: string } | undefined;
    if (!row) return null;
    const secret = this.sealer.open(row.secret);
    this.secrets.set(deployment, secret);
    return secret;
  }

  /** Whether a call to the deployment's hook is checked at all (refused ones beyond the limit are not). */
  admitRefused(deployment: string, now = Date.now()): void {
    const wait = this.refused.take(deployment, this.limit(), now);
    if (wait !== null) throw tooMany(wait, 'refused calls');
  }

  /**
   * Checks a call's signature and timestamp (401 HOOK_SIGNATURE_INVALID, 401 HOOK_TIMESTAMP_STALE), then the
   * rate of signed calls (429). Does not remember the delivery (see `remember`).
   */
  verify(deployment: string, headers: Record<string, string | string[] | undefined>, body: Buffer, now = Date.now()): { delivery: string; timestamp: number } {
    const header = (name: string) => {
      const v = headers[name.toLowerCase()];
      return Array.isArray(v) ? undefined : v;
    };
    const timestamp = header(HOOK_HEADERS.timestamp);
    const delivery = header(HOOK_HEADERS.delivery);
    const signature = header(HOOK_HEADERS.signature);
    const secret = this.secretOf(deployment);
    const given = signature ? SIGNATURE.exec(signature)?.[1] : undefined;
    if (!secret || !timestamp || !TIMESTAMP.test(timestamp) || !delivery || !DELIVERY.test(delivery) || !given)
      throw errors.unauthorized(
        `a hook call needs ${HOOK_HEADERS.timestamp} (Unix seconds), ${HOOK_HEADERS.delivery} (1–128 of A-Z a-z 0-9 . _ : -) and ${HOOK_HEADERS.signature} (sha256=<hex>)`,
        'HOOK_SIGNATURE_INVALID',
      );
    const expected = Buffer.from(hookSignature(secret, timestamp, delivery, body).slice('sha256='.length), 'hex');
    if (!timingSafeEqual(expected, Buffer.from(given.toLowerCase(), 'hex')))
      throw errors.unauthorized('the signature does not match', 'HOOK_SIGNATURE_INVALID');
    const seconds = Number(timestamp);
    if (Math.abs(now / 1000 - seconds) > HOOK_WINDOW_SECONDS)
      throw errors.unauthorized(`${HOOK_HEADERS.timestamp} is more than ${HOOK_WINDOW_SECONDS} s away from the agent's clock`, 'HOOK_TIMESTAMP_STALE');
    const wait = this.signed.take(deployment, this.limit(), now);
    if (wait !== null) throw tooMany(wait, 'calls');
    return { delivery, timestamp: seconds };
  }

  /** Remembers a delivery id for as long as its timestamp could pass; false when it was already seen. */
  remember(deployment: string, delivery: string, now = Date.now()): boolean {
    if (Math.random() < 0.05) this.prune(now);
    return this.db.prepare('INSERT OR IGNORE INTO hook_deliveries (deployment, delivery, seen_at) VALUES (?, ?, ?)').run(deployment, delivery, now).changes > 0;
  }

  /** A delivery whose redeploy did not start (another job ran): the same call may come again. */
  forget(deployment: string, delivery: string): void {
    this.db.prepare('DELETE FROM hook_deliveries WHERE deployment = ? AND delivery = ?').run(deployment, delivery);
  }

  used(deployment: string): void {
    this.db.prepare('UPDATE deploy_hooks SET last_used_at = ? WHERE deployment = ?').run(new Date().toISOString(), deployment);
  }

  /** Delivery ids whose timestamps can no longer pass (a call within the window is at most 2 windows old). */
  prune(now = Date.now()): number {
    return this.db.prepare('DELETE FROM hook_deliveries WHERE seen_at < ?').run(now - 2 * HOOK_WINDOW_SECONDS * 1000).changes;
  }
}
