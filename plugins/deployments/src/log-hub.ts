/**
 * Shared log streams: one upstream (an engine log stream per container, or one file follow) per key, opened for the
 * first follower and closed when the last one leaves; every line is handed to all followers of the key. The key
 * holds only what changes the upstream (deployment, containers or file path): per-follower choices such as the text
 * filter or the history length are applied by each follower, so one follower never sees another's choices.
 */

/** What an upstream emits: the line as sent on the wire (serialized once for all followers) and its position. */
export interface HubLine<P> {
  /** The websocket message, already JSON and encoded (UTF-8): the same bytes go to every follower without a copy. */
  wire: Buffer;
  /** The text, for per-follower filters. */
  text: string;
  /** Where the line is in its source, to drop what a follower's history already had. */
  at: P;
}

export interface HubListener<P> {
  /** Lines in order, a batch at a time (see `FLUSH_MS`). */
  lines(lines: Array<HubLine<P>>): void;
  /** Bytes waiting for this follower (0 once it was dropped). */
  backlog(): number;
  /** The upstream ended by itself (the containers stopped). */
  end(reason: string): void;
}

/** A running upstream: `close` stops it (the last follower left). */
export interface Upstream {
  close(): void;
}

/**
 * Opens an upstream; resolves once it is attached (every line produced from then on will be emitted), rejects when
 * it cannot be opened. When `emit` returns a promise, the upstream waits for it before reading on (see `settle`).
 */
export type UpstreamFactory<P, U extends Upstream> = (emit: Emit<P>, end: (reason: string) => void) => Promise<U>;
export type Emit<P> = (line: HubLine<P>) => void | Promise<void>;

/**
 * A busy upstream hands its lines to the followers at most once per this many ms (a quiet one at once): every
 * follower then writes one socket message batch instead of one write per line, which is most of the cost of
 * fanning out to hundreds of followers. The delay a line may get is bounded by it.
 */
export const FLUSH_MS = 20;
/** A batch this big is handed over at once, and the upstream waits for the followers (see `settle`). */
const BATCH_BYTES = 64 * 1024;
/** … until every follower has less than this waiting, */
const LOW_WATER = 256 * 1024;
/** … or this long per batch: a follower that stalls slows a fast upstream down until it is dropped, never stops it. */
const MAX_SETTLE_MS = 100;

interface Shared<P, U extends Upstream> {
  listeners: Set<HubListener<P>>;
  batch: Array<HubLine<P>>;
  batchBytes: number;
  timer: NodeJS.Timeout | null;
  lastFlush: number;
  attached: Promise<U>;
  /** Ended by itself or closed: never counted twice. */
  done: boolean;
}

export interface Subscription<U extends Upstream> {
  /** Resolves once the shared upstream is attached. */
  attached: Promise<U>;
  leave(): void;
}

export class LogHub<P, U extends Upstream = Upstream> {
  private readonly shared = new Map<string, Shared<P, U>>();
  /** Upstreams attached and not yet ended or closed: what really holds engine streams or file watches. */
  private open = 0;

  subscribe(key: string, open: UpstreamFactory<P, U>, listener: HubListener<P>): Subscription<U> {
    let entry = this.shared.get(key);
    if (!entry) {
      const created: Shared<P, U> = { listeners: new Set(), attached: null as never, done: false, batch: [], batchBytes: 0, timer: null, lastFlush: 0 };
      created.attached = open(
        (line) => {
          created.batch.push(line);
          created.batchBytes += line.wire.length;
          if (created.batchBytes >= BATCH_BYTES) {
            this.flush(created);
            return this.settle(created);
          }
          if (created.timer) return;
          const wait = created.lastFlush + FLUSH_MS - Date.now();
          if (wait <= 0) this.flush(created);
          else created.timer = setTimeout(() => this.flush(created), wait);
        },
        (reason) => {
          this.flush(created);
          if (this.shared.get(key) === created) this.shared.delete(key);
          const listeners = [...created.listeners];
          created.listeners.clear();
          this.finish(created, false);
          for (const l of listeners) l.end(reason);
        },
      );
      created.attached.then(
        () => {
          this.open++;
        },
        () => {
          // An upstream that could not be opened is forgotten: the next follower tries again.
          created.done = true;
          if (this.shared.get(key) === created) this.shared.delete(key);
        },
      );
      this.shared.set(key, created);
      entry = created;
    }
    const target = entry;
    target.listeners.add(listener);
    let left = false;
    return {
      attached: target.attached,
      leave: () => {
        if (left) return;
        left = true;
        target.listeners.delete(listener);
        if (target.listeners.size === 0 && !target.done) {
          if (this.shared.get(key) === target) this.shared.delete(key);
          this.finish(target, true);
        }
      },
    };
  }

  /** Open upstreams and their followers (for the doctor and the tests). */
  stats(): { upstreams: number; followers: number } {
    let followers = 0;
    for (const s of this.shared.values()) followers += s.listeners.size;
    return { upstreams: this.open, followers };
  }

  /** Closes every upstream (the plugin stops). */
  closeAll(): void {
    for (const [key, s] of this.shared) {
      this.shared.delete(key);
      s.listeners.clear();
      this.finish(s, true);
    }
  }

  private flush(entry: Shared<P, U>): void {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = null;
    entry.lastFlush = Date.now();
    const batch = entry.batch;
    if (batch.length === 0) return;
    entry.batch = [];
    entry.batchBytes = 0;
    for (const l of entry.listeners) l.lines(batch);
  }

  /**
   * A fast upstream (a big append to a file, a container printing megabytes) must not outrun every follower: it
   * waits until they have taken most of what they were given, for at most `MAX_SETTLE_MS` per batch.
   */
  private async settle(entry: Shared<P, U>): Promise<void> {
    const until = Date.now() + MAX_SETTLE_MS;
    while (Date.now() < until && !entry.done && [...entry.listeners].some((l) => l.backlog() > LOW_WATER)) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  private finish(entry: Shared<P, U>, close: boolean): void {
    if (entry.done) return;
    entry.done = true;
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = null;
    entry.batch = [];
    void entry.attached.then(
      (upstream) => {
        this.open--;
        if (close) upstream.close();
      },
      () => undefined,
    );
  }
}
