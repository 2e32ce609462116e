/**
 * A small Docker Engine API client over the unix socket, for the collector only (list, one-shot stats, events).
 * Keep-alive sockets: the collector makes a few requests per second and should not pay a connect for each.
 */
import { Agent, request } from 'node:http';

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
  networks?: Record<string, { rx_bytes: number; tx_bytes: number }>;
}

export interface EngineEvent {
  Type: string;
  Action: string;
  Actor: { ID: string; Attributes: Record<string, string> };
  time: number;
}

export class EngineError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

/** Waits between two attempts to follow the engine's events: doubling from the first to the last. */
export const EVENTS_RETRY_MS = { first: 2000, max: 60_000 } as const;

export class DockerClient {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 16 });
  /** null until the first answer or failure. */
  private reachable: boolean | null = null;
  private readonly reachabilityListeners: ((reachable: boolean, error: string | null) => void)[] = [];

  /** `eventsRetryMs`: the waits between reconnections of the event stream (shorter in tests). */
  constructor(
    readonly socketPath: string,
    private readonly eventsRetryMs: { first: number; max: number } = EVENTS_RETRY_MS,
  ) {}

  /**
   * Called when the engine starts or stops answering (not at every failed attempt): the app says so once,
   * rather than once per collection round and per reconnection of the event stream.
   */
  onReachability(listener: (reachable: boolean, error: string | null) => void): void {
    this.reachabilityListeners.push(listener);
  }

  private noteReachable(reachable: boolean, error: string | null = null): void {
    if (this.reachable === reachable) return;
    this.reachable = reachable;
    for (const l of this.reachabilityListeners) l(reachable, error);
  }

  private call<T>(method: string, path: string, timeoutMs = 15_000): Promise<T> {
    return new Promise((resolve, reject) => {
      const req = request({ socketPath: this.socketPath, path, method, agent: this.agent, timeout: timeoutMs, headers: { host: 'docker' } }, (res) => {
        this.noteReachable(true);
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 500) >= 300) {
            let message = text;
            try {
              message = (JSON.parse(text) as { message?: string }).message ?? text;
            } catch {
              /* plain text */
            }
            return reject(new EngineError(`${method} ${path}: ${res.statusCode} ${message.trim()}`, res.statusCode ?? null));
          }
          try {
            resolve((text ? JSON.parse(text) : null) as T);
          } catch (err) {
            reject(err);
          }
        });
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new EngineError(`${method} ${path}: timed out`, null)));
      req.on('error', (err) => {
        const failure = err instanceof EngineError ? err : new EngineError(`${method} ${path}: ${err.message}`, null);
        if (!(err instanceof EngineError)) this.noteReachable(false, err.message);
        reject(failure);
      });
      req.end();
    });
  }

  /** Running containers (one call for all of them). */
  listRunning(): Promise<EngineContainer[]> {
    return this.call('GET', '/containers/json');
  }

  /** One sample without the engine's 1-second wait for a second sample (API >= 1.41). */
  stats(id: string): Promise<EngineStats> {
    return this.call('GET', `/containers/${encodeURIComponent(id)}/stats?stream=false&one-shot=true`);
  }

  /**
   * Follows container events (start, die, health_status, …) until `signal` aborts. After a failure it connects
   * again, waiting longer each time (`eventsRetryMs`) until a connection is answered; failures are reported
   * through `onReachability`, not one by one.
   */
  followEvents(onEvent: (e: EngineEvent) => void, signal: AbortSignal): void {
    const filters = encodeURIComponent(JSON.stringify({ type: ['container'] }));
    let current: ReturnType<typeof request> | null = null;
    let retryTimer: NodeJS.Timeout | null = null;
    let delay = this.eventsRetryMs.first;
    // One abort listener for the whole follow (one per connection attempt would pile up while the engine is away).
    signal.addEventListener(
      'abort',
      () => {
        if (retryTimer) clearTimeout(retryTimer);
        current?.destroy();
      },
      { once: true },
    );
    const connect = () => {
      retryTimer = null;
      if (signal.aborted) return;
      let retried = false;
      const retry = (err?: Error) => {
        if (retried) return;
        retried = true;
        current = null;
        if (err) this.noteReachable(false, err.message);
        if (signal.aborted) return;
        retryTimer = setTimeout(connect, delay);
        retryTimer.unref();
        delay = Math.min(delay * 2, this.eventsRetryMs.max);
      };
      const req = request({ socketPath: this.socketPath, path: `/events?filters=${filters}`, method: 'GET', headers: { host: 'docker' } }, (res) => {
        this.noteReachable(true);
        delay = this.eventsRetryMs.first;
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let nl: number;
          while ((nl = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, nl).trim();
            buffer = buffer.slice(nl + 1);
            if (!line) continue;
            try {
              onEvent(JSON.parse(line) as EngineEvent);
            } catch {
              /* ignore a malformed line */
            }
          }
        });
        res.on('end', () => retry());
        res.on('error', retry);
      });
      current = req;
      req.on('error', retry);
      req.end();
    };
    connect();
  }

  close(): void {
    this.agent.destroy();
  }
}

/** `Up 3 minutes (healthy)` → healthy; no parenthesised health → none. */
export function healthFromStatus(status: string): 'healthy' | 'unhealthy' | 'starting' | 'none' {
  if (status.includes('(unhealthy)')) return 'unhealthy';
  if (status.includes('(healthy)')) return 'healthy';
  if (status.includes('(health: starting)')) return 'starting';
  return 'none';
}
