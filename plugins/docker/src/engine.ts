/** The `docker` service: one dockerode client, a background availability check and one shared event stream. */
import { PassThrough, type Readable } from 'node:stream';
import Docker from 'dockerode';
import { errors, type EventBus, type Logger } from '@agent/sdk';
import type { CredentialsService } from '@agent/plugin-credentials/api';
import {
  type ContainerDetails,
  type ContainerStats,
  type ContainerSummary,
  type DockerEvent,
  type DockerService,
  type ExecResult,
  type ExecStream,
  type LogLine,
} from './api.js';
import { detailsFromInspect, PROJECT_LABEL, SERVICE_LABEL, statsFrom, summaryFromList } from './mapping.js';
import { LogLineSplitter } from './log-frames.js';
import { isConnectionError, toHttpError, unavailable } from './engine-errors.js';
import { ComposeGuard, type GuardEngine } from './compose/guard.js';
import { pullImage } from './pull-jobs.js';
import type { ExistingContainer } from './compose/policy.js';
import { swarmApi } from './swarm.js';

const EXEC_OUTPUT_LIMIT = 1024 * 1024;
const STDERR_LIMIT = 64 * 1024;

export interface EngineOptions {
  docker: Docker;
  dockerHost: string | null;
  log: Logger;
  events: EventBus;
  checkIntervalMs: number;
  /** Private folder of the compose guard (checked models). */
  composeRoot: string;
  /** Stored registry credentials for pulls (the credentials plugin, when enabled). */
  credentials?: () => CredentialsService | undefined;
}

/** Appends to a bounded buffer, keeping the beginning (truncation is marked). */
function bounded(limit: number) {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  return {
    push(chunk: Buffer) {
      if (size >= limit) {
        truncated = true;
        return;
      }
      const part = chunk.subarray(0, limit - size);
      if (part.length < chunk.length) truncated = true;
      chunks.push(part);
      size += part.length;
    },
    text: () => Buffer.concat(chunks).toString('utf8') + (truncated ? '\n[output truncated]' : ''),
  };
}

/** Compose detection runs at the latest this long after the engine started (the agent may be embedded without ready). */
const DETECT_AFTER_MS = 3000;

/** Longest wait between two checks while the engine does not answer. */
const MAX_CHECK_INTERVAL_MS = 60_000;

/** What answers 503 DOCKER_UNAVAILABLE while the engine is away (the start-up warning names it). */
const ROUTES_NEEDING_ENGINE = [
  '/api/containers',
  '/api/images',
  '/api/volumes',
  '/api/networks',
  'the routes of other plugins that run or inspect containers: deployment actions, logs and stats, backups and restores, infrastructure',
];

export const COMPOSE_FIX =
  "install compose v2 (the docker-compose-plugin package of Docker's repository) or v1 (Debian: apt-get install docker-compose), then restart the agent";

export const ENGINE_FIX =
  'install and start the engine (Debian: apt-get install docker.io && systemctl enable --now docker), or point docker.host at a running one';

export class DockerEngine implements DockerService {
  /** null until the first check. */
  private up: boolean | null = null;
  private lastCheck = 0;
  /** Wait before the next check while the engine does not answer (grows, see `schedule`). */
  private downDelayMs = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private detectedCommand: string[] | null = null;
  private detect: (() => Promise<string[] | null>) | null = null;
  private composeDetection: Promise<void> | null = null;
  private readonly listeners = new Set<(e: DockerEvent) => void>();
  private eventStream: (NodeJS.ReadableStream & { destroy?: () => void }) | null = null;
  private eventsSince = Math.floor(Date.now() / 1000);

  /** Every compose call goes through it. */
  private readonly guard: ComposeGuard;

  constructor(private readonly opts: EngineOptions) {
    this.guard = new ComposeGuard({
      root: opts.composeRoot,
      dockerHost: opts.dockerHost,
      command: () => this.composeCommand(),
      engine: guardEngine(
        opts.docker,
        (what, fn) => this.call(what, fn),
        (id) => this.removeContainer(id, { force: true }),
      ),
      log: opts.log,
    });
  }

  get client(): Docker {
    return this.opts.docker;
  }

  // ---- availability -------------------------------------------------------------------------------------------

  /**
   * Detecting compose runs `docker compose version` / `docker-compose version` (python, ~0.5 s). It does not hold
   * up the agent's start: it runs once the agent is ready (`detectCompose()`), or at the first compose call, or
   * after `DETECT_AFTER_MS` at the latest; compose calls wait for it.
   */
  async start(detect: () => Promise<string[] | null>): Promise<void> {
    this.detect = detect;
    this.downDelayMs = this.opts.checkIntervalMs;
    setTimeout(() => void this.detectCompose(), DETECT_AFTER_MS).unref();
    await this.check();
    this.schedule();
  }

  /**
   * The next availability check: every `checkIntervalMs` while the engine answers; while it does not, the wait
   * doubles up to `MAX_CHECK_INTERVAL_MS` (a missing engine costs a connect attempt now and then, no log line).
   */
  private schedule(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    const wait = this.up ? this.opts.checkIntervalMs : this.downDelayMs;
    if (!this.up) this.downDelayMs = Math.min(this.downDelayMs * 2, Math.max(MAX_CHECK_INTERVAL_MS, this.opts.checkIntervalMs));
    this.timer = setTimeout(() => void this.check().finally(() => this.schedule()), wait);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.closeEvents();
    this.guard.close();
  }

  /** Where the engine is, for people (`unix:///var/run/docker.sock`, `tcp://host:2375`). */
  get endpoint(): string {
    const modem = this.opts.docker.modem as { socketPath?: string; host?: string; port?: number | string; protocol?: string };
    if (modem.socketPath) return `unix://${modem.socketPath}`;
    return `${modem.protocol === 'https' ? 'https' : 'tcp'}://${modem.host}:${modem.port}`;
  }

  /** Pings the engine (2 s budget) and (re)opens the event stream when it comes back. */
  async check(): Promise<boolean> {
    this.lastCheck = Date.now();
    let ok = false;
    let failure = '';
    try {
      await Promise.race([this.opts.docker.ping(), new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 2 s')), 2000).unref())]);
      ok = true;
    } catch (err) {
      failure = (err as Error)?.message ?? String(err);
    }
    // One line per change of state (the first check included), never one per attempt.
    if (ok && this.up !== true) {
      if (this.up === false) this.opts.log.info('Docker engine available again', { endpoint: this.endpoint });
      this.downDelayMs = this.opts.checkIntervalMs;
    } else if (!ok && this.up !== false) {
      this.opts.log.warn(
        `Docker engine not reachable: routes that need it answer 503 DOCKER_UNAVAILABLE until it answers (checked again quietly, every ${this.opts.checkIntervalMs / 1000} s backing off to ${Math.max(MAX_CHECK_INTERVAL_MS, this.opts.checkIntervalMs) / 1000} s)`,
        {
          endpoint: this.endpoint,
          error: failure,
          routes: ROUTES_NEEDING_ENGINE,
          fix: ENGINE_FIX,
        },
      );
    }
    this.up = ok;
    if (ok && !this.eventStream && !this.stopped) void this.openEvents();
    if (!ok) this.closeEvents();
    return ok;
  }

  available(): boolean {
    return this.up === true;
  }

  assertAvailable(): void {
    if (this.up === true) return;
    // A request is a hint that the engine may be back: look now (at most once a second) rather than after the
    // backed-off wait, so the next request finds it.
    if (!this.stopped && Date.now() - this.lastCheck > 1000) void this.check().then((ok) => ok && this.schedule());
    throw unavailable();
  }

  /** Runs an engine call, mapping its errors; a connection failure marks the engine unavailable. */
  async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.assertAvailable();
    try {
      return await fn();
    } catch (err) {
      // The engine went away: a check now notices it (and warns once) instead of at the next scheduled one.
      if (isConnectionError(err)) void this.check().then(() => this.schedule());
      throw toHttpError(err, what);
    }
  }

  async info() {
    return this.call('engine', async () => {
      const [version, info] = await Promise.all([this.opts.docker.version(), this.opts.docker.info()]);
      return { version: version.Version, api_version: version.ApiVersion, containers: info.Containers as number, images: info.Images as number };
    });
  }

  // ---- images -------------------------------------------------------------------------------------------------

  readonly images: DockerService['images'] = {
    inspect: async (ref) => {
      try {
        const info = await this.call(`image '${ref}'`, () => this.opts.docker.getImage(ref).inspect());
        return {
          id: info.Id,
          tags: (info.RepoTags ?? []).filter((t) => t !== '<none>:<none>'),
          digests: (info.RepoDigests ?? []).filter((d) => d !== '<none>@<none>'),
        };
      } catch (err) {
        if ((err as { status?: number }).status === 404) return null;
        throw err;
      }
    },
    pull: (ref, options) => pullImage(this, this.opts.credentials ?? (() => undefined), this.opts.log, ref, options),
    ofProject: async (project) => {
      const list = await this.call('containers', () =>
        this.opts.docker.listContainers({ all: true, filters: JSON.stringify({ label: [`${PROJECT_LABEL}=${project}`] }) }),
      );
      return list.map((c) => ({
        container_id: c.Id,
        name: (c.Names?.[0] ?? c.Id).replace(/^\//, ''),
        service: c.Labels?.[SERVICE_LABEL] ?? null,
        state: c.State,
        image: c.Image,
        image_id: c.ImageID,
      }));
    },
  };

  // ---- containers ---------------------------------------------------------------------------------------------

  async listContainers(filter: { all?: boolean; deployment?: string; labels?: Record<string, string> } = {}): Promise<ContainerSummary[]> {
    const labels: string[] = [];
    if (filter.deployment) labels.push(`${PROJECT_LABEL}=${filter.deployment}`);
    for (const [k, v] of Object.entries(filter.labels ?? {})) labels.push(v === '' ? k : `${k}=${v}`);
    const list = await this.call('containers', () =>
      this.opts.docker.listContainers({ all: filter.all ?? true, ...(labels.length ? { filters: JSON.stringify({ label: labels }) } : {}) }),
    );
    return list.map(summaryFromList);
  }

  async inspectContainer(idOrName: string): Promise<ContainerDetails> {
    return detailsFromInspect(await this.call(`container '${idOrName}'`, () => this.opts.docker.getContainer(idOrName).inspect()));
  }

  /**
   * A container of a compose project starts only as its project's checked model says (the guard's stamp, host paths
   * re-checked): 409 CONTAINER_STALE otherwise. Other containers start as they are.
   */
  private async assertStartable(id: string): Promise<void> {
    const info = await this.call(`container '${id}'`, () => this.opts.docker.getContainer(id).inspect());
    if (!info.Config?.Labels?.[PROJECT_LABEL]) return;
    await this.guard.assertStartable(existingFromInspect(info));
  }

  async startContainer(id: string): Promise<void> {
    await this.assertStartable(id);
    await this.call(`container '${id}'`, () => this.opts.docker.getContainer(id).start().catch(ignoreNotModified));
  }

  async stopContainer(id: string, options: { timeout?: number } = {}): Promise<void> {
    await this.call(`container '${id}'`, () =>
      this.opts.docker
        .getContainer(id)
        .stop({ t: options.timeout ?? 10 })
        .catch(ignoreNotModified),
    );
  }

  async restartContainer(id: string, options: { timeout?: number } = {}): Promise<void> {
    await this.assertStartable(id);
    await this.call(`container '${id}'`, () => this.opts.docker.getContainer(id).restart({ t: options.timeout ?? 10 }));
  }

  async removeContainer(id: string, options: { force?: boolean; volumes?: boolean } = {}): Promise<void> {
    await this.call(`container '${id}'`, () => this.opts.docker.getContainer(id).remove({ force: options.force ?? false, v: options.volumes ?? false }));
  }

  containerLogs(
    id: string,
    options: { tail?: number; since?: number; follow?: boolean; timestamps?: boolean; signal?: AbortSignal; attached?: () => void } = {},
  ): AsyncIterable<LogLine> {
    const self = this;
    return {
      async *[Symbol.asyncIterator]() {
        const container = self.opts.docker.getContainer(id);
        const info = await self.call(`container '${id}'`, () => container.inspect());
        const splitter = new LogLineSplitter(!info.Config.Tty, options.timestamps ?? false);
        const params = {
          stdout: true,
          stderr: true,
          timestamps: options.timestamps ?? false,
          tail: options.tail === undefined || options.tail === 0 ? 'all' : options.tail,
          ...(options.since ? { since: options.since } : {}),
        };
        if (options.signal?.aborted) return;
        // Always a stream (dockerode buffers non-follow logs whole: a 1 GB log must not be held in memory).
        const stream = await self.call(
          `container '${id}'`,
          () =>
            new Promise<Readable>((resolve, reject) => {
              self.opts.docker.modem.dial(
                {
                  path: `/containers/${encodeURIComponent(info.Id)}/logs?`,
                  method: 'GET',
                  isStream: true,
                  statusCodes: { 200: true, 404: 'no such container', 500: 'server error' },
                  options: { ...params, follow: options.follow ?? false },
                } as never,
                (err: unknown, data: unknown) => (err ? reject(err) : resolve(data as Readable)),
              );
            }),
        );
        const onAbort = () => stream.destroy();
        options.signal?.addEventListener('abort', onAbort, { once: true });
        options.attached?.();
        try {
          for await (const chunk of stream) {
            const lines = splitter.push(chunk as Buffer);
            if (lines.length) yield* lines;
          }
          yield* splitter.flush();
        } catch (err) {
          if (!options.signal?.aborted) throw toHttpError(err, `container '${id}'`);
        } finally {
          options.signal?.removeEventListener('abort', onAbort);
          stream.destroy();
        }
      },
    };
  }

  async stats(id: string): Promise<ContainerStats> {
    const container = this.opts.docker.getContainer(id);
    const [info, raw] = await Promise.all([
      this.call(`container '${id}'`, () => container.inspect()),
      this.call(`container '${id}'`, () => container.stats({ stream: false }) as Promise<unknown>),
    ]);
    const labels = info.Config?.Labels ?? {};
    return statsFrom(
      { id: info.Id, name: info.Name.replace(/^\//, ''), deployment: labels[PROJECT_LABEL] ?? null, service: labels[SERVICE_LABEL] ?? null },
      raw as never,
    );
  }

  // ---- exec ---------------------------------------------------------------------------------------------------

  private async startExec(id: string, argv: string[], options: { env?: string[]; user?: string; workdir?: string; stdin?: boolean }) {
    if (!Array.isArray(argv) || argv.length === 0) throw errors.badRequest('exec needs a non-empty argv');
    const container = this.opts.docker.getContainer(id);
    const exec = await this.call(`container '${id}'`, () =>
      container.exec({
        Cmd: argv,
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: options.stdin ?? false,
        ...(options.env ? { Env: options.env } : {}),
        ...(options.user ? { User: options.user } : {}),
        ...(options.workdir ? { WorkingDir: options.workdir } : {}),
      }),
    );
    const stream = (await this.call(`container '${id}'`, () =>
      exec.start({ hijack: true, stdin: options.stdin ?? false }),
    )) as unknown as import('node:stream').Duplex;
    return { exec, stream };
  }

  async exec(id: string, argv: string[], options: { env?: string[]; user?: string; workdir?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
    const { exec, stream } = await this.startExec(id, argv, options);
    const out = bounded(EXEC_OUTPUT_LIMIT);
    const err = bounded(EXEC_OUTPUT_LIMIT);
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    stdout.on('data', (c: Buffer) => out.push(c));
    stderr.on('data', (c: Buffer) => err.push(c));
    this.opts.docker.modem.demuxStream(stream, stdout, stderr);
    await new Promise<void>((resolve, reject) => {
      const timer = options.timeoutMs
        ? setTimeout(() => {
            stream.destroy();
            reject(errors.unavailable(`command did not finish within ${options.timeoutMs} ms`, 'EXEC_TIMEOUT'));
          }, options.timeoutMs)
        : null;
      const done = () => {
        if (timer) clearTimeout(timer);
        resolve();
      };
      stream.once('end', done);
      stream.once('close', done);
      stream.once('error', (e) => {
        if (timer) clearTimeout(timer);
        reject(toHttpError(e, `exec in '${id}'`));
      });
    });
    const inspected = await this.call(`exec in '${id}'`, () => exec.inspect());
    return { exit_code: inspected.ExitCode ?? -1, stdout: out.text(), stderr: err.text() };
  }

  async execStream(
    id: string,
    argv: string[],
    options: { env?: string[]; user?: string; workdir?: string; stdin?: boolean; signal?: AbortSignal } = {},
  ): Promise<ExecStream> {
    const { exec, stream } = await this.startExec(id, argv, options);
    const stdout = new PassThrough({ highWaterMark: 1024 * 1024 });
    const stderrSink = new PassThrough();
    const err = bounded(STDERR_LIMIT);
    stderrSink.on('data', (c: Buffer) => err.push(c));
    // The engine multiplexes both streams on one socket: demux by hand, honouring stdout backpressure.
    let pending: Buffer = Buffer.alloc(0);
    stream.on('data', (chunk: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      while (pending.length >= 8) {
        const size = pending.readUInt32BE(4);
        if (pending.length < 8 + size) break;
        const payload = pending.subarray(8, 8 + size);
        if (pending[0] === 2) stderrSink.write(payload);
        else if (!stdout.write(payload)) {
          stream.pause();
          stdout.once('drain', () => stream.resume());
        }
        pending = pending.subarray(8 + size);
      }
    });
    const ended = new Promise<void>((resolve) => {
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', () => resolve());
    }).then(() => stdout.end());
    const onAbort = () => {
      stream.destroy();
      stdout.destroy();
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const stdin = options.stdin ? stream : null;
    return {
      stdout,
      stderr: () => err.text(),
      stdin: stdin as never,
      wait: async () => {
        await ended;
        await new Promise<void>((resolve) => (stdout.readableEnded || stdout.destroyed ? resolve() : stdout.once('close', () => resolve())));
        options.signal?.removeEventListener('abort', onAbort);
        const inspected = await this.call(`exec in '${id}'`, () => exec.inspect());
        return inspected.ExitCode ?? -1;
      },
    };
  }

  // ---- events -------------------------------------------------------------------------------------------------

  onEvent(listener: (event: DockerEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private closeEvents(): void {
    const s = this.eventStream;
    this.eventStream = null;
    s?.destroy?.();
  }

  private async openEvents(): Promise<void> {
    try {
      const stream = (await this.opts.docker.getEvents({
        since: this.eventsSince,
        filters: { type: ['container', 'image', 'network', 'volume'] },
      } as Docker.GetEventsOptions)) as unknown as NodeJS.ReadableStream & { destroy(): void };
      if (this.stopped) return stream.destroy();
      this.eventStream = stream;
      let partial = '';
      stream.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop()!;
        for (const line of lines) if (line.trim()) this.dispatch(line);
      });
      const ended = () => {
        if (this.eventStream !== stream) return;
        this.eventStream = null;
        // Reopen from where we were when the engine is still there; the periodic check covers restarts.
        if (!this.stopped) setTimeout(() => void this.check(), 500).unref();
      };
      stream.once('end', ended);
      stream.once('error', ended);
      stream.once('close', ended);
    } catch (err) {
      this.opts.log.warn('cannot open the Docker event stream', { error: String(err) });
    }
  }

  private dispatch(line: string): void {
    let raw: { Type?: string; Action?: string; Actor?: { ID?: string; Attributes?: Record<string, string> }; time?: number; timeNano?: number };
    try {
      raw = JSON.parse(line);
    } catch {
      return;
    }
    if (raw.time) this.eventsSince = raw.time;
    const type = raw.Type as DockerEvent['type'];
    if (!['container', 'image', 'network', 'volume'].includes(type)) return;
    const attributes = raw.Actor?.Attributes ?? {};
    const event: DockerEvent = {
      type,
      action: raw.Action ?? '',
      id: raw.Actor?.ID ?? '',
      name: attributes.name ?? null,
      deployment: attributes[PROJECT_LABEL] ?? null,
      service: attributes[SERVICE_LABEL] ?? null,
      time: raw.timeNano ? Math.floor(raw.timeNano / 1e6) : (raw.time ?? 0) * 1000,
      attributes,
    };
    for (const l of this.listeners) {
      try {
        l(event);
      } catch (err) {
        this.opts.log.error('docker event listener failed', { error: String(err) });
      }
    }
    if (type === 'container' && !event.action.startsWith('exec_')) {
      this.opts.events.emit('container.state', {
        id: event.id,
        name: event.name ?? event.id,
        deployment: event.deployment,
        service: event.service,
        action: event.action,
      });
    }
  }

  // ---- networks and compose ------------------------------------------------------------------------------------

  readonly networks = {
    list: async (filter: { deployment?: string } = {}) => {
      const list = await this.call('networks', () =>
        this.opts.docker.listNetworks(
          filter.deployment ? ({ filters: JSON.stringify({ label: [`${PROJECT_LABEL}=${filter.deployment}`] }) } as Docker.NetworkListOptions) : {},
        ),
      );
      return list.map((n) => ({ id: n.Id, name: n.Name, deployment: n.Labels?.[PROJECT_LABEL] ?? null, internal: n.Internal ?? false }));
    },
    ensure: async (name: string, options: { internal?: boolean; labels?: Record<string, string> } = {}): Promise<void> => {
      const existing = await this.call('networks', () => this.opts.docker.listNetworks({ filters: JSON.stringify({ name: [name] }) }));
      if (existing.some((n) => n.Name === name)) return;
      try {
        await this.call(`network '${name}'`, () =>
          this.opts.docker.createNetwork({
            Name: name,
            Driver: 'bridge',
            Internal: options.internal ?? false,
            Labels: options.labels ?? {},
            CheckDuplicate: true,
          }),
        );
      } catch (err) {
        if ((err as { status?: number }).status !== 409) throw err;
      }
    },
    connect: async (network: string, container: string, options: { aliases?: string[] } = {}): Promise<void> => {
      try {
        await this.call(`network '${network}'`, () =>
          this.opts.docker.getNetwork(network).connect({ Container: container, ...(options.aliases ? { EndpointConfig: { Aliases: options.aliases } } : {}) }),
        );
      } catch (err) {
        // Already connected: the engine answers 403 "endpoint with name … already exists".
        if (!/already exists/i.test((err as Error).message)) throw err;
      }
    },
    disconnect: async (network: string, container: string): Promise<void> => {
      try {
        await this.call(`network '${network}'`, () => this.opts.docker.getNetwork(network).disconnect({ Container: container }));
      } catch (err) {
        if (!/is not connected/i.test((err as Error).message)) throw err;
      }
    },
  };

  /** Starts the compose detection (once); resolves when it is done. */
  detectCompose(): Promise<void> {
    if (!this.detect) return Promise.resolve(); // not started
    this.composeDetection ??= this.detect().then(
      (command) => {
        this.detectedCommand = command;
        if (!command)
          this.opts.log.warn(
            'Docker Compose not found: routes that run compose (creating, updating, starting and stopping deployments, infrastructure) answer 503 COMPOSE_UNAVAILABLE',
            { fix: COMPOSE_FIX },
          );
      },
      () => undefined,
    );
    return this.composeDetection;
  }

  /** The compose command once detected; 503 COMPOSE_UNAVAILABLE when neither flavour is installed. */
  async composeCommand(): Promise<string[]> {
    await this.detectCompose();
    if (!this.detectedCommand) throw errors.unavailable('neither `docker compose` nor `docker-compose` is installed', 'COMPOSE_UNAVAILABLE');
    return [...this.detectedCommand];
  }

  private swarmCalls: DockerService['swarm'] | null = null;

  /** Swarm of this engine; a stack is deployed through the compose guard, as every run of a model is. */
  get swarm(): DockerService['swarm'] {
    return (this.swarmCalls ??= {
      ...swarmApi(this.opts.docker, (what, fn) => this.call(what, fn), this.opts.dockerHost),
      deployStack: async (checked, options) => {
        await this.swarm.requireManager();
        return this.guard.stack(checked, options);
      },
    });
  }

  readonly compose: DockerService['compose'] = {
    flavour: () => this.guard.flavour(),
    check: (source) => this.guard.check(source),
    run: async (checked, command, options) => {
      this.assertAvailable();
      return this.guard.run(checked, command, options);
    },
    lastChecked: (project) => this.guard.lastChecked(project),
    declareCurrent: (project, checked) => this.guard.declareCurrent(project, checked),
    forget: (project) => this.guard.forget(project),
    projectObjects: async (project) => {
      const filters = JSON.stringify({ label: [`${PROJECT_LABEL}=${project}`] });
      const [containers, networks, volumes] = await Promise.all([
        this.call('containers', () => this.opts.docker.listContainers({ all: true, filters })),
        this.call('networks', () => this.opts.docker.listNetworks({ filters } as Docker.NetworkListOptions)),
        this.call('volumes', () => this.opts.docker.listVolumes({ filters })),
      ]);
      return { containers: containers.length, networks: networks.length, volumes: volumes.Volumes?.length ?? 0 };
    },
    projects: async () => {
      const filters = JSON.stringify({ label: [PROJECT_LABEL] });
      const [containers, networks, volumes] = await Promise.all([
        this.call('containers', () => this.opts.docker.listContainers({ all: true, filters })),
        this.call('networks', () => this.opts.docker.listNetworks({ filters } as Docker.NetworkListOptions)),
        this.call('volumes', () => this.opts.docker.listVolumes({ filters })),
      ]);
      const names = new Set<string>();
      for (const o of [...containers, ...networks, ...(volumes.Volumes ?? [])]) {
        const p = o.Labels?.[PROJECT_LABEL];
        if (p) names.add(p);
      }
      return [...names];
    },
    removeProject: async (project, options = {}) => {
      const label = `${PROJECT_LABEL}=${project}`;
      const filters = (extra: Record<string, string[]> = {}) => JSON.stringify({ label: [label], ...extra });
      const containers = await this.call('containers', () => this.opts.docker.listContainers({ all: true, filters: filters() }));
      for (const c of containers) {
        await this.call(`container '${c.Id}'`, () => this.opts.docker.getContainer(c.Id).remove({ force: true, v: true })).catch(ignoreMissing);
      }
      const networks = await this.call('networks', () => this.opts.docker.listNetworks({ filters: filters() } as Docker.NetworkListOptions));
      for (const n of networks) await this.call(`network '${n.Name}'`, () => this.opts.docker.getNetwork(n.Id).remove()).catch(ignoreMissing);
      if (options.volumes) {
        const { Volumes } = await this.call('volumes', () => this.opts.docker.listVolumes({ filters: filters() }));
        for (const v of Volumes ?? []) await this.call(`volume '${v.Name}'`, () => this.opts.docker.getVolume(v.Name).remove()).catch(ignoreMissing);
      }
    },
  };
}

/** Already gone is what removal wants. */
function ignoreMissing(err: unknown): void {
  if ((err as { status?: number }).status === 404) return;
  throw err;
}

/** The engine answers 304 when a container already is in the wanted state. */
function ignoreNotModified(err: unknown): void {
  if ((err as { statusCode?: number }).statusCode === 304) return;
  throw err;
}

/** A listed container as the compose guard compares it with a model. */
function existingFromList(c: Docker.ContainerInfo): ExistingContainer {
  const labels = c.Labels ?? {};
  return {
    id: c.Id,
    name: (c.Names?.[0] ?? c.Id).replace(/^\//, ''),
    project: labels[PROJECT_LABEL] ?? null,
    service: labels[SERVICE_LABEL] ?? null,
    state: c.State,
    image: c.Image,
    labels,
    mounts: (c.Mounts ?? []).map((m) => ({ type: m.Type, source: m.Source, rw: m.RW })),
  };
}

function existingFromInspect(info: Docker.ContainerInspectInfo): ExistingContainer {
  const labels = info.Config?.Labels ?? {};
  return {
    id: info.Id,
    name: info.Name.replace(/^\//, ''),
    project: labels[PROJECT_LABEL] ?? null,
    service: labels[SERVICE_LABEL] ?? null,
    state: info.State.Status,
    image: info.Config?.Image ?? info.Image,
    labels,
    mounts: (info.Mounts ?? []).map((m) => ({ type: m.Type, source: m.Source, rw: m.RW })),
  };
}

/** The engine as the compose guard asks it (see `GuardEngine`); `call` maps engine errors as every call does. */
export function guardEngine(docker: Docker, call: <T>(what: string, fn: () => Promise<T>) => Promise<T>, remove: (id: string) => Promise<void>): GuardEngine {
  return {
    containers: async (project) => {
      const list = await call('containers', () =>
        docker.listContainers({ all: true, ...(project ? { filters: JSON.stringify({ label: [`${PROJECT_LABEL}=${project}`] }) } : {}) }),
      );
      return list.map(existingFromList);
    },
    objects: async (kind, names) => {
      if (kind === 'network') {
        const list = await call('networks', () => docker.listNetworks());
        return list.filter((n) => names.includes(n.Name)).map((n) => ({ name: n.Name, project: n.Labels?.[PROJECT_LABEL] ?? null }));
      }
      const { Volumes } = await call('volumes', () => docker.listVolumes());
      return (Volumes ?? []).filter((v) => names.includes(v.Name)).map((v) => ({ name: v.Name, project: v.Labels?.[PROJECT_LABEL] ?? null }));
    },
    imageExists: async (image) => {
      try {
        await call(`image '${image}'`, () => docker.getImage(image).inspect());
        return true;
      } catch (err) {
        if ((err as { status?: number; statusCode?: number }).status === 404 || (err as { statusCode?: number }).statusCode === 404) return false;
        throw err;
      }
    },
    removeContainer: remove,
    ensureSecret: async (name, value, labels) => {
      const found = (await call('secrets', () => docker.listSecrets({ filters: JSON.stringify({ name: [name] }) }))) as { Spec?: { Name?: string } }[];
      if (found.some((s) => s.Spec?.Name === name)) return;
      // The value goes to the engine in the request body only (never a file, never a message).
      await call(`secret '${name}'`, () => docker.createSecret({ Name: name, Labels: labels, Data: Buffer.from(value, 'utf8').toString('base64') }));
    },
  };
}
