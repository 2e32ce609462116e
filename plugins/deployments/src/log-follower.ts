/**
 * One websocket follower of a shared log stream, with a bounded amount of memory: the bytes of the messages not yet
 * written to its socket (held while its history is sent, or queued in the socket) may not exceed `maxBytes`. A
 * follower that cannot keep up is dropped with `SLOW_FOLLOWER_CLOSE` instead of making the agent hold ever more.
 */
import type { WebSocketConnection } from '@agent/sdk';

/** Websocket close code for a follower dropped because it read too slowly (documented in the plugin README). */
export const SLOW_FOLLOWER_CLOSE = 4008;
const HISTORY_SLICE = 16 * 1024;
const HISTORY_AWAIT = 64 * 1024;
/** History bytes written per turn of the event loop, all followers together. */
const HISTORY_PER_TICK = 128 * 1024;

/**
 * Spreads the histories of many followers over turns of the event loop (`setImmediate`): timers and I/O — the live
 * lines — run between turns.
 */
export class HistoryPacer {
  private readonly waiting: Array<{ bytes: number; go: () => void }> = [];
  private scheduled = false;

  turn(bytes: number): Promise<void> {
    return new Promise((go) => {
      this.waiting.push({ bytes, go });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      let budget = HISTORY_PER_TICK;
      while (budget > 0 && this.waiting.length) {
        const next = this.waiting.shift()!;
        budget -= next.bytes;
        next.go();
      }
      if (this.waiting.length) this.schedule();
    });
  }
}

/** `M` is what a held line carries to decide, once the history is out, whether the history already had it. */
export class BoundedFollower<M> {
  /** Bytes handed over and not yet written to the socket, plus bytes held. */
  private pendingBytes = 0;
  /** Live lines held while the history is being sent (null once released). */
  private held: Array<{ wire: Buffer; meta: M }> | null = [];
  private dropped = false;

  constructor(
    private readonly conn: WebSocketConnection,
    private readonly maxBytes: number,
    private readonly onDrop: () => void,
  ) {}

  get isDropped(): boolean {
    return this.dropped;
  }

  /** Bytes waiting: held, or handed to the socket and not yet written. */
  get backlog(): number {
    return this.dropped ? 0 : this.pendingBytes;
  }

  /** A live line: held until the history is out, then written without waiting. */
  push(wire: Buffer, meta: M): void {
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
   * The history: written in slices of `HISTORY_SLICE` bytes, each when the pacer gives a turn, and awaited every
   * `HISTORY_AWAIT` bytes, so one follower's history never piles up in memory and hundreds of followers joining at
   * once do not hold back the live lines of the others.
   */
  async history(wires: Buffer[], pacer: HistoryPacer, aborted: () => boolean): Promise<void> {
    let i = 0;
    let unawaited = 0;
    while (i < wires.length) {
      let slice = 0;
      for (let j = i; j < wires.length && slice < HISTORY_SLICE; j++) slice += wires[j]!.length;
      await pacer.turn(slice);
      if (this.dropped || aborted()) return;
      let last: Promise<void> | null = null;
      for (let sent = 0; i < wires.length && sent < HISTORY_SLICE; i++) {
        last = this.conn.send(wires[i]!);
        sent += wires[i]!.length;
        unawaited += wires[i]!.length;
      }
      if (last && (unawaited >= HISTORY_AWAIT || i === wires.length)) {
        await last;
        unawaited = 0;
      }
    }
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

  private write(wire: Buffer): void {
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
