/**
 * Websocket follow of deployment logs on shared streams. Each follower gets its own history (bounded: see the
 * limits below) and then the live lines of the upstream it shares with every other follower of the same containers
 * or file.
 *
 * Joining without gaps or duplicates. A follower subscribes first, so every line the upstream emits from then on
 * reaches it (held until its history is out); once the history is out, a held or later line is sent only if the
 * history did not have it:
 * - containers: the upstream keeps the newest lines in a ring (filled once from the engine when it opens, then with
 *   every live line, each numbered). A follower without a filter takes its history from the ring, synchronously,
 *   and then gets the lines numbered after it: exact. A follower with a filter reads its own history from the engine
 *   (the ring may hold too few matches) and then gets the lines with a later engine timestamp than the last line
 *   that read saw of their container (lines with the very same nanosecond timestamp would be dropped; the engine
 *   stamps each line, so that does not happen in practice).
 * - files: the follower reads its history from the end of the file, then gets the lines ending past the size that
 *   read went up to (or written after a later truncation/rotation).
 */
import type { Logger, WebSocketConnection } from '@agent/sdk';
import type { ContainerSummary, DockerService, LogLine } from '@agent/plugin-docker/api';
import { timeKey, type DeploymentLogLine } from './logs.js';
import { followFile, readLastLinesAt, type FilePosition, type Opener } from './file-tail.js';
import { LogHub, type Emit, type HubLine, type Upstream } from './log-hub.js';
import { BoundedFollower, HistoryPacer } from './log-follower.js';

/** History of one websocket follower: `tail=0` (all) and any larger `tail` are capped to this many lines. */
export const WS_HISTORY_MAX_LINES = 1000;
/** … and to this many bytes of text (the newest lines are kept). */
export const WS_HISTORY_MAX_BYTES = 4 * 1024 * 1024;
/** With a filter, at most this many lines per container (or bytes of a file) are scanned for matches. */
const FILTER_SCAN_LINES = 20_000;
const FILTER_SCAN_BYTES = 32 * 1024 * 1024;
/** Bytes of live lines a follower may have waiting (held during its history or not yet written to its socket). */
export const FOLLOWER_MAX_BYTES = 1024 * 1024;
/** Histories read from the engine or a file at the same time: many followers joining at once wait their turn. */
const HISTORY_CONCURRENCY = 4;

export interface ContainerPosition {
  /** Number of the line in its upstream (lines from the ring have the lower numbers). */
  seq: number;
  container: string;
  /** `timeKey` of the engine timestamp ('' when the line had none). */
  time: string;
}

export interface ContainerUpstream extends Upstream {
  /** The newest lines (oldest first) and the number of the last one. */
  snapshot(): { lines: Array<HubLine<ContainerPosition>>; seq: number };
}

export interface FileUpstream extends Upstream {
  /** Truncations and rotations seen so far. */
  generation(): number;
}

interface History<P> {
  lines: Buffer[];
  fresh: (at: P) => boolean;
}

/** A line as its websocket message, encoded once: a string would be encoded again for every follower it is sent to. */
const wireOf = (line: DeploymentLogLine): Buffer => Buffer.from(JSON.stringify({ type: 'line', ...line }));

/** Runs at most `limit` tasks at once, the others in arrival order. */
function limiter(limit: number) {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    // A finished task hands its slot to the next waiting one directly, so a newcomer cannot take it in between.
    if (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    else running++;
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/** Keeps the newest lines within the history's byte bound. */
function boundedBytes<T extends { text: string }>(lines: T[]): T[] {
  let bytes = 0;
  for (let i = lines.length - 1; i >= 0; i--) {
    bytes += lines[i]!.text.length;
    if (bytes > WS_HISTORY_MAX_BYTES) return lines.slice(i + 1);
  }
  return lines;
}

/** The newest lines of an upstream, within the history bounds (lines and bytes). */
class LineRing<T extends { text: string }> {
  private lines: T[] = [];
  private bytes = 0;
  private first = 0;

  push(line: T): void {
    this.lines.push(line);
    this.bytes += line.text.length;
    while (this.lines.length - this.first > WS_HISTORY_MAX_LINES || (this.bytes > WS_HISTORY_MAX_BYTES && this.lines.length - this.first > 1)) {
      this.bytes -= this.lines[this.first]!.text.length;
      this.first++;
    }
    // Compact now and then rather than shifting on every line.
    if (this.first > WS_HISTORY_MAX_LINES) {
      this.lines = this.lines.slice(this.first);
      this.first = 0;
    }
  }

  snapshot(): T[] {
    return this.lines.slice(this.first);
  }
}

export class LogFollowers {
  private readonly containers = new LogHub<ContainerPosition, ContainerUpstream>();
  private readonly files = new LogHub<FilePosition, FileUpstream>();
  private readonly historyTurn = limiter(HISTORY_CONCURRENCY);
  private readonly pacer = new HistoryPacer();
  private dropped = 0;

  constructor(
    private readonly docker: DockerService,
    private readonly log: Logger,
  ) {}

  stats(): { upstreams: number; followers: number; dropped: number } {
    const c = this.containers.stats();
    const f = this.files.stats();
    return { upstreams: c.upstreams + f.upstreams, followers: c.followers + f.followers, dropped: this.dropped };
  }

  closeAll(): void {
    this.containers.closeAll();
    this.files.closeAll();
  }

  /** Follows the output of running containers (of one deployment) until they stop or the client leaves. */
  async followContainers(
    conn: WebSocketConnection,
    deployment: string,
    containers: ContainerSummary[],
    tail: number,
    filter: string | undefined,
  ): Promise<void> {
    // The key is what the upstream reads: the same containers (a recreated container is another upstream).
    const key = `${deployment}\0${containers
      .map((c) => c.id)
      .sort()
      .join(',')}`;
    const wanted = tail === 0 ? WS_HISTORY_MAX_LINES : Math.min(tail, WS_HISTORY_MAX_LINES);
    await this.follow(
      conn,
      this.containers,
      key,
      filter,
      (emit, end) => this.openContainers(containers, emit, end),
      async (upstream) => {
        if (filter) return this.historyTurn(() => this.containerHistory(containers, wanted, filter, conn.signal));
        const { lines, seq } = upstream.snapshot();
        return { lines: boundedBytes(lines.slice(-wanted)).map((l) => l.wire), fresh: (at) => at.seq > seq };
      },
    );
  }

  /** Follows a file source until the client leaves. */
  async followFile(conn: WebSocketConnection, path: string, open: Opener, tail: number, filter: string | undefined): Promise<void> {
    await this.follow(
      conn,
      this.files,
      path,
      filter,
      (emit) => this.openFile(path, open, emit),
      (upstream) =>
        this.historyTurn(async () => {
          const generation = upstream.generation();
          const { lines, size } = await readLastLinesAt(
            open,
            tail === 0 ? WS_HISTORY_MAX_LINES : Math.min(tail, WS_HISTORY_MAX_LINES),
            filter,
            FILTER_SCAN_BYTES,
          );
          const kept = boundedBytes(lines.map((text) => ({ wire: wireOf({ service: null, container: null, stream: 'file', time: null, text }), text })));
          return { lines: kept.map((l) => l.wire), fresh: (at) => at.generation > generation || at.end > size };
        }),
    );
  }

  private async follow<P, U extends Upstream>(
    conn: WebSocketConnection,
    hub: LogHub<P, U>,
    key: string,
    filter: string | undefined,
    open: (emit: Emit<P>, end: (reason: string) => void) => Promise<U>,
    history: (upstream: U) => Promise<History<P>>,
  ): Promise<void> {
    let leave = () => {};
    const follower = new BoundedFollower<P>(conn, FOLLOWER_MAX_BYTES, () => {
      this.dropped++;
      leave();
    });
    let fresh: ((at: P) => boolean) | null = null;
    let endedWith: string | null = null;
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    const end = async (reason: string) => {
      await conn.send({ type: 'end', reason });
      conn.close(1000, 'end of logs');
      finished();
    };
    const sub = hub.subscribe(key, open, {
      lines: (batch) => {
        for (const l of batch) {
          if (filter && !l.text.includes(filter)) continue;
          if (fresh && !fresh(l.at)) continue;
          follower.push(l.wire, l.at);
        }
      },
      backlog: () => follower.backlog,
      end: (reason) => {
        if (fresh) void end(reason);
        else endedWith = reason;
      },
    });
    leave = () => {
      sub.leave();
      finished();
    };
    conn.signal.addEventListener('abort', leave, { once: true });
    try {
      const upstream = await sub.attached;
      const past = await history(upstream);
      // The pacer's turns never wait for a client: one that does not read its history holds back only itself.
      await follower.history(past.lines, this.pacer, () => conn.signal.aborted);
      fresh = past.fresh;
      follower.release(past.fresh);
      if (endedWith !== null) await end(endedWith);
      await done;
    } finally {
      conn.signal.removeEventListener('abort', leave);
      sub.leave();
    }
  }

  /**
   * One engine stream per container, attached before the ring is filled from the engine (so nothing written in
   * between is missed); live lines the fill already had (same or older timestamp) are skipped.
   */
  private async openContainers(containers: ContainerSummary[], emit: Emit<ContainerPosition>, end: (reason: string) => void): Promise<ContainerUpstream> {
    const controller = new AbortController();
    const ring = new LineRing<HubLine<ContainerPosition>>();
    let seq = 0;
    let markFilled!: () => void;
    const filled = new Promise<void>((resolve) => (markFilled = resolve));
    let early: Array<{ c: ContainerSummary; line: LogLine }> | null = [];
    const readUpTo = new Map<string, string>();
    const live = (c: ContainerSummary, line: LogLine): void | Promise<void> => {
      const time = timeKey(line.time);
      if (time && time <= (readUpTo.get(c.id) ?? '')) return;
      const out: DeploymentLogLine = { service: c.service, container: c.name, stream: line.stream, time: line.time, text: line.text };
      const hubLine = { wire: wireOf(out), text: line.text, at: { seq: ++seq, container: c.id, time } };
      ring.push(hubLine);
      return emit(hubLine);
    };
    await new Promise<void>((resolve) => {
      let attached = 0;
      let running = containers.length;
      const attach = () => {
        if (++attached === containers.length) resolve();
      };
      for (const c of containers) {
        void (async () => {
          let counted = false;
          try {
            const lines = this.docker.containerLogs(c.id, {
              follow: true,
              tail: 1,
              timestamps: true,
              signal: controller.signal,
              attached: () => {
                counted = true;
                attach();
              },
            });
            for await (const line of lines) {
              if (early) early.push({ c, line });
              else {
                const settled = live(c, line);
                if (settled) await settled;
              }
            }
          } catch (err) {
            const error = String((err as Error)?.message ?? err);
            if (!controller.signal.aborted) this.log.warn('log follow ended with an error', { container: c.name, error });
          } finally {
            // A container whose stream could not be opened sends nothing more: it does not hold the others back.
            if (!counted) attach();
            if (--running === 0 && !controller.signal.aborted) {
              // Ending waits until the ring is filled, so `end` comes after the upstream was handed out.
              void filled.then(() => end('the containers stopped'));
            }
          }
        })();
      }
    });
    const history = await this.containerHistory(containers, WS_HISTORY_MAX_LINES, undefined, controller.signal);
    for (const [id, time] of history.readUpTo) readUpTo.set(id, time);
    for (const line of history.parsed) ring.push({ wire: wireOf(line), text: line.text, at: { seq: ++seq, container: '', time: '' } });
    const pending = early;
    early = null;
    // Not awaited: lines arriving from now on go straight to `live`, and must come after these.
    for (const { c, line } of pending) void live(c, line);
    markFilled();
    return { close: () => controller.abort(), snapshot: () => ({ lines: ring.snapshot(), seq }) };
  }

  private async openFile(path: string, open: Opener, emit: Emit<FilePosition>): Promise<FileUpstream> {
    const controller = new AbortController();
    const fh = await open();
    let from: number;
    try {
      from = (await fh.stat()).size;
    } finally {
      await fh.close();
    }
    let generation = 0;
    void followFile(
      path,
      open,
      (text, at) => {
        generation = at.generation;
        return emit({ wire: wireOf({ service: null, container: null, stream: 'file', time: null, text }), text, at });
      },
      controller.signal,
      undefined,
      from,
    ).catch((err: Error) => this.log.warn('log file follow ended with an error', { path, error: err.message }));
    return { close: () => controller.abort(), generation: () => generation };
  }

  /** The last `wanted` lines (within the byte bound) of the containers, merged by time, and where each container was read up to. */
  private async containerHistory(containers: ContainerSummary[], wanted: number, filter: string | undefined, signal: AbortSignal) {
    const readUpTo = new Map<string, string>();
    const perContainer = await Promise.all(
      containers.map(async (c) => {
        const out: DeploymentLogLine[] = [];
        try {
          const scan = filter ? Math.min(wanted * 20, FILTER_SCAN_LINES) : wanted;
          for await (const line of this.docker.containerLogs(c.id, { tail: scan, timestamps: true, signal })) {
            if (line.time) readUpTo.set(c.id, timeKey(line.time));
            if (filter && !line.text.includes(filter)) continue;
            out.push({ service: c.service, container: c.name, stream: line.stream, time: line.time, text: line.text });
            if (out.length > wanted * 2) out.splice(0, out.length - wanted);
          }
        } catch (err) {
          if (!signal.aborted) this.log.warn('log history could not be read', { container: c.name, error: String((err as Error)?.message ?? err) });
        }
        return out;
      }),
    );
    const lines = perContainer.flat();
    if (containers.length > 1) lines.sort((a, b) => (timeKey(a.time) < timeKey(b.time) ? -1 : timeKey(a.time) > timeKey(b.time) ? 1 : 0));
    const parsed = boundedBytes(lines.length > wanted ? lines.slice(-wanted) : lines);
    return {
      parsed,
      readUpTo,
      lines: parsed.map(wireOf),
      // A line without a timestamp cannot be placed: it is sent.
      fresh: (at: ContainerPosition) => !at.time || at.time > (readUpTo.get(at.container) ?? ''),
    };
  }
}
