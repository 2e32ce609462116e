/**
 * The `docker` service: the Docker engine as plugins see it (provided by the docker plugin).
 * Plugins never talk to the engine themselves. Every method throws HttpError 503 `DOCKER_UNAVAILABLE` when the
 * engine does not answer, and 404 `NOT_FOUND` for an unknown container.
 */
import type { Readable, Writable } from 'node:stream';
import { createServiceRef } from '../services.js';

export type ContainerHealth = 'healthy' | 'unhealthy' | 'starting' | 'none';

export interface ContainerPort {
  private: number;
  public: number | null;
  ip: string | null;
  protocol: string;
}

export interface ContainerSummary {
  id: string;
  /** Without the leading slash. */
  name: string;
  image: string;
  /** Engine state: created, running, paused, restarting, removing, exited, dead. */
  state: string;
  /** Human status, e.g. "Up 3 minutes (healthy)". */
  status: string;
  health: ContainerHealth;
  created_at: string;
  labels: Record<string, string>;
  /** Compose project (= deployment name) and service, from the compose labels; null when not from compose. */
  deployment: string | null;
  service: string | null;
  ports: ContainerPort[];
  /** Network name → IPv4 address on that network. */
  networks: Record<string, string>;
}

export interface ContainerDetails extends ContainerSummary {
  env: string[];
  cmd: string[];
  started_at: string | null;
  finished_at: string | null;
  exit_code: number | null;
  restart_count: number;
  mounts: { type: string; source: string; destination: string; rw: boolean }[];
  has_healthcheck: boolean;
}

export interface ContainerStats {
  id: string;
  name: string;
  deployment: string | null;
  service: string | null;
  cpu_percent: number;
  memory_usage: number;
  memory_limit: number;
  memory_percent: number;
  network_rx: number;
  network_tx: number;
  block_read: number;
  block_write: number;
  pids: number;
  read_at: string;
}

export interface LogLine {
  stream: 'stdout' | 'stderr';
  /** RFC 3339 when timestamps were requested. */
  time: string | null;
  text: string;
}

export interface ExecResult {
  exit_code: number;
  stdout: string;
  stderr: string;
}

export interface ExecStream {
  stdout: Readable;
  /** stderr, collected (bounded to 64 KiB). */
  stderr(): string;
  /** Present when `stdin: true` was asked; end it to close the process's stdin. */
  stdin: Writable | null;
  /** Resolves with the exit code once the process ended and stdout was consumed. */
  wait(): Promise<number>;
}

export interface DockerEvent {
  type: 'container' | 'image' | 'network' | 'volume';
  /** start, stop, die, health_status: healthy, destroy, create, … */
  action: string;
  id: string;
  name: string | null;
  deployment: string | null;
  service: string | null;
  time: number;
  attributes: Record<string, string>;
}

export interface ComposeRunResult {
  exit_code: number;
  /** Combined output (bounded). */
  output: string;
}

export interface DockerService {
  /** Whether the engine answered the last check (kept current in the background). */
  available(): boolean;
  /** Throws 503 DOCKER_UNAVAILABLE when the engine does not answer. */
  assertAvailable(): void;
  info(): Promise<{ version: string; api_version: string; containers: number; images: number }>;

  listContainers(filter?: { all?: boolean; deployment?: string; labels?: Record<string, string> }): Promise<ContainerSummary[]>;
  inspectContainer(idOrName: string): Promise<ContainerDetails>;
  startContainer(id: string): Promise<void>;
  stopContainer(id: string, options?: { timeout?: number }): Promise<void>;
  restartContainer(id: string, options?: { timeout?: number }): Promise<void>;
  removeContainer(id: string, options?: { force?: boolean; volumes?: boolean }): Promise<void>;
  /** Log lines, oldest first; with `follow` the iterable ends when the container stops or `signal` aborts. */
  containerLogs(id: string, options?: { tail?: number; since?: number; follow?: boolean; timestamps?: boolean; signal?: AbortSignal }): AsyncIterable<LogLine>;
  /** One-shot resource usage. */
  stats(id: string): Promise<ContainerStats>;

  /** Runs argv inside a running container and collects its output (bounded to 1 MiB each). */
  exec(id: string, argv: string[], options?: { env?: string[]; user?: string; workdir?: string; timeoutMs?: number }): Promise<ExecResult>;
  /** Runs argv inside a running container with streamed stdout (for dumps that must not be buffered whole). */
  execStream(id: string, argv: string[], options?: { env?: string[]; user?: string; workdir?: string; stdin?: boolean; signal?: AbortSignal }): Promise<ExecStream>;

  /** Subscribes to engine events (one shared stream, reconnected after engine restarts). */
  onEvent(listener: (event: DockerEvent) => void): () => void;

  networks: {
    /** Networks, optionally only those of one deployment (compose project label). */
    list(filter?: { deployment?: string }): Promise<{ id: string; name: string; deployment: string | null; internal: boolean }[]>;
    /** Creates the network if missing (bridge driver). */
    ensure(name: string, options?: { internal?: boolean; labels?: Record<string, string> }): Promise<void>;
    connect(network: string, container: string, options?: { aliases?: string[] }): Promise<void>;
    disconnect(network: string, container: string): Promise<void>;
  };

  compose: {
    /**
     * The detected compose command: `['docker', 'compose']` or `['docker-compose']` (detection runs in the
     * background at start; this waits for it). Rejects with 503 COMPOSE_UNAVAILABLE when neither is installed.
     */
    command(): Promise<string[]>;
    /** Runs a compose subcommand (argv) for a project: cwd = `dir`, project name = `project`. */
    run(project: string, dir: string, args: string[], options?: { signal?: AbortSignal; onLine?: (line: string) => void; env?: Record<string, string> }): Promise<ComposeRunResult>;
  };
}

export const dockerService = createServiceRef<DockerService>('docker', 'the Docker engine and compose');
