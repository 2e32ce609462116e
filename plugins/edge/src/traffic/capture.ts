/**
 * Capture: access-log lines → traffic journal → detector → security events (→ automatic blocks). Real-time mode
 * follows the log; otherwise the periodic job reads it. Either way every line is read once.
 */
import type { PluginSettings } from '@agent/sdk';
import type { SecuritySettings } from '../config.js';
import type { Runtime } from '../runtime.js';
import { Detector, BLOCKABLE } from '../security/detector.js';
import type { SecurityEvents } from '../security/events.js';
import type { Blocks } from '../security/rules.js';
import { AccessLogReader } from './ingest.js';
import type { TrafficJournal, TrafficRecord } from './journal.js';

export class Capture {
  readonly reader: AccessLogReader;
  private readonly detector: Detector;
  private readonly pendingBlocks = new Set<string>();
  /** Automatic blocks decided during the current read, started once its transaction committed. */
  private decided: { ip: string; id: number; reason: string; duration: number }[] = [];

  constructor(
    private readonly rt: Runtime,
    private readonly journal: TrafficJournal,
    private readonly events: SecurityEvents,
    private readonly blocks: Blocks,
    private readonly settings: PluginSettings<typeof SecuritySettings>,
  ) {
    this.detector = new Detector(() => settings.get());
    this.reader = new AccessLogReader(
      rt.edge.layout.accessLog,
      journal.db,
      journal,
      {
        observe: (records) => this.observe(records),
        // The events' ids only exist once committed; a rolled-back read blocks no one.
        end: (committed) => {
          const decided = this.decided;
          this.decided = [];
          for (const d of decided) {
            if (committed) this.autoBlock(d);
            else this.pendingBlocks.delete(d.ip);
          }
        },
      },
      rt.ctx.log,
    );
  }

  /** Records already in the journal → security events (and automatic blocks). */
  observe(records: TrafficRecord[]): void {
    const s = this.settings.get();
    for (const e of this.detector.observe(records)) {
      const id = this.events.add(e);
      if (!s.auto_block || !BLOCKABLE.has(e.type)) continue;
      const ip = e.source_ip;
      if (this.pendingBlocks.has(ip) || this.blocks.activeBlock(ip) || this.blocks.whitelisted(ip)) continue;
      this.pendingBlocks.add(ip);
      this.decided.push({ ip, id, reason: `auto-block: ${e.type} (event ${id})`, duration: s.auto_block_duration });
    }
  }

  private autoBlock({ ip, id, reason, duration }: { ip: string; id: number; reason: string; duration: number }): void {
    this.blocks
      .block({ ip, reason, duration, auto: true })
      .then(() => this.events.markBlocked(id))
      .catch((err) => this.rt.ctx.log.error('auto-block failed', { ip, error: (err as Error).message }))
      .finally(() => this.pendingBlocks.delete(ip));
  }

  /** Follows the log in real-time mode, stops following otherwise. */
  applyMode(): void {
    if (this.settings.get().realtime_capture) this.reader.follow(this.rt.ctx.config.traffic.follow_interval_ms);
    else this.reader.unfollow();
  }

  stop(): void {
    this.reader.unfollow();
  }
}
