/**
 * The traffic stream: access-log lines → traffic journal → observers (other plugins, e.g. the security plugin's
 * detection). Real-time mode follows the log; otherwise the periodic job reads it. Either way every line is read
 * once, and its record handed to each observer inside the read's transaction.
 */
import type { Logger } from '@agent/sdk';
import type { TrafficObserver, TrafficStream } from '../api.js';
import { AccessLogReader } from './ingest.js';
import type { TrafficJournal } from './journal.js';

export class Traffic implements TrafficStream {
  readonly reader: AccessLogReader;
  private readonly observers = new Set<TrafficObserver>();
  private realtimeMode = true;
  private started = false;

  constructor(
    source: string,
    journal: TrafficJournal,
    private readonly followIntervalMs: number,
    private readonly log: Logger,
  ) {
    // An observer that throws loses its own work only: the rows, the offset and the other observers go on.
    const each = (what: string, fn: (o: TrafficObserver) => void) => {
      for (const o of this.observers) {
        try {
          fn(o);
        } catch (err) {
          this.log.error(`traffic observer failed (${what})`, { error: (err as Error).message });
        }
      }
    };
    this.reader = new AccessLogReader(
      source,
      journal.db,
      journal,
      {
        observe: (records, seq) => each('observe', (o) => o.observe({ stream: this.reader.stream, seq, records })),
        commit: () => each('commit', (o) => o.commit?.()),
        end: (committed) => each('end', (o) => o.end?.(committed)),
      },
      log,
    );
    this.capture = {
      realtime: () => this.realtimeMode,
      setRealtime: (enabled) => {
        this.realtimeMode = enabled;
        if (this.started) this.applyMode();
      },
      source,
    };
  }

  readonly capture: TrafficStream['capture'];

  subscribe(observer: TrafficObserver): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  readNew(): Promise<number> {
    return this.reader.readNew();
  }

  /** Tells the observers that a deleted deployment's records up to `untilMs` are kept under `retiredAs`. */
  async retire(deployment: string, retiredAs: string, untilMs: number): Promise<void> {
    for (const o of this.observers) {
      try {
        await o.retire?.(deployment, retiredAs, untilMs);
      } catch (err) {
        this.log.error('traffic observer failed (retire)', { deployment, error: (err as Error).message });
      }
    }
  }

  start(): void {
    this.started = true;
    this.applyMode();
  }

  /** Follows the log in real-time mode, stops following otherwise. */
  private applyMode(): void {
    if (this.realtimeMode) this.reader.follow(this.followIntervalMs);
    else this.reader.unfollow();
  }

  stop(): void {
    this.started = false;
    this.reader.unfollow();
  }
}
