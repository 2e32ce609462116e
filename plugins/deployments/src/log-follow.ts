/**
 * Websocket follow of deployment logs on shared streams. Each follower gets its own history (bounded: see the
 * limits below) and then the live lines of the upstream it shares with every other follower of the same containers
 * or file.
 *
 * Joining without gaps or duplicates: a follower subscribes first and waits until the upstream is attached (every
 * line written from then on will reach it), then reads its history. Live lines arriving meanwhile are held. Once
 * the history is out, a live line is sent only if it is newer than what the history read covered: for containers,
 * a later engine timestamp than the last line read from that container; for files, an end offset past the size
 * the history read up to (or a later truncation/rotation). Lines in the overlap are therefore sent once, and none
 * written after the upstream attached is missed. Lines with the very same nanosecond timestamp as the last history
 * line of a container would be dropped; the engine stamps each line, so that does not happen in practice.
 */
import type { Logger, WebSocketConnection } from '@agent/sdk';
import type { ContainerSummary, DockerService } from '@agent/plugin-docker/api';
import { timeKey, type DeploymentLogLine } from './logs.js';
import { followFile, readLastLinesAt, type FilePosition, type Opener } from './file-tail.js';
import { LogHub, type HubLine, type Upstream } from './log-hub.js';
import { BoundedFollower } from './log-follower.js';

/** History of one websocket follower: `tail=0` (all) and any larger `tail` are capped to this many lines. */
export const WS_HISTORY_MAX_LINES = 1000;
/** … and to this many bytes of text (the newest lines are kept). */
export const WS_HISTORY_MAX_BYTES = 4 * 1024 * 1024;
/** With a filter, at most this many lines per container (or bytes of a file) are scanned for matches. */
const FILTER_SCAN_LINES = 20_000;
const FILTER_SCAN_BYTES = 32 * 1024 * 1024;
/** Bytes of live lines a follower may have waiting (held during its history or not yet written to its socket). */
export const FOLLOWER_MAX_BYTES = 1024 * 1024;
/** Histories read at the same time: many followers joining at once wait their turn instead of starving the live lines. */
const HISTORY_CONCURRENCY = 4;

export interface ContainerPosition {
  container: string;
  /** `timeKey` of the engine timestamp ('' when the line had none). */
  time: string;
}

export interface FileUpstream extends Upstream {
  /** Truncations and rotations seen so far. */
  generation(): number;
}

interface History<P> {
  lines: string[];
  fresh: (at: P) => boolean;
}

const wireOf = (line: DeploymentLogLine): string => JSON.stringify({ type: 'line', ...line });

/** Runs at most `limit` tasks at once, the others in arrival order. */
function limiter(limit: number) {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await task();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

/** Keeps the newest lines within the history bounds. */
function bounded(lines: DeploymentLogLine[], wanted: number): DeploymentLogLine[] {
  let kept = lines.length > wanted ? lines.slice(-wanted) : lines;
  let bytes = 0;
  for (let i = kept.length - 1; i >= 0; i--) {
    bytes += kept[i]!.text.length;
    if (bytes > WS_HISTORY_MAX_BYTES) {
      kept = kept.slice(i + 1);
      break;
    }
  }
  return kept;
}

export class LogFollowers {
  private readonly containers = new LogHub<ContainerPosition>();
  private readonly files = new LogHub<FilePosition, FileUpstream>();
  private readonly historyTurn = limiter(HISTORY_CONCURRENCY);
  private dropped = 0;

  constructor(private readonly docker: DockerService, private readonly log: Logger) {}

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
  async followContainers(conn: WebSocketConnection, deployment: string, containers: ContainerSummary[], tail: number, filter: string | undefined): Promise<void> {
    // The key is what the upstream reads: the same containers (a recreated container is another upstream).
    const key = `${deployment}\0${containers.map((c) => c.id).sort().join(',')}`;
    await this.follow(conn, this.containers, key, filter, (emit, end) => this.openContainers(containers, emit, end), () => this.containerHistory(containers, tail, filter, conn.signal));
  }

  /** Follows a file source until the client leaves. */
  async followFile(conn: WebSocketConnection, path: string, open: Opener, tail: number, filter: string | undefined): Promise<void> {
    await this.follow(conn, this.files, path, filter, (emit) => this.openFile(path, open, emit), async (upstream) => {
      const generation = upstream.generation();
      const { lines, size } = await readLastLinesAt(open, tail === 0 ? WS_HISTORY_MAX_LINES : Math.min(tail, WS_HISTORY_MAX_LINES), filter, FILTER_SCAN_BYTES);
      const kept = bounded(lines.map((text) => ({ service: null, container: null, stream: 'file', time: null, text })), WS_HISTORY_MAX_LINES);
      return { lines: kept.map(wireOf), fresh: (at) => at.generation > generation || at.end > size };
    });
  }

  private async follow<P, U extends Upstream>(
    conn: WebSocketConnection, hub: LogHub<P, U>, key: string, filter: string | undefined,
    open: (emit: (line: HubLine<P>) => void, end: (reason: string) => void) => Promise<U>, history: (upstream: U) => Promise<History<P>>,
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
      line: (l) => {
        if (filter && !l.text.includes(filter)) return;
        if (fresh && !fresh(l.at)) return;
        follower.push(l.wire, l.at);
      },
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
      const past = await this.historyTurn(() => (conn.signal.aborted ? Promise.resolve({ lines: [], fresh: () => true }) : history(upstream)));
      for (const wire of past.lines) {
        if (conn.signal.aborted || follower.isDropped) break;
        await follower.history(wire);
      }
      fresh = past.fresh;
      follower.release(past.fresh);
      if (endedWith !== null) await end(endedWith);
      await done;
    } finally {
      conn.signal.removeEventListener('abort', leave);
      sub.leave();
    }
  }

  /** One engine stream per container, started with the last line only: history is each follower's own read. */
  private openContainers(containers: ContainerSummary[], emit: (line: HubLine<ContainerPosition>) => void, end: (reason: string) => void): Promise<Upstream> {
    const controller = new AbortController();
    const upstream: Upstream = { close: () => controller.abort() };
    return new Promise((resolve) => {
      let attached = 0;
      let running = containers.length;
      const attach = () => {
        if (++attached === containers.length) resolve(upstream);
      };
      for (const c of containers) {
        void (async () => {
          let counted = false;
          try {
            const lines = this.docker.containerLogs(c.id, {
              follow: true, tail: 1, timestamps: true, signal: controller.signal,
              attached: () => {
                counted = true;
                attach();
              },
            });
            for await (const line of lines) {
              const out: DeploymentLogLine = { service: c.service, container: c.name, stream: line.stream, time: line.time, text: line.text };
              emit({ wire: wireOf(out), text: line.text, at: { container: c.id, time: timeKey(line.time) } });
            }
          } catch (err) {
            if (!controller.signal.aborted) this.log.warn('log follow ended with an error', { container: c.name, error: String((err as Error)?.message ?? err) });
          } finally {
            // A container whose stream could not be opened sends nothing more: it does not hold the others back.
            if (!counted) attach();
            if (--running === 0 && !controller.signal.aborted) end('the containers stopped');
          }
        })();
      }
    });
  }

  private async openFile(path: string, open: Opener, emit: (line: HubLine<FilePosition>) => void): Promise<FileUpstream> {
    const controller = new AbortController();
    const fh = await open();
    let from: number;
    try {
      from = (await fh.stat()).size;
    } finally {
      await fh.close();
    }
    let generation = 0;
    void followFile(path, open, (text, at) => {
      generation = at.generation;
      emit({ wire: wireOf({ service: null, container: null, stream: 'file', time: null, text }), text, at });
    }, controller.signal, undefined, from).catch((err: Error) => this.log.warn('log file follow ended with an error', { path, error: err.message }));
    return { close: () => controller.abort(), generation: () => generation };
  }

  /** The last `tail` lines (capped) of the containers, merged by time, and the position each container was read up to. */
  private async containerHistory(containers: ContainerSummary[], tail: number, filter: string | undefined, signal: AbortSignal): Promise<History<ContainerPosition>> {
    const wanted = tail === 0 ? WS_HISTORY_MAX_LINES : Math.min(tail, WS_HISTORY_MAX_LINES);
    const readUpTo = new Map<string, string>();
    const perContainer = await Promise.all(containers.map(async (c) => {
      const out: DeploymentLogLine[] = [];
      try {
        for await (const line of this.docker.containerLogs(c.id, { tail: filter ? Math.min(wanted * 20, FILTER_SCAN_LINES) : wanted, timestamps: true, signal })) {
          if (line.time) readUpTo.set(c.id, timeKey(line.time));
          if (filter && !line.text.includes(filter)) continue;
          out.push({ service: c.service, container: c.name, stream: line.stream, time: line.time, text: line.text });
          if (out.length > wanted * 2) out.splice(0, out.length - wanted);
        }
      } catch (err) {
        if (!signal.aborted) this.log.warn('log history could not be read', { container: c.name, error: String((err as Error)?.message ?? err) });
      }
      return out;
    }));
    const lines = perContainer.flat();
    if (containers.length > 1) lines.sort((a, b) => (timeKey(a.time) < timeKey(b.time) ? -1 : timeKey(a.time) > timeKey(b.time) ? 1 : 0));
    return {
      lines: bounded(lines, wanted).map(wireOf),
      // A line without a timestamp cannot be placed: it is sent.
      fresh: (at) => !at.time || at.time > (readUpTo.get(at.container) ?? ''),
    };
  }
}
