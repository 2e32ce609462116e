/**
 * The app's view of the Docker engine, through dockerode (the project's one Docker client): the running containers,
 * one-shot stats and container events, for the collector and the health watcher only.
 *
 * The engine's answers are checked, never trusted: it answers an empty body to a stats call when the container stops
 * while the call waits for its next sample, zeroed stats for a container that is not running, 404 for one removed
 * meanwhile, and nothing at all while it restarts. None of these is an error of the app: a container that went away
 * is `gone`, an engine that does not answer is reported once through `onState` and the caller skips a round.
 */
import { createRequire, Module } from 'node:module';
import { dirname } from 'node:path';
import type DockerType from 'dockerode';

const require = createRequire(import.meta.url);

/**
 * docker-modem requires `ssh2` when it loads, for `ssh://` engine hosts, and loading ssh2 starts its WebAssembly
 * Poly1305 (≈6 MB more resident memory in this process, measured). The app only talks to a unix socket: ssh2 is
 * put in the module cache as a stub before dockerode loads (the agent's bundle does the same with a lazy shim,
 * scripts/shims/ssh2-lazy.cjs; the app is not bundled). Node documents adding entries to `require.cache`.
 */
function withoutSsh2(): void {
  try {
    const modem = dirname(require.resolve('docker-modem', { paths: [dirname(require.resolve('dockerode'))] }));
    const path = require.resolve('ssh2', { paths: [modem] });
    if (require.cache[path]) return;
    const stub = new Module(path);
    stub.filename = path;
    stub.loaded = true;
    stub.exports = {
      Client: class {
        constructor() {
          throw new Error('ssh:// Docker hosts are not supported by the observability app (docker_socket is a unix socket)');
        }
      },
    };
    require.cache[path] = stub;
  } catch {
    // Another layout of node_modules: dockerode loads the real ssh2, which works, only with more memory.
  }
}
withoutSsh2();
const Docker = require('dockerode') as typeof DockerType;

export interface EngineContainer {
  Id: string;
  Names: string[];
  State: string;
  Status: string;
  Labels: Record<string, string> | null;
}

export interface EngineStats {
  read: string;
  cpu_stats?: { cpu_usage?: { total_usage?: number }; online_cpus?: number };
  memory_stats?: { usage?: number; limit?: number; stats?: Record<string, number> };
  networks?: Record<string, { rx_bytes?: number; tx_bytes?: number }>;
}

/** A stats answer: a sample, or the container is no longer running (removed, exited, restarting). */
export type StatsAnswer = { gone: false; stats: EngineStats } | { gone: true; why: string };

export interface EngineEvent {
  Type: string;
  Action: string;
  Actor: { ID: string; Attributes: Record<string, string> };
  time: number;
}

/**
 * - `answering`: the engine answers as expected;
 * - `away`: nothing answers (no socket, refused, hung up, timed out): the engine is missing or restarting;
 * - `failing`: the engine answers, but not with a container list (an empty or malformed body, an error status).
 */
export type EngineState = 'answering' | 'away' | 'failing';

export class EngineError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    /** What the failure says of the engine (`failing` for a stats call says nothing of it: see `stats`). */
    readonly state: Exclude<EngineState, 'answering'>,
  ) {
    super(message);
  }
}

/** Waits between two attempts to follow the engine's events: doubling from the first to the last. */
export const EVENTS_RETRY_MS = { first: 2000, max: 60_000 } as const;
/** A list or stats call that takes longer is given up (the round goes on without it). */
export const CALL_TIMEOUT_MS = 15_000;

/** The status code dockerode attaches to an answer it rejects (null: no HTTP answer at all). */
const statusOf = (err: unknown): number | null => {
  const s = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof s === 'number' ? s : null;
};
/** The engine's own message for an error answer, without dockerode's `(HTTP code …)` preamble. */
const messageOf = (err: unknown): string => {
  const e = err as { json?: { message?: unknown } | null; message?: unknown } | null;
  const own = e?.json && typeof e.json === 'object' ? e.json.message : undefined;
  return String(typeof own === 'string' ? own : (e?.message ?? err)).trim();
};
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Buffer.isBuffer(v) && !Array.isArray(v);

/** An entry of the container list with the fields the collector reads, or null (dropped: a partial answer). */
function engineContainer(v: unknown): EngineContainer | null {
  if (!isObject(v) || typeof v.Id !== 'string' || !v.Id) return null;
  const labels = isObject(v.Labels) ? (v.Labels as Record<string, string>) : null;
  return {
    Id: v.Id,
    Names: Array.isArray(v.Names) ? v.Names.filter((n): n is string => typeof n === 'string') : [],
    State: typeof v.State === 'string' ? v.State : '',
    Status: typeof v.Status === 'string' ? v.Status : '',
    Labels: labels,
  };
}

export class DockerClient {
  private readonly docker: DockerType;
  /** null until the first answer or failure. */
  private state: EngineState | null = null;
  private readonly stateListeners: ((state: EngineState, error: string | null) => void)[] = [];

  /** `eventsRetryMs`: the waits between reconnections of the event stream; `timeoutMs`: of list and stats calls. */
  constructor(
    readonly socketPath: string,
    private readonly eventsRetryMs: { first: number; max: number } = EVENTS_RETRY_MS,
    private readonly timeoutMs = CALL_TIMEOUT_MS,
  ) {
    // Neither `agent` nor `timeout` for docker-modem. It logs every request through `util.inspect(options,
    // {showHidden: true, depth: null})`, evaluated even when its debug output is off: an agent of our own in the
    // options is walked whole, sockets and all, each time (measured: 4 ms of CPU per call instead of 0.8, and the
    // app 11 MB larger with 20 containers). Node's global agent keeps sockets alive already. And its `timeout` adds a socket 'timeout' listener per request on
    // reused sockets; `call` times each request out itself.
    this.docker = new Docker({ socketPath });
  }

  /**
   * Called when the engine's state changes (not at every failed attempt): the app says so once, rather than once
   * per collection round and per reconnection of the event stream.
   */
  onState(listener: (state: EngineState, error: string | null) => void): void {
    this.stateListeners.push(listener);
  }

  private noteState(state: EngineState, error: string | null = null): void {
    if (this.state === state) return;
    this.state = state;
    for (const l of this.stateListeners) l(state, error);
  }

  /**
   * Runs one dockerode call with a deadline. The deadline both aborts the request and settles the promise by
   * itself: a response cut off mid-body (the engine stopping) ends neither with 'end' nor with an error that
   * dockerode sees, and its promise would never settle, leaving the collector's round waiting forever.
   */
  private call<T>(what: string, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const abort = new AbortController();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        abort.abort();
        reject(new EngineError(`${what}: no answer within ${this.timeoutMs} ms`, null, 'away'));
      }, this.timeoutMs);
      run(abort.signal).then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          const status = statusOf(err);
          reject(new EngineError(`${what}: ${status === null ? '' : `${status} `}${messageOf(err)}`, status, status === null ? 'away' : 'failing'));
        },
      );
    });
  }

  /** Running containers (one call for all of them). Throws an EngineError when there is no usable list. */
  async listRunning(): Promise<EngineContainer[]> {
    let answer: unknown;
    try {
      answer = await this.call('GET /containers/json', (abortSignal) => this.docker.listContainers({ abortSignal }));
    } catch (err) {
      const e = err as EngineError;
      this.noteState(e.state, e.message);
      throw e;
    }
    // dockerode hands over the raw bytes when the body is not JSON (an empty answer: an empty Buffer).
    if (!Array.isArray(answer)) {
      const e = new EngineError(
        `GET /containers/json: the engine answered ${Buffer.isBuffer(answer) && answer.length === 0 ? 'an empty body' : 'something else than a list'}`,
        200,
        'failing',
      );
      this.noteState(e.state, e.message);
      throw e;
    }
    this.noteState('answering');
    const list: EngineContainer[] = [];
    for (const entry of answer) {
      const c = engineContainer(entry);
      if (c) list.push(c);
    }
    return list;
  }

  /**
   * One sample without the engine's 1-second wait for a second sample (API >= 1.41). `gone` when the container is
   * no longer running: 404 (removed), an empty body (it stopped while the engine waited for its next sample) or
   * the zeroed answer the engine gives for a container that is not running. Other failures throw; a stats call
   * says nothing of the engine as a whole (only the list does), so it does not change the reported state.
   */
  async stats(id: string): Promise<StatsAnswer> {
    let answer: unknown;
    try {
      answer = await this.call(`GET /containers/${id.slice(0, 12)}/stats`, (abortSignal) =>
        this.docker.getContainer(id).stats({ stream: false, 'one-shot': true, abortSignal } as { stream: false; 'one-shot': boolean }),
      );
    } catch (err) {
      if ((err as EngineError).status === 404) return { gone: true, why: 'removed' };
      throw err;
    }
    if (!isObject(answer)) return { gone: true, why: 'empty answer' };
    const read = typeof answer.read === 'string' ? Date.parse(answer.read) : NaN;
    // A container that is not running gets `read: 0001-01-01T00:00:00Z` and zeroes.
    if (!(read > 0)) return { gone: true, why: 'not running' };
    return { gone: false, stats: answer as unknown as EngineStats };
  }

  /**
   * Follows container events (start, die, health_status, …) until `signal` aborts. After a failure it connects
   * again, waiting longer each time (`eventsRetryMs`) until a stream stays open; failures are reported through
   * `onState`, not one by one.
   */
  followEvents(onEvent: (e: EngineEvent) => void, signal: AbortSignal): void {
    let current: AbortController | null = null;
    let retryTimer: NodeJS.Timeout | null = null;
    let delay = this.eventsRetryMs.first;
    // One abort listener for the whole follow (one per connection attempt would pile up while the engine is away);
    // each attempt gets a signal of its own, aborted from here.
    signal.addEventListener(
      'abort',
      () => {
        if (retryTimer) clearTimeout(retryTimer);
        current?.abort();
      },
      { once: true },
    );
    const connect = () => {
      retryTimer = null;
      if (signal.aborted) return;
      const attempt = new AbortController();
      current = attempt;
      const openedAt = Date.now();
      let retried = false;
      const retry = (err?: unknown) => {
        if (retried) return;
        retried = true;
        if (current === attempt) current = null;
        if (signal.aborted) return;
        if (err !== undefined && statusOf(err) === null) this.noteState('away', messageOf(err));
        // A stream that stayed open a while was a working connection: start the waits over. One that ends at once
        // (an engine answering but closing the stream) keeps doubling them.
        if (Date.now() - openedAt > this.eventsRetryMs.max) delay = this.eventsRetryMs.first;
        retryTimer = setTimeout(connect, delay);
        retryTimer.unref();
        delay = Math.min(delay * 2, this.eventsRetryMs.max);
      };
      this.docker.getEvents({ filters: { type: ['container'] }, abortSignal: attempt.signal } as DockerType.GetEventsOptions).then(
        (stream) => {
          const res = stream as NodeJS.ReadableStream & { destroy(): void };
          if (signal.aborted) return res.destroy();
          // Only an outage is over when the stream opens: an engine whose container list is unusable stays so.
          if (this.state === 'away' || this.state === null) this.noteState('answering');
          let buffer = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            buffer += chunk;
            let nl: number;
            while ((nl = buffer.indexOf('\n')) >= 0) {
              const line = buffer.slice(0, nl).trim();
              buffer = buffer.slice(nl + 1);
              if (!line) continue;
              let event: unknown;
              try {
                event = JSON.parse(line);
              } catch {
                continue; // a malformed line
              }
              if (isObject(event) && typeof event.Action === 'string' && isObject(event.Actor)) onEvent(event as unknown as EngineEvent);
            }
          });
          res.on('end', () => retry());
          res.on('close', () => retry());
          res.on('error', (err: unknown) => retry(signal.aborted ? undefined : err));
        },
        (err: unknown) => retry(err),
      );
    };
    connect();
  }
}

/** `Up 3 minutes (healthy)` → healthy; no parenthesised health → none. */
export function healthFromStatus(status: string): 'healthy' | 'unhealthy' | 'starting' | 'none' {
  if (status.includes('(unhealthy)')) return 'unhealthy';
  if (status.includes('(healthy)')) return 'healthy';
  if (status.includes('(health: starting)')) return 'starting';
  return 'none';
}
