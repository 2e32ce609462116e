/**
 * Shared log streams: one upstream (an engine log stream per container, or one file follow) per key, opened for the
 * first follower and closed when the last one leaves; every line is handed to all followers of the key. The key
 * holds only what changes the upstream (deployment, containers or file path): per-follower choices such as the text
 * filter or the history length are applied by each follower, so one follower never sees another's choices.
 */

/** What an upstream emits: the line as sent on the wire (serialized once for all followers) and its position. */
export interface HubLine<P> {
  /** The websocket message, already JSON. */
  wire: string;
  /** The text, for per-follower filters. */
  text: string;
  /** Where the line is in its source, to drop what a follower's history already had. */
  at: P;
}

export interface HubListener<P> {
  line(line: HubLine<P>): void;
  /** The upstream ended by itself (the containers stopped). */
  end(reason: string): void;
}

/** A running upstream: `close` stops it (the last follower left). */
export interface Upstream {
  close(): void;
}

/**
 * Opens an upstream; resolves once it is attached (every line produced from then on will be emitted), rejects when
 * it cannot be opened.
 */
export type UpstreamFactory<P, U extends Upstream> = (emit: (line: HubLine<P>) => void, end: (reason: string) => void) => Promise<U>;

interface Shared<P, U extends Upstream> {
  listeners: Set<HubListener<P>>;
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
      const created: Shared<P, U> = { listeners: new Set(), attached: null as never, done: false };
      created.attached = open(
        (line) => {
          for (const l of created.listeners) l.line(line);
        },
        (reason) => {
          if (this.shared.get(key) === created) this.shared.delete(key);
          const listeners = [...created.listeners];
          created.listeners.clear();
          this.finish(created, false);
          for (const l of listeners) l.end(reason);
        },
      );
      created.attached.then(() => {
        this.open++;
      }, () => {
        // An upstream that could not be opened is forgotten: the next follower tries again.
        created.done = true;
        if (this.shared.get(key) === created) this.shared.delete(key);
      });
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

  private finish(entry: Shared<P, U>, close: boolean): void {
    if (entry.done) return;
    entry.done = true;
    void entry.attached.then((upstream) => {
      this.open--;
      if (close) upstream.close();
    }, () => undefined);
  }
}
