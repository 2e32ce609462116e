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
  constructor(message: string, readonly status: number | null) {
    super(message);
  }
}

export class DockerClient {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 16 });

  constructor(private readonly socketPath: string) {}

  private call<T>(method: string, path: string, timeoutMs = 15_000): Promise<T> {
    return new Promise((resolve, reject) => {
      const req = request({ socketPath: this.socketPath, path, method, agent: this.agent, timeout: timeoutMs, headers: { host: 'docker' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 500) >= 300) {
            let message = text;
            try {
              message = (JSON.parse(text) as { message?: string }).message ?? text;
            } catch { /* plain text */ }
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
      req.on('error', (err) => reject(err instanceof EngineError ? err : new EngineError(`${method} ${path}: ${err.message}`, null)));
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
   * Follows container events (start, die, health_status, …) until `signal` aborts; reconnects after a failure.
   */
  followEvents(onEvent: (e: EngineEvent) => void, signal: AbortSignal, onError: (err: Error) => void): void {
    const filters = encodeURIComponent(JSON.stringify({ type: ['container'] }));
    const connect = () => {
      if (signal.aborted) return;
      const req = request({ socketPath: this.socketPath, path: `/events?filters=${filters}`, method: 'GET', headers: { host: 'docker' } }, (res) => {
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
            } catch { /* ignore a malformed line */ }
          }
        });
        res.on('end', retry);
        res.on('error', retry);
      });
      let retried = false;
      function retry(err?: Error) {
        if (retried) return;
        retried = true;
        if (err) onError(err);
        if (!signal.aborted) setTimeout(connect, 2000).unref();
      }
      req.on('error', retry);
      signal.addEventListener('abort', () => req.destroy(), { once: true });
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
