/**
 * Detection: the traffic stream's records → detector → security events (→ automatic blocks). The events of a read
 * commit in this plugin's journal with the stream position they reach, just before the edge commits the read's
 * rows: after a crash the edge reads the same lines again under the same numbers, and the ones already seen are
 * skipped, so events are neither lost nor repeated. Automatic blocks start once their events are committed.
 */
import type { Logger, PluginSettings } from '@agent/sdk';
import type { TrafficBatch, TrafficObserver } from '@agent/plugin-edge/api';
import type { SecuritySettings } from './config.js';
import { BLOCKABLE, Detector } from './detector.js';
import type { SecurityEventInput, SecurityEvents, StreamPosition } from './events.js';
import type { Rules } from './rules.js';

export class Detection implements TrafficObserver {
  private readonly detector: Detector;
  /** Sources with an automatic block decided or under way (one block at a time per source). */
  private readonly pendingBlocks = new Set<string>();
  /** What the current read raised, and how far it went: committed together. */
  private found: SecurityEventInput[] = [];
  private reached: StreamPosition | null = null;
  /** Position committed last (read once from the journal). */
  private position: StreamPosition | null;

  constructor(
    private readonly events: SecurityEvents,
    private readonly rules: Rules,
    private readonly settings: PluginSettings<typeof SecuritySettings>,
    private readonly log: Logger,
  ) {
    this.detector = new Detector(() => settings.get());
    this.position = events.position();
  }

  observe({ stream, seq, records }: TrafficBatch): void {
    // Records of this stream up to the committed position were seen before a crash: skip them.
    const seen = this.position?.stream === stream ? this.position.seq : 0;
    const fresh = seq > seen ? records : records.slice(Math.min(records.length, seen - seq + 1));
    this.reached = { stream, seq: seq + records.length - 1 };
    if (fresh.length) for (const e of this.detector.observe(fresh)) this.found.push(e);
  }

  commit(): void {
    if (!this.reached) return;
    const found = this.found;
    const reached = this.reached;
    this.found = [];
    this.reached = null;
    const ids = this.events.commit(found, reached);
    this.position = reached;
    const s = this.settings.get();
    if (!s.auto_block) return;
    found.forEach((e, i) => {
      const ip = e.source_ip;
      if (!BLOCKABLE.has(e.type) || this.pendingBlocks.has(ip) || this.rules.activeBlock(ip) || this.rules.whitelisted(ip)) return;
      this.pendingBlocks.add(ip);
      const id = ids[i]!;
      this.rules
        .block({ ip, reason: `auto-block: ${e.type} (event ${id})`, duration: s.auto_block_duration, auto: true })
        .then(() => this.events.markBlocked(id))
        .catch((err) => this.log.error('auto-block failed', { ip, error: (err as Error).message }))
        .finally(() => this.pendingBlocks.delete(ip));
    });
  }

  /** A read whose `commit` did not come (the edge's transaction failed before): its events are not kept. */
  end(): void {
    this.found = [];
    this.reached = null;
  }

  retire(deployment: string, retiredAs: string, untilMs: number): void {
    const n = this.events.retire(deployment, retiredAs, untilMs);
    if (n) this.log.info('security events of a deleted deployment kept under its retired name', { deployment, retired_as: retiredAs, events: n });
  }
}
