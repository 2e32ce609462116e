/**
 * The `docker` service: the Docker engine as plugins see it (provided by the docker plugin).
 * Plugins never talk to the engine themselves. Every method throws HttpError 503 `DOCKER_UNAVAILABLE` when the
 * engine does not answer, and 404 `NOT_FOUND` for an unknown container.
 */
import type { Readable, Writable } from 'node:stream';
import { createServiceRef } from '@agent/sdk';

/** The answers its calls give (for the `errors` of routes that call the service). */
export { COMPOSE_ERRORS, ENGINE_ERRORS } from './engine-errors.js';

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

/** An image as the engine holds it. */
export interface ImageInfo {
  /** `sha256:…`: what a container created from it keeps running, whatever its tags point at later. */
  id: string;
  /** `repo:tag` names pointing at it now. */
  tags: string[];
  /** `repo@sha256:…`: its digests in the registries it was pulled from or pushed to (none for a local build). */
  digests: string[];
}

/** How far a pull is, from what the engine reports per layer. */
export interface PullProgress {
  percent: number;
  current_bytes: number;
  total_bytes: number;
  layers_done: number;
  layers_total: number;
}

/** A container of a compose project and the image it runs. */
export interface ContainerImage {
  container_id: string;
  name: string;
  service: string | null;
  state: string;
  /** The image as the container was configured (`nginx:1.27`, `sha256:…`). */
  image: string;
  /** The image the container runs (`sha256:…`). */
  image_id: string;
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
  /**
   * Log lines, oldest first; with `follow` the iterable ends when the container stops or `signal` aborts.
   * `attached` is called once the engine answered (with `follow`: every line written from then on will come).
   */
  containerLogs(
    id: string,
    options?: { tail?: number; since?: number; follow?: boolean; timestamps?: boolean; signal?: AbortSignal; attached?: () => void },
  ): AsyncIterable<LogLine>;
  /** One-shot resource usage. */
  stats(id: string): Promise<ContainerStats>;

  /** Runs argv inside a running container and collects its output (bounded to 1 MiB each). */
  exec(id: string, argv: string[], options?: { env?: string[]; user?: string; workdir?: string; timeoutMs?: number }): Promise<ExecResult>;
  /** Runs argv inside a running container with streamed stdout (for dumps that must not be buffered whole). */
  execStream(
    id: string,
    argv: string[],
    options?: { env?: string[]; user?: string; workdir?: string; stdin?: boolean; signal?: AbortSignal },
  ): Promise<ExecStream>;

  images: {
    /** An image by reference (`nginx:1.27`, `repo@sha256:…`) or id; null when the engine does not have it. */
    inspect(ref: string): Promise<ImageInfo | null>;
    /**
     * Pulls an image (`:latest` when no tag), with the stored credentials of its registry when there are some.
     * Resolves once the engine has it; rejects with 502 PULL_FAILED and the registry's message, or with
     * `signal`'s reason when it aborts (the connection is closed: the engine stops the pull). `onStart` tells the
     * reference pulled and whether credentials go with it, before anything is downloaded.
     */
    pull(
      ref: string,
      options?: {
        signal?: AbortSignal;
        onStart?: (pull: { image: string; authenticated: boolean }) => void;
        onProgress?: (progress: PullProgress) => void;
        onLine?: (line: string) => void;
      },
    ): Promise<{ image: string; authenticated: boolean }>;
    /** The containers of a compose project (every state) and the images they run. */
    ofProject(project: string): Promise<ContainerImage[]>;
  };

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

  swarm: SwarmService;

  compose: {
    /** `v2` (`docker compose`) or `v1` (`docker-compose`); waits for the detection. 503 COMPOSE_UNAVAILABLE without compose. */
    flavour(): Promise<ComposeFlavour>;
    /**
     * Checks a project: compose builds its canonical model from the text (with a fixed environment and private
     * copies of the env files it names), and the host-safety policy checks that model. Throws 400
     * INVALID_YAML / INVALID_COMPOSE / HOST_SAFETY. Unchanged input is not checked again (kept by content hash).
     */
    check(source: ComposeSource): Promise<CheckedCompose>;
    /** Runs exactly a checked model (never the project's files); host paths are re-checked before anything starts. */
    run(checked: CheckedCompose, command: ComposeCommand, options?: { signal?: AbortSignal; onLine?: (line: string) => void }): Promise<ComposeRunResult>;
    /** The model a project last ran with (kept across restarts of the agent), or null. */
    lastChecked(project: string): Promise<CheckedCompose | null>;
    /**
     * Declares the model a project's owner holds as current (its files changed without a run, e.g. an update of a
     * stopped deployment), or null when its files no longer pass the check. A container that is not of the current
     * model is never started as it is (409 CONTAINER_STALE from the container routes).
     */
    declareCurrent(project: string, checked: CheckedCompose | null): Promise<void>;
    /**
     * Removes a project through the engine (containers, its networks, and its volumes with `volumes`), for a
     * project whose file can no longer be checked.
     */
    removeProject(project: string, options?: { volumes?: boolean }): Promise<void>;
    /** Forgets the kept models of a project (after it was removed). */
    forget(project: string): Promise<void>;
    /** What the engine holds of a project (by compose's project label): a name in use is never taken over. */
    projectObjects(project: string): Promise<{ containers: number; networks: number; volumes: number }>;
    /** Every compose project the engine holds anything of (containers, networks, volumes), by its label. */
    projects(): Promise<string[]>;
  };
}

export type ComposeFlavour = 'v1' | 'v2';

/** Whether this engine is in a swarm and may manage it. */
export interface SwarmInfo {
  /** The engine's own word: inactive, pending, active, error, locked. */
  state: string;
  /** Active and a manager: the cluster endpoints and swarm deployments work. */
  manager: boolean;
  node_id: string | null;
  cluster_id: string | null;
  /** Known to managers only. */
  nodes: number | null;
  managers: number | null;
  error: string | null;
}

export interface SwarmNode {
  id: string;
  hostname: string;
  role: 'manager' | 'worker';
  availability: 'active' | 'pause' | 'drain';
  labels: Record<string, string>;
  /** ready, down, unknown, disconnected. */
  state: string;
  address: string | null;
  leader: boolean;
  /** Managers only: reachable, unreachable, unknown. */
  reachability: string | null;
  engine_version: string | null;
  resources: { nano_cpus: number; memory_bytes: number };
}

export interface SwarmNodeChange {
  labels?: Record<string, string>;
  availability?: 'active' | 'pause' | 'drain';
}

/** A service of a stack as the deployments' services are shown: replicas running/desired and its newest tasks. */
export interface StackService {
  /** Without the stack prefix (the compose service name). */
  name: string;
  service_id: string;
  image: string;
  mode: 'replicated' | 'global';
  replicas: { running: number; desired: number };
  /** The engine's rolling update: updating, paused, completed, rollback_started, rollback_completed, …; null: none. */
  update: { state: string; message: string | null; started_at?: string | null } | null;
  tasks: {
    id: string;
    slot: number | null;
    node_id: string | null;
    state: string;
    desired_state: string;
    error: string | null;
    message: string | null;
    updated_at: string | null;
  }[];
}

/** Where a swarm service is reached (see `SwarmService.serviceEndpoint`). */
export interface SwarmServiceEndpoint {
  /** Published ports: `ingress` (the routing mesh: on every node's addresses) or `host` (on the node of each task). */
  ports: { target: number; published: number; protocol: string; mode: 'ingress' | 'host' }[];
  /** Its tasks running on this node, with their IPv4 address on the engine's gateway bridge (a bridge of this host). */
  local_tasks: { task_id: string; container_id: string; address: string }[];
}

/** Docker Swarm of this engine (the calls that need a manager answer 409 NOT_SWARM_MANAGER on any other). */
export interface SwarmService {
  info(): Promise<SwarmInfo>;
  /** 409 NOT_SWARM_MANAGER unless this engine manages a swarm. */
  requireManager(): Promise<SwarmInfo>;
  /** A single-node swarm; 409 SWARM_EXISTS when the engine is part of one already. */
  init(options?: { advertise_addr?: string }): Promise<SwarmInfo>;
  /** Secrets: never logged, planned or audited. */
  joinTokens(): Promise<{ worker: string; manager: string }>;
  nodes(): Promise<SwarmNode[]>;
  node(id: string): Promise<SwarmNode>;
  updateNode(id: string, change: SwarmNodeChange): Promise<SwarmNode>;
  /**
   * Deploys a checked model (checked with `runtime: 'swarm'`) as a stack named after its project
   * (`docker stack deploy`), after the same re-checks as a compose start.
   */
  deployStack(checked: CheckedCompose, options?: { signal?: AbortSignal; onLine?: (line: string) => void }): Promise<ComposeRunResult>;
  stackServices(stack: string): Promise<StackService[]>;
  /** Its published ports and its tasks running on this node, by their address on the gateway bridge; null: no such service. */
  serviceEndpoint(stack: string, service: string): Promise<SwarmServiceEndpoint | null>;
  scale(stack: string, service: string, replicas: number): Promise<void>;
  /** Replaces every task of the stack's services, or of those named (a forced update, as their update_config says). */
  restart(stack: string, services?: string[]): Promise<void>;
  removeStack(stack: string, options?: { waitMs?: number }): Promise<void>;
  /** Removes the stack's secrets from its `.env` that the model no longer names (rotated away); answers their names. */
  pruneSecrets(checked: CheckedCompose): Promise<string[]>;
  stacks(): Promise<string[]>;
}

/** What a compose project is made of; the caller reads the files (never through a symlink). */
export interface ComposeSource {
  /** Compose project name (`[a-z0-9][a-z0-9_-]*`). */
  project: string;
  /** The project folder: relative paths resolve against it; host paths must stay inside it. */
  dir: string;
  /** The compose file's text. */
  content: string;
  /** Interpolation variables (the project's `.env`). Nothing else is interpolated. */
  env?: Record<string, string>;
  /**
   * Files of the folder as they are about to be written (relative path → text), read instead of the disk when the
   * compose file names them (e.g. `env_file: .env` of a deployment being created).
   */
  files?: Record<string, string>;
  /** Exceptions an admin granted this project, e.g. `cap_add:NET_ADMIN`, `volumes:/var/run/docker.sock`. */
  exceptions?: string[];
  /** false: the host-safety policy is off (an admin's choice); the model is still compose's own and runs as checked. */
  enforce?: boolean;
  /** `swarm`: checked for `docker stack deploy` too (Swarm's own dangerous keys, safe update defaults). Default compose. */
  runtime?: 'compose' | 'swarm';
}

export interface HostSafetyViolation {
  service: string | null;
  key: string;
  value: string;
  /** The exception an admin could grant to let exactly this through. */
  exception: string;
  why: string;
}

export interface CheckedCompose {
  readonly project: string;
  readonly dir: string;
  /** Content hash of everything the model was built from. */
  readonly hash: string;
  readonly flavour: ComposeFlavour;
  /** Compose's canonical model, values as the containers get them. */
  readonly model: Readonly<Record<string, any>>;
  readonly services: readonly string[];
  /** Exceptions the model needed (all of them granted). */
  readonly granted: readonly string[];
  /** With the policy off: what it would have refused. */
  readonly violations: readonly HostSafetyViolation[];
  /** What it was checked for (absent: compose). */
  readonly runtime?: 'compose' | 'swarm';
}

export type ComposeCommand =
  | { command: 'up'; services?: string[]; forceRecreate?: boolean; removeOrphans?: boolean; noDeps?: boolean }
  | { command: 'stop'; services?: string[] }
  | { command: 'restart'; services?: string[] }
  | { command: 'down'; volumes?: boolean; removeOrphans?: boolean }
  | { command: 'build'; services?: string[] }
  /**
   * One more container of a service beside the ones running (`up --no-deps --no-recreate --scale`), created from
   * the checked model; the others keep running as they are, for a start-first redeploy (its caller removes them).
   * Refused (409 CONTAINER_STALE) while a container of the service created from another model is not running:
   * compose would start it as it is.
   */
  | { command: 'start-beside'; service: string };

export const dockerService = createServiceRef<DockerService>('docker', 'the Docker engine and compose');

declare module '@agent/sdk' {
  interface AgentEvents {
    'container.state': { id: string; name: string; deployment: string | null; service: string | null; action: string };
  }
}
