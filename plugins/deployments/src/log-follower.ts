/**
 * One websocket follower of a shared log stream, with a bounded amount of memory: the bytes of the messages not yet
 * written to its socket (held while its history is sent, or queued in the socket) may not exceed `maxBytes`. A
 * follower that cannot keep up is dropped with `SLOW_FOLLOWER_CLOSE` instead of making the agent hold ever more.
 */
import type { WebSocketConnection } from '@agent/sdk';

/** Websocket close code for a follower dropped because it read too slowly (documented in the plugin README). */
export const SLOW_FOLLOWER_CLOSE = 4008;
const HISTORY_BATCH = 64 * 1024;

/** `M` is what a held line carries to decide, once the history is out, whether the history already had it. */
export class BoundedFollower<M> {
  /** Bytes handed over and not yet written to the socket, plus bytes held. */
  private pendingBytes = 0;
  /** Live lines held while the history is being sent (null once released). */
  private held: Array<{ wire: string; meta: M }> | null = [];
  private dropped = false;

  constructor(private readonly conn: WebSocketConnection, private readonly maxBytes: number, private readonly onDrop: () => void) {}

  get isDropped(): boolean {
    return this.dropped;
  }

  /** Bytes waiting: held, or handed to the socket and not yet written. */
  get backlog(): number {
    return this.dropped ? 0 : this.pendingBytes;
  }

  /** A live line: held until the history is out, then written without waiting. */
  push(wire: string, meta: M): void {
    if (this.dropped) return;
    if (this.held) {
      this.pendingBytes += wire.length;
      this.held.push({ wire, meta });
      this.checkBound();
      return;
    }
    this.write(wire);
  }

  /**
   * The history: written in batches of about `HISTORY_BATCH` bytes, each awaited, so the history of one follower
   * never piles up in memory and many followers sending theirs take turns with the live lines.
   */
  async history(wires: string[], aborted: () => boolean): Promise<void> {
    let batch = 0;
    let last: Promise<void> | null = null;
    for (const wire of wires) {
      if (this.dropped || aborted()) return;
      last = this.conn.send(wire);
      batch += wire.length;
      if (batch >= HISTORY_BATCH) {
        await last;
        batch = 0;
        last = null;
      }
    }
    if (last) await last;
  }

  /** The history is out: what was held goes first, in order, then live lines go straight through. */
  release(keep: (meta: M) => boolean): void {
    const held = this.held ?? [];
    this.held = null;
    for (const { wire, meta } of held) {
      this.pendingBytes -= wire.length;
      if (keep(meta)) this.write(wire);
    }
  }

  private write(wire: string): void {
    if (this.dropped) return;
    this.pendingBytes += wire.length;
    void this.conn.send(wire).then(() => {
      this.pendingBytes -= wire.length;
    });
    this.checkBound();
  }

  private checkBound(): void {
    if (this.pendingBytes <= this.maxBytes || this.dropped) return;
    this.dropped = true;
    this.held = [];
    this.conn.close(SLOW_FOLLOWER_CLOSE, `follower too slow: more than ${Math.round(this.maxBytes / 1024)} KiB of log lines waiting`);
    this.onDrop();
  }
}
