/**
 * The rules and their changes: every change goes through the proxy contribution (the edge renders the snippets
 * with the sites, tests, reloads, then this state is saved), so the state is what nginx enforces. Blocking and
 * unblocking are shared by the routes, the detection's auto-block and the expiry sweep.
 */
import type { EventBus, Logger } from '@agent/sdk';
// The event it emits is declared with the plugin's other contracts.
import type {} from './api.js';
import type { ProxyContribution } from '@agent/plugin-edge/api';
import type { BlockList } from 'node:net';
import { isExpired, type BlockedIp, type SecurityState, type WhitelistEntry } from './state.js';
import { addressList, listed } from './validate.js';

export class Rules {
  private sweepTimer: NodeJS.Timeout | null = null;
  /** The whitelist's addresses and ranges, built again when the list is (a saved change replaces the array). */
  private whitelistAddresses: { entries: WhitelistEntry[]; list: BlockList } | null = null;

  constructor(
    private readonly current: () => SecurityState,
    readonly proxy: ProxyContribution<SecurityState>,
    private readonly events: EventBus,
    private readonly log: Logger,
  ) {}

  get state(): SecurityState {
    return this.current();
  }

  /** Whether the whitelist covers an address (whitelisted sources are never auto-blocked). */
  whitelisted(ip: string): boolean {
    const entries = this.state.whitelist;
    if (this.whitelistAddresses?.entries !== entries) {
      this.whitelistAddresses = { entries, list: addressList(entries.filter((w) => w.type !== 'path').map((w) => w.value)) };
    }
    return listed(this.whitelistAddresses.list, ip);
  }

  activeBlock(ip: string, deployment: string | null = null): BlockedIp | undefined {
    return this.state.blocked.find((b) => b.ip === ip && b.deployment === deployment && !isExpired(b));
  }

  /** Blocks (or re-blocks, updating reason and expiry) an address; in force in nginx when it resolves. */
  async block(input: { ip: string; reason: string; duration?: number | null; deployment?: string | null; auto: boolean }): Promise<BlockedIp> {
    const now = new Date();
    const entry: BlockedIp = {
      ip: input.ip,
      reason: input.reason,
      deployment: input.deployment ?? null,
      auto: input.auto,
      created_at: now.toISOString(),
      expires_at: input.duration ? new Date(now.getTime() + input.duration * 1000).toISOString() : null,
    };
    await this.proxy.mutate((draft) => {
      draft.blocked = draft.blocked.filter((b) => !(b.ip === entry.ip && b.deployment === entry.deployment));
      draft.blocked.push(entry);
    });
    this.events.emit('security.ip_blocked', { ip: entry.ip, reason: entry.reason, deployment: entry.deployment, auto: entry.auto });
    this.schedule();
    return entry;
  }

  /** Lifts the blocks of an address (only its block for `deployment` when given); how many there were. */
  async unblock(ip: string, deployment?: string | null): Promise<number> {
    const { result } = await this.proxy.mutate((draft) => {
      const before = draft.blocked.length;
      draft.blocked = draft.blocked.filter((b) => !(b.ip === ip && (deployment === undefined || b.deployment === deployment)));
      return before - draft.blocked.length;
    });
    return result;
  }

  /** Lifts expired blocks: re-renders without them. Runs at the next expiry (and every minute as a safety net). */
  async sweep(): Promise<number> {
    if (!this.state.blocked.some((b) => isExpired(b))) return 0;
    const { result } = await this.proxy.mutate((draft) => {
      const expired = draft.blocked.filter((b) => isExpired(b));
      draft.blocked = draft.blocked.filter((b) => !isExpired(b));
      return expired.length;
    });
    if (result) this.log.info('expired blocks lifted', { count: result });
    return result;
  }

  /** Arms a timer for the nearest expiry. */
  schedule(): void {
    if (this.sweepTimer) clearTimeout(this.sweepTimer);
    const next = this.state.blocked.map((b) => (b.expires_at ? Date.parse(b.expires_at) : Infinity)).reduce((a, b) => Math.min(a, b), Infinity);
    const delay = Math.min(Math.max(next - Date.now() + 50, 50), 60_000);
    this.sweepTimer = setTimeout(() => {
      this.sweepTimer = null;
      this.sweep()
        .catch((err) => this.log.warn('block expiry failed', { error: (err as Error).message }))
        .finally(() => this.schedule());
    }, delay);
    this.sweepTimer.unref();
  }

  stop(): void {
    if (this.sweepTimer) clearTimeout(this.sweepTimer);
    this.sweepTimer = null;
  }
}
