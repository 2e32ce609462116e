/**
 * The `deployments` service: deployment folders, their lifecycle through the compose guard, and their state from
 * the cache. Routes and other plugins both go through it. Every start checks the folder's files again (compose's
 * model of them, against the host-safety policy) and runs exactly what was checked.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { errors, HttpError, isDeploymentName, removeInside, retiredName, type EventBus, type Logger, type Principal } from '@agent/sdk';
import { type CheckedCompose, type ComposeCommand, type ContainerSummary, type DockerService, type StackService } from '@agent/plugin-docker/api';
import { type DeploymentInfo, type DeploymentsService, type ServiceCreateInput } from './api.js';
import {
  createFolder,
  DEFAULT_COMPOSE,
  ENV_FILE,
  findComposeFile,
  folderCreatedAt,
  LEGACY_META_FILE,
  readFolderFile,
  readLegacyMeta,
  writeAtomic,
  type LogSourceSpec,
} from './files.js';
import { envProblems, parseEnv, serializeEnv } from './env-file.js';
import { serviceNames } from './compose-check.js';
import { deploymentStatus, serviceStates, StateCache } from './state.js';
import { KeyedLock } from './lock.js';
import type { DeploymentRecord, DeploymentRecords, Entry } from './records.js';
import { imagesOf, pinOf, type BeginRevision, type LeftService, type RevisionImage, type RevisionRecord, type Revisions } from './revisions.js';
import { pinContent } from './deploy/pins.js';
import { fileReplicas, holdingScale, scaleContent } from './deploy/scale.js';
import { backupBefore, requireBackups, type BackupBeforeChange } from './deploy/backups.js';
import type { DeployStrategy } from './deploy/strategies.js';
import { SwarmStates } from './swarm.js';

/**
 * How long a start or update of a swarm deployment waits for its stack to converge by default (Swarm itself never
 * gives up: an update can stay in progress forever); past it the change is a failure naming the services that lag
 * and why (setting `deployments.swarm_converge_timeout`).
 */
const SWARM_CONVERGE_MS = 90_000;

/** Where kept folders of deleted deployments go when their name is used again. */
const RETIRED_DIR = '.retired';
/** Compose projects of the agent itself (shared infrastructure, image builds) are named so. */
export const RESERVED_PREFIX = 'agent-';

export interface ManagerOptions {
  root: string;
  docker: DockerService;
  cache: StateCache;
  events: EventBus;
  records: DeploymentRecords;
  log: Logger;
  hostSafety: () => boolean;
  revisions: Revisions;
  /** The backups plugin's service when it runs (a change that asks `backup: true` takes one first). */
  backups: () => BackupBeforeChange | undefined;
  /** How long a change of a swarm deployment waits for its stack to converge (`SWARM_CONVERGE_MS` by default). */
  swarmConvergeMs?: number;
}

/**
 * Who makes a change and why (recorded with its revision), whether a backup comes first, and, for a change run as
 * a job, how to stop it and where its output and its account of what it left go.
 */
export interface ChangeContext {
  principal: Principal | null;
  reason?: string | null;
  backup?: boolean;
  jobId?: string | null;
  signal?: AbortSignal;
  output?: (line: string) => void;
  progress?: (step: string) => void;
  /** What a failed or cancelled change left, for the job's record. */
  report?: (what: unknown) => void;
}

/** What a redeploy or a rollback did. */
export interface DeployResult {
  deployment: string;
  revision: number;
  strategy: string;
  /** The services whose containers were replaced. */
  services: string[];
  pulled: string[];
  pins: Record<string, string>;
  images: Record<string, RevisionImage>;
  backup_id: string | null;
  /** Services the strategy replaced another way than it asked for, with why. */
  fallbacks: { service: string; why: string }[];
}

/** A rollback that passed its checks (`checkRollback`): the revision, its files, the pins and the model that runs. */
export interface RollbackPlan {
  record: RevisionRecord;
  env: Record<string, string>;
  pins: Record<string, string>;
  unpinned: { service: string; why: string }[];
  checked: CheckedCompose;
  current: { content: string; env: Record<string, string> };
}

/** A create as the service takes it (`exceptions` granted by the caller: the route allows that to admins only). */
export type CreateInput = ServiceCreateInput & { template?: string | null };

/** A create that passed its checks (`checkCreate`): what `createChecked` writes, and the model it starts. */
export interface CreatePlan {
  input: CreateInput;
  dir: string;
  vars: Record<string, string>;
  exceptions: string[];
  checked: CheckedCompose;
}

/** An update that passed its checks (`checkUpdate`): the files before and after, and whether it runs. */
export interface UpdatePlan {
  current: { content: string; env: Record<string, string> };
  content: string;
  vars: Record<string, string>;
  /** The images of an earlier rollback that stay pinned (an update of the `.env` alone keeps them). */
  pins: Record<string, string>;
  checked: CheckedCompose;
  wasRunning: boolean;
}

export interface CreateResult {
  info: DeploymentInfo;
  start_error: string | null;
  /** Its revision (1, unless a deleted deployment of the name left revisions under its retired name only). */
  revision: number;
}

const toVars = (list: { key: string; value: string }[] = []) => Object.fromEntries(list.map((v) => [v.key, v.value]));

/** The last lines of compose output, for error messages. */
const tailOf = (output: string, lines = 15) => output.trim().split('\n').slice(-lines).join('\n');

export function assertDeploymentName(name: string, field = 'name'): void {
  if (!isDeploymentName(name)) throw errors.badRequest(`${field}: invalid deployment name '${name}'`, 'VALIDATION_FAILED', { field });
}

export class DeploymentManager implements DeploymentsService {
  readonly entries = new Map<string, Entry>();
  readonly lock = new KeyedLock();
  /** The last list, reused until a deployment or the container state changes (listing is the hot path). */
  private listed: DeploymentInfo[] | null = null;
  private listedEngineUp = false;
  private listedJson: Buffer | null = null;
  private listedJsonFor: DeploymentInfo[] | null = null;

  /** Separator compose puts in container names: v1 `app_web_1`, v2 `app-web-1` (known once detection ends). */
  containerNameSeparator = '-';

  /** The stacks of swarm deployments (`runtime: swarm`), read in the background (see swarm.ts). */
  readonly swarm: SwarmStates;

  constructor(readonly opts: ManagerOptions) {
    this.swarm = new SwarmStates(
      opts.docker,
      opts.log,
      () => [...this.entries.values()].filter((e) => e.record.runtime === 'swarm').map((e) => e.name),
      () => this.invalidate(),
    );
    opts.cache.onChange(() => {
      this.invalidate();
      // Tasks of a swarm deployment started, stopped or failed: its replicas changed.
      if ([...this.entries.values()].some((e) => e.record.runtime === 'swarm')) void this.swarm.refresh();
    });
    opts.docker.compose.flavour().then(
      (flavour) => {
        this.containerNameSeparator = flavour === 'v1' ? '_' : '-';
      },
      () => {
        /* no compose: keep v2 naming */
      },
    );
  }

  invalidate(): void {
    this.listed = null;
    this.listedJson = null;
  }

  /** `{"data": list()}` serialised once per change: the full list is what most clients ask for. */
  listJson(): Buffer {
    const list = this.snapshot();
    if (!this.listedJson || this.listedJsonFor !== list) {
      this.listedJson = Buffer.from(JSON.stringify({ data: list }));
      this.listedJsonFor = list;
    }
    return this.listedJson;
  }

  root(): string {
    return this.opts.root;
  }

  get cache(): StateCache {
    return this.opts.cache;
  }

  // ---- discovery and reading --------------------------------------------------------------------------------------

  /** Finds deployment folders (a compose file, not a kept folder of a deleted deployment) under the root. */
  async discover(): Promise<void> {
    await mkdir(this.opts.root, { recursive: true, mode: 0o750 });
    for (const dirent of await readdir(this.opts.root, { withFileTypes: true })) {
      if (!dirent.isDirectory() || !isDeploymentName(dirent.name)) continue;
      try {
        await this.load(dirent.name);
      } catch (err) {
        this.opts.log.warn('deployment folder skipped', { name: dirent.name, error: String((err as Error)?.message ?? err) });
      }
    }
  }

  /** (Re)reads one folder into the registry; returns null when it holds no active deployment. */
  private async load(name: string): Promise<Entry | null> {
    const dir = join(this.opts.root, name);
    const { records } = this.opts;
    let record = records.get(name);
    if (!record && !records.isKept(name)) record = await this.adopt(name, dir);
    const composeName = record && existsSync(join(dir, record.compose_file)) ? record.compose_file : findComposeFile(dir);
    if (!record || !composeName) {
      this.entries.delete(name);
      this.invalidate();
      return null;
    }
    if (record.compose_file !== composeName) record = await records.patch(name, { compose_file: composeName });
    let services: string[] = [];
    try {
      services = serviceNames((await readFolderFile(dir, composeName)) ?? '');
    } catch (err) {
      this.opts.log.warn('compose file of a deployment cannot be read', { name, error: (err as Error).message });
    }
    const entry: Entry = { name, dir, composeFile: composeName, record, services, failure: this.entries.get(name)?.failure ?? null };
    this.entries.set(name, entry);
    this.invalidate();
    return entry;
  }

  /** A folder found on disk: its record is created (from an older agent's metadata file when there is one). */
  private async adopt(name: string, dir: string): Promise<DeploymentRecord | undefined> {
    const composeName = findComposeFile(dir);
    if (!composeName) return undefined;
    const legacy = await readLegacyMeta(dir);
    if (legacy && typeof legacy.deleted_at === 'string') {
      await this.opts.records.markKept(name, legacy.deleted_at);
      await rm(join(dir, LEGACY_META_FILE), { force: true });
      return undefined;
    }
    const record: DeploymentRecord = {
      created_at: typeof legacy?.created_at === 'string' ? legacy.created_at : await folderCreatedAt(dir),
      created_by: typeof legacy?.created_by === 'string' ? legacy.created_by : null,
      template: typeof legacy?.template === 'string' ? legacy.template : null,
      compose_file: composeName,
      log_sources: Array.isArray(legacy?.log_sources) ? (legacy.log_sources as LogSourceSpec[]) : [],
      exceptions: [],
    };
    await this.opts.records.put(name, record);
    // The folder is no place for what the agent decides on: the record now lives in the agent's own data.
    if (legacy) await rm(join(dir, LEGACY_META_FILE), { force: true });
    return record;
  }

  require(name: string): Entry {
    if (!isDeploymentName(name)) throw errors.badRequest(`invalid deployment name '${name}'`, 'VALIDATION_FAILED', { field: 'name' });
    const entry = this.entries.get(name);
    if (!entry) throw errors.notFound(`deployment '${name}' not found`);
    return entry;
  }

  paths(entry: Entry) {
    return { compose: join(entry.dir, entry.composeFile), env: join(entry.dir, ENV_FILE) };
  }

  info(entry: Entry): DeploymentInfo {
    const containers = this.cache.containers(entry.name);
    const p = this.paths(entry);
    const info: DeploymentInfo = {
      name: entry.name,
      path: entry.dir,
      status: deploymentStatus(entry.services, containers, this.cache.engineUp(), entry.failure !== null),
      created_at: entry.record.created_at,
      services: serviceStates(entry.services, containers),
      compose_file: p.compose,
      env_file: p.env,
    };
    if (entry.record.runtime !== 'swarm') return info;
    // The same shapes, with the stack's replicas and task errors (`runtime` only on swarm deployments: the answers
    // of compose deployments stay as they were).
    const stack = this.cache.engineUp() ? this.swarm.view(entry.name, info.services) : null;
    return { ...info, ...(stack ?? {}), runtime: 'swarm' };
  }

  list(): DeploymentInfo[] {
    return [...this.snapshot()];
  }

  /** The memoized list (shared: never hand it out to be mutated). */
  private snapshot(): DeploymentInfo[] {
    // Engine availability is part of every status: a change of it must not serve a stale list.
    if (this.listed && this.listedEngineUp === this.cache.engineUp()) return this.listed;
    this.listedEngineUp = this.cache.engineUp();
    this.listed = [...this.entries.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((e) => this.info(e));
    return this.listed;
  }

  get(name: string): DeploymentInfo | undefined {
    const entry = this.entries.get(name);
    return entry ? this.info(entry) : undefined;
  }

  /** The compose file and `.env` of a deployment as they are on disk (never through a symlink). */
  async source(entry: Entry): Promise<{ content: string; env: Record<string, string> }> {
    const [content, env] = await Promise.all([readFolderFile(entry.dir, entry.composeFile), readFolderFile(entry.dir, ENV_FILE)]);
    return { content: content ?? '', env: parseEnv(env ?? '') };
  }

  /** The text as written, and compose's model of it (what runs). */
  async compose(name: string): Promise<{ content: string; parsed: Record<string, any> }> {
    const entry = this.require(name);
    return { content: (await this.source(entry)).content, parsed: (await this.checkCurrent(entry)).model as Record<string, any> };
  }

  async env(name: string): Promise<Record<string, string>> {
    return (await this.source(this.require(name))).env;
  }

  async serviceContainer(name: string, service: string): Promise<ContainerSummary | null> {
    this.require(name);
    const list = await this.opts.docker.listContainers({ all: true, deployment: name });
    const mine = list.filter((c) => c.service === service);
    // While a start-first redeploy runs two containers of the service, the one it chose (the proxy routes to it).
    const held = this.held.get(`${name}/${service}`);
    return mine.find((c) => c.id === held) ?? mine.find((c) => c.state === 'running') ?? mine[0] ?? null;
  }

  async swarmUpstream(name: string, service: string, port: number): Promise<{ tasks: string[]; mesh: number | null } | null> {
    const entry = this.require(name);
    if (entry.record.runtime !== 'swarm') return null;
    const found = await this.opts.docker.swarm.serviceEndpoint(name, service);
    if (!found) return { tasks: [], mesh: null };
    return {
      tasks: found.local_tasks.map((t) => `${t.address}:${port}`).sort(),
      mesh: found.ports.find((p) => p.mode === 'ingress' && p.protocol === 'tcp' && p.target === port)?.published ?? null,
    };
  }

  /** Container ids `serviceContainer` answers for `deployment/service` while a start-first redeploy switches it. */
  private readonly held = new Map<string, string>();

  /** Holds `serviceContainer` of a service on one container (null: releases it). */
  holdContainer(name: string, service: string, containerId: string | null): void {
    if (containerId) this.held.set(`${name}/${service}`, containerId);
    else this.held.delete(`${name}/${service}`);
  }

  // ---- checking --------------------------------------------------------------------------------------------------

  /**
   * Compose's model of a deployment's files, checked by the host-safety policy (400 with the problem). The `.env`
   * is the one these variables make (it is written with them), so `env_file: .env` reads the same values.
   */
  check(
    name: string,
    dir: string,
    content: string,
    vars: Record<string, string>,
    exceptions: string[],
    runtime: 'compose' | 'swarm' | undefined = this.entries.get(name)?.record.runtime,
  ): Promise<CheckedCompose> {
    // A swarm deployment runs with the scale set through the API while its file's replicas stay what they were.
    const scale = runtime === 'swarm' ? this.entries.get(name)?.record.scale : undefined;
    return this.opts.docker.compose.check({
      project: name,
      dir,
      content: scaleContent(content, scale),
      env: vars,
      exceptions,
      enforce: this.opts.hostSafety(),
      files: { [ENV_FILE]: serializeEnv(vars) },
      // A swarm deployment's files are checked for `docker stack deploy` (Swarm's own rules and update defaults).
      ...(runtime === 'swarm' ? { runtime } : {}),
    });
  }

  /** The deployment's files as they are now, checked (cached by content: an unchanged folder costs nothing). */
  async checkCurrent(entry: Entry): Promise<CheckedCompose> {
    const { content, env } = await this.source(entry);
    // What runs is the files with the images a rollback pinned (until the compose file changes or a redeploy).
    const checked = await this.check(entry.name, entry.dir, pinContent(content, entry.record.pins ?? {}), env, entry.record.exceptions);
    entry.services = [...checked.services];
    return checked;
  }

  /**
   * Tells the guard which model the deployment's containers must come from now that its files or exceptions
   * changed without a run (none when they no longer pass): a container of an older model is then never started as
   * it is, through any route.
   */
  private async declareCurrent(entry: Entry, checked?: CheckedCompose): Promise<void> {
    let model: CheckedCompose | null = checked ?? null;
    if (!model) {
      try {
        model = await this.checkCurrent(entry);
      } catch (err) {
        if (!(err instanceof HttpError) || err.status >= 500)
          this.opts.log.warn('deployment files could not be checked; no container of it starts until it is started again', {
            deployment: entry.name,
            error: (err as Error).message,
          });
      }
    }
    await this.opts.docker.compose.declareCurrent(entry.name, model);
  }

  /**
   * A name is free when no compose project of that name exists on the host: neither a foreign one nor what a
   * deleted deployment of that name left behind (containers, networks, volumes would be taken over).
   */
  async assertNameFree(name: string): Promise<void> {
    if (name === RESERVED_PREFIX.slice(0, -1) || name.startsWith(RESERVED_PREFIX))
      throw errors.badRequest(`name: 'agent' and '${RESERVED_PREFIX}' names are reserved for the agent's own compose projects`, 'NAME_RESERVED', {
        field: 'name',
      });
    // Compose names a project's networks and volumes `<project>_<key>` (and v1 its containers `<project>_<service>_1`):
    // a name that another project's name extends at `_`, or that extends another's, could meet its objects.
    const clash = (other: string) => other !== name && (other.startsWith(`${name}_`) || name.startsWith(`${other}_`));
    const deployment = [...this.entries.keys()].find(clash);
    if (deployment)
      throw errors.conflict(
        `name: '${name}' and the deployment '${deployment}' would share names of networks, volumes and containers (compose joins names with '_'); choose another name`,
        'NAME_IN_USE',
        { field: 'name', project: deployment },
      );
    if (!this.opts.docker.available()) return; // checked again before the first start
    const project = (await this.opts.docker.compose.projects()).find(clash);
    if (project !== undefined)
      throw errors.conflict(
        `name: '${name}' and the compose project '${project}' on this host would share names of networks, volumes and containers; choose another name`,
        'NAME_IN_USE',
        { field: 'name', project },
      );
    const found = await this.opts.docker.compose.projectObjects(name);
    const total = found.containers + found.networks + found.volumes;
    if (total > 0) {
      throw errors.conflict(
        `a compose project named '${name}' already exists on this host (${found.containers} container(s), ${found.networks} network(s), ${found.volumes} volume(s)); choose another name or have an admin remove it`,
        'NAME_IN_USE',
        { ...found },
      );
    }
  }

  // ---- compose ---------------------------------------------------------------------------------------------------

  async composeRun(
    checked: CheckedCompose,
    command: ComposeCommand,
    what: string,
    options: { signal?: AbortSignal; onLine?: (line: string) => void } = {},
  ): Promise<string> {
    const started = Date.now();
    const release = this.cache.hold(checked.project);
    let result;
    try {
      result = checked.runtime === 'swarm' ? await this.swarmRun(checked, command, options) : await this.opts.docker.compose.run(checked, command, options);
    } finally {
      release();
    }
    this.opts.log.debug('compose run', { deployment: checked.project, command: command.command, exit_code: result.exit_code, ms: Date.now() - started });
    if (result.exit_code !== 0) {
      throw new HttpError(502, 'COMPOSE_FAILED', `${what} of '${checked.project}' failed (exit ${result.exit_code}): ${tailOf(result.output)}`);
    }
    return result.output;
  }

  /**
   * A compose command of a swarm deployment, as the stack does it: starts (and whatever else creates or replaces
   * containers) deploy the checked model as the stack, `restart` replaces every task, `stop` and `down` remove the
   * stack (its volumes stay, unless `down` asks for them).
   */
  private async swarmRun(
    checked: CheckedCompose,
    command: ComposeCommand,
    options: { signal?: AbortSignal; onLine?: (line: string) => void },
  ): Promise<{ exit_code: number; output: string }> {
    const name = checked.project;
    const swarm = this.opts.docker.swarm;
    try {
      switch (command.command) {
        case 'stop':
          await swarm.removeStack(name);
          return { exit_code: 0, output: '' };
        case 'down':
          await swarm.removeStack(name);
          // The tasks' containers and the stack's volumes carry the project's compose labels (the guard adds them).
          if (command.volumes) await this.opts.docker.compose.removeProject(name, { volumes: true });
          return { exit_code: 0, output: '' };
        case 'restart':
          await swarm.restart(name);
          return { exit_code: 0, output: '' };
        case 'build':
          return { exit_code: 0, output: '' };
        default: {
          // The rolling updates that had ended before this deploy: their state stays until a next one starts.
          const before = new Map((await swarm.stackServices(name)).map((s) => [s.name, s.update?.started_at ?? null]));
          const deployed = await swarm.deployStack(checked, options);
          if (deployed.exit_code !== 0) return deployed;
          // A redeploy replaces the tasks even when the spec did not change (`deploy` alone would leave them): a tag
          // that names another image now is resolved again by the new tasks, rolled as each update_config says.
          if (command.command === 'up' && command.forceRecreate) await swarm.restart(name, command.services);
          // `docker stack deploy` returns once the engine took the new specs: a start or an update is done when
          // the stack converged, and failed when Swarm rolled a service back (its update failed its monitor).
          const failure = await this.swarmSettled(name, before, options.signal);
          if (failure) return { exit_code: 1, output: `${deployed.output}\n${failure}` };
          // The tasks run with the secrets of the values now: those of values rotated away go.
          const removed = await swarm.pruneSecrets(checked).catch((err: Error) => {
            this.opts.log.warn('old secrets of a stack not removed', { deployment: name, error: err.message });
            return [];
          });
          if (removed.length) options.onLine?.(`secrets rotated away removed: ${removed.join(', ')}`);
          return deployed;
        }
      }
    } finally {
      await this.swarm.refresh();
    }
  }

  /**
   * Waits until every service of a stack runs its desired replicas with no update in progress; answers why not
   * (a rollback, a paused update, tasks failing) after `swarmConvergeMs`, or null once converged. Looks every
   * 100 ms for the first 10 s (a new stack's replicas start within a few seconds: the answer comes as soon as they
   * run), every 250 ms after that. A stack that had services before is not taken as converged until a second after
   * the deploy: the engine starts the update of a changed spec within that (new services are pending from the start).
   */
  private async swarmSettled(name: string, before: Map<string, string | null>, signal?: AbortSignal): Promise<string | null> {
    const limit = this.opts.swarmConvergeMs ?? SWARM_CONVERGE_MS;
    const started = Date.now();
    const until = started + limit;
    const earliest = started + (before.size ? 1000 : 0);
    let last = '';
    for (;;) {
      await new Promise((r) => setTimeout(r, Date.now() - started < 10_000 ? 100 : 250));
      if (signal?.aborted) return 'cancelled while the stack converged';
      // An update that started before this deploy (a rollback of an earlier change, say) is not this change's.
      const services = (await this.opts.docker.swarm.stackServices(name)).map((s) =>
        s.update && before.has(s.name) && (s.update.started_at ?? null) === before.get(s.name) ? { ...s, update: null } : s,
      );
      const errors = (s: StackService) => [...new Set(s.tasks.map((t) => t.error).filter(Boolean))].slice(0, 3).join('; ');
      const rolled = services.find((s) => s.update && /^rollback_(completed|paused)$|^paused$/.test(s.update.state));
      if (rolled)
        return `service '${rolled.name}': the update ${rolled.update!.state === 'paused' ? 'paused' : 'was rolled back'} (${rolled.update!.message ?? 'no message'})${errors(rolled) ? `: ${errors(rolled)}` : ''}`;
      const pending = services.filter((s) => (s.update && s.update.state !== 'completed') || s.replicas.running < s.replicas.desired);
      if (!pending.length && Date.now() >= earliest) return null;
      last = pending
        .map((s) => `'${s.name}' ${s.replicas.running}/${s.replicas.desired}${s.update ? ` (${s.update.state})` : ''}${errors(s) ? `: ${errors(s)}` : ''}`)
        .join(', ');
      if (Date.now() > until) return `the stack did not converge within ${limit / 1000} s: ${last}`;
    }
  }

  /** `up -d`: creates what is missing and recreates services whose configuration changed. */
  private async up(entry: Entry, options: { services?: string[]; checked?: CheckedCompose } = {}): Promise<CheckedCompose> {
    try {
      // Checked again at every start: the files may have changed since (a container can write to its folder).
      const checked = await this.checkStart(entry, options.checked);
      await this.composeRun(checked, { command: 'up', removeOrphans: !options.services, services: options.services }, 'starting');
      entry.failure = null;
      return checked;
    } catch (err) {
      entry.failure = (err as Error).message;
      throw err;
    } finally {
      this.invalidate();
      await this.cache.reconcile();
    }
  }

  /** Before the first start of a deployment created while the engine was away: its name must not be taken. */
  private async assertNotForeign(name: string): Promise<void> {
    const found = await this.opts.docker.compose.projectObjects(name);
    if (found.containers + found.networks + found.volumes > 0) {
      throw errors.conflict(`a compose project named '${name}' that this deployment did not create exists on this host; it is not taken over`, 'NAME_IN_USE', {
        ...found,
      });
    }
  }

  /** The model to stop or remove with: the one that last ran, else the current files (null when they fail the check). */
  private async runningModel(entry: Entry): Promise<CheckedCompose | null> {
    const last = await this.opts.docker.compose.lastChecked(entry.name);
    if (last) return last;
    try {
      return await this.checkCurrent(entry);
    } catch (err) {
      this.opts.log.warn('deployment files do not pass the check; acting through the engine', { deployment: entry.name, error: (err as Error).message });
      return null;
    }
  }

  // ---- the checks of each change (the operations' prepare; the methods below run them again) -------------------

  /** Every check of a create; changes nothing. */
  async checkCreate(input: CreateInput): Promise<CreatePlan> {
    const { name } = input;
    assertDeploymentName(name);
    const problem = envProblems(input.env_vars ?? []);
    if (problem) throw errors.badRequest(problem, 'VALIDATION_FAILED', { field: 'env_vars' });
    if (input.auto_start) this.opts.docker.assertAvailable();
    const dir = join(this.opts.root, name);
    this.assertCreatable(name, dir);
    await this.assertNameFree(name);
    const vars = toVars(input.env_vars);
    const exceptions = [...new Set(input.exceptions ?? [])].sort();
    // A stack needs a swarm this engine manages: 409 NOT_SWARM_MANAGER before anything is written. And a stack of
    // that name (or one whose objects' names would meet this one's) that the agent did not deploy is not taken over:
    // `docker stack deploy` would replace its services.
    if (input.runtime === 'swarm' && this.opts.docker.available()) {
      await this.opts.docker.swarm.requireManager();
      const stack = (await this.opts.docker.swarm.stacks()).find((s) => s === name || s.startsWith(`${name}_`) || name.startsWith(`${s}_`));
      if (stack !== undefined)
        throw errors.conflict(`name: a swarm stack '${stack}' that no deployment owns exists on this engine; choose another name`, 'NAME_IN_USE', {
          field: 'name',
          project: stack,
        });
    }
    const checked = await this.check(name, dir, input.compose_content, vars, exceptions, input.runtime);
    return { input, dir, vars, exceptions, checked };
  }

  /** No deployment has the name, and its folder is free or a deleted deployment's kept folder (then true: reused). */
  private assertCreatable(name: string, dir: string): boolean {
    if (this.entries.has(name)) throw errors.conflict(`deployment '${name}' already exists`, 'DEPLOYMENT_EXISTS');
    const reuse = existsSync(dir);
    if (reuse && !this.opts.records.isKept(name)) throw errors.conflict(`folder '${dir}' already exists and is not a deleted deployment`, 'DEPLOYMENT_EXISTS');
    return reuse;
  }

  /** Every check of an update (the files as they are now with the change, the engine when it runs); changes nothing. */
  async checkUpdate(entry: Entry, input: { compose_content?: string; env_vars?: { key: string; value: string }[] }): Promise<UpdatePlan> {
    if (input.compose_content === undefined && input.env_vars === undefined)
      throw errors.badRequest('body: give compose_content and/or env_vars', 'VALIDATION_FAILED');
    const problem = envProblems(input.env_vars ?? []);
    if (problem) throw errors.badRequest(problem, 'VALIDATION_FAILED', { field: 'env_vars' });
    const current = await this.source(entry);
    const content = input.compose_content ?? current.content;
    const vars = input.env_vars ? toVars(input.env_vars) : current.env;
    const pins = input.compose_content === undefined ? (entry.record.pins ?? {}) : {};
    const checked = await this.check(entry.name, entry.dir, pinContent(content, pins), vars, entry.record.exceptions);
    await this.cache.reconcile();
    const status = this.info(entry).status;
    const wasRunning = status === 'running' || status === 'partial';
    if (wasRunning) this.opts.docker.assertAvailable();
    return { current, content, vars, pins, checked, wasRunning };
  }

  /** The checks of a start: compose's model of the files as they are now and, before its first run, the name still free. */
  async checkStart(entry: Entry, checked?: CheckedCompose): Promise<CheckedCompose> {
    const model = checked ?? (await this.checkCurrent(entry));
    if (!(await this.opts.docker.compose.lastChecked(entry.name))) await this.assertNotForeign(entry.name);
    return model;
  }

  /** The checks of a restart: a start's, except that containers it restarts first have already run under the name. */
  checkRestart(entry: Entry): Promise<CheckedCompose> {
    return this.cache.containers(entry.name).length > 0 ? this.checkCurrent(entry) : this.checkStart(entry);
  }

  // ---- lifecycle -------------------------------------------------------------------------------------------------

  async create(input: CreateInput, principal: Principal | null): Promise<DeploymentInfo> {
    return (await this.createWithResult(input, principal)).info;
  }

  async createWithResult(input: CreateInput, principal: Principal | null): Promise<CreateResult> {
    return this.createChecked(await this.checkCreate(input), principal);
  }

  /** Writes (and starts) a checked create. The name is taken under the lock: another create may have won it since. */
  async createChecked(plan: CreatePlan, principal: Principal | null, change: { reason?: string | null } = {}): Promise<CreateResult> {
    const { input, dir, vars, exceptions, checked } = plan;
    const { name } = input;
    return this.lock.run(name, async () => {
      const reuse = this.assertCreatable(name, dir);
      await mkdir(this.opts.root, { recursive: true, mode: 0o750 });
      const record: DeploymentRecord = {
        created_at: new Date().toISOString(),
        created_by: principal?.id ?? null,
        template: input.template ?? null,
        compose_file: DEFAULT_COMPOSE,
        log_sources: [],
        exceptions,
        ...(input.runtime === 'swarm' ? { runtime: 'swarm' as const } : {}),
      };
      const files: Record<string, { content: string; mode?: number }> = {
        [DEFAULT_COMPOSE]: { content: input.compose_content },
        [ENV_FILE]: { content: serializeEnv(vars), mode: 0o600 },
      };
      // A folder kept by an earlier delete belongs to that deployment, not to this one: it is set aside (for an
      // admin to look into) and the new deployment starts empty.
      if (reuse) await this.retireFolder(name, dir);
      try {
        await createFolder(this.opts.root, name, files);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOTEMPTY' || code === 'EEXIST') throw errors.conflict(`deployment '${name}' already exists`, 'DEPLOYMENT_EXISTS');
        throw err;
      }
      await this.opts.records.put(name, record);
      const entry = (await this.load(name))!;
      entry.services = [...checked.services];
      await this.declareCurrent(entry, checked);
      // The access plugin grants the creator admin access to it as the event is delivered.
      this.opts.events.emit('deployment.created', { name, created_by: principal?.id ?? null });
      const rev = this.beginRevision(entry, 'create', { principal, reason: change.reason }, { content: input.compose_content, env: vars, checked });
      let startError: string | null = null;
      if (input.auto_start) {
        try {
          await this.up(entry, { checked });
          this.opts.events.emit('deployment.started', { name });
        } catch (err) {
          startError = (err as Error).message;
          this.opts.events.emit('deployment.failed', { name, error: startError });
        }
      }
      // A create whose start failed is kept (the answer says why); its revision records the failure.
      this.opts.revisions.finish(name, rev, {
        status: startError ? 'failed' : 'succeeded',
        error: startError,
        ran: !!input.auto_start,
        images: input.auto_start ? await this.ranImages(entry, checked) : undefined,
      });
      return { info: this.info(entry), start_error: startError, revision: rev };
    });
  }

  async update(
    name: string,
    input: { compose_content?: string; env_vars?: { key: string; value: string }[] },
    change: ChangeContext = { principal: null },
  ): Promise<{ info: DeploymentInfo; recreated: boolean; revision: number; backup_id: string | null }> {
    const entry = this.require(name);
    // Before the lock: the backup reads the deployment as it is (and its own job takes its time).
    const backupId = await this.backupFirst(entry, change);
    return this.lock.run(name, async () => {
      // Checked again under the lock: the files are read as they are now.
      const plan = await this.checkUpdate(entry, input);
      const { content, vars, checked, wasRunning } = plan;
      const rev = this.beginRevision(entry, 'update', change, { content, env: vars, checked }, { backupId, pins: plan.pins });
      try {
        const p = this.paths(entry);
        if (input.env_vars) await writeAtomic(p.env, serializeEnv(vars), 0o600);
        if (input.compose_content !== undefined) await writeAtomic(p.compose, content);
        // A new compose file names its images anew: the pins of an earlier rollback end with it.
        if (input.compose_content !== undefined && Object.keys(entry.record.pins ?? {}).length)
          entry.record = await this.opts.records.patch(name, { pins: {} });
        if (input.compose_content !== undefined) await this.dropStaleScale(entry, content);
        entry.services = [...checked.services];
        await this.declareCurrent(entry, checked);
        this.invalidate();
        this.opts.events.emit('deployment.updated', { name });
        if (wasRunning) await this.up(entry, { checked });
      } catch (err) {
        this.opts.revisions.finish(name, rev, { status: 'failed', error: (err as Error).message, ran: wasRunning });
        throw wasRunning ? await this.rollBackStack(entry, rev, err, change) : err;
      }
      this.opts.revisions.finish(name, rev, { status: 'succeeded', ran: wasRunning, images: wasRunning ? await this.ranImages(entry, checked) : undefined });
      return { info: this.info(entry), recreated: wasRunning, revision: rev, backup_id: backupId };
    });
  }

  async setEnv(name: string, vars: Record<string, string | null>, options: { recreate?: boolean } = {}): Promise<void> {
    const entry = this.require(name);
    const list = Object.entries(vars)
      .filter(([, v]) => v !== null)
      .map(([key, value]) => ({ key, value: value! }));
    const problem = envProblems(list, 'vars');
    if (problem) throw errors.badRequest(problem);
    await this.lock.run(name, async () => {
      const { content, env: current } = await this.source(entry);
      for (const [k, v] of Object.entries(vars)) {
        if (v === null) delete current[k];
        else current[k] = v;
      }
      const checked = await this.check(name, entry.dir, pinContent(content, entry.record.pins ?? {}), current, entry.record.exceptions);
      await writeAtomic(this.paths(entry).env, serializeEnv(current), 0o600);
      await this.declareCurrent(entry, checked);
      this.opts.events.emit('deployment.updated', { name });
      if (options.recreate) {
        await this.cache.reconcile();
        const status = this.info(entry).status;
        if (status === 'running' || status === 'partial') await this.up(entry, { checked });
      }
    });
  }

  async start(name: string): Promise<void> {
    const entry = this.require(name);
    this.opts.docker.assertAvailable();
    await this.lock.run(name, async () => {
      try {
        // Not `--no-recreate`: a container created from an older model (the files or the exceptions changed while
        // the deployment was stopped) is recreated from the checked one, never started as it was.
        await this.ranLater(entry, await this.up(entry));
      } catch (err) {
        this.opts.events.emit('deployment.failed', { name, error: (err as Error).message });
        throw err;
      }
      this.opts.events.emit('deployment.started', { name });
    });
  }

  /** Starts some services of a deployment (e.g. a database for a restore), through the same checks as a start. */
  async startServices(name: string, services: string[]): Promise<void> {
    const entry = this.require(name);
    this.opts.docker.assertAvailable();
    await this.lock.run(name, () => this.up(entry, { services }));
  }

  async stop(name: string): Promise<void> {
    const entry = this.require(name);
    this.opts.docker.assertAvailable();
    await this.lock.run(name, async () => {
      try {
        const model = await this.runningModel(entry);
        if (model) await this.composeRun(model, { command: 'stop' }, 'stopping');
        else for (const c of this.cache.containers(name)) if (c.state === 'running') await this.opts.docker.stopContainer(c.id);
        entry.failure = null;
      } finally {
        this.invalidate();
        await this.cache.reconcile();
      }
      this.opts.events.emit('deployment.stopped', { name });
    });
  }

  async restart(name: string): Promise<void> {
    const entry = this.require(name);
    this.opts.docker.assertAvailable();
    await this.lock.run(name, async () => {
      await this.cache.reconcile();
      const hasContainers = this.cache.containers(name).length > 0;
      try {
        // `restart` only touches existing containers (the guard recreates those of an older model): bring missing
        // ones up afterwards.
        const checked = await this.checkCurrent(entry);
        if (hasContainers) await this.composeRun(checked, { command: 'restart' }, 'restarting');
        await this.ranLater(entry, await this.up(entry, { checked }));
      } catch (err) {
        this.opts.events.emit('deployment.failed', { name, error: (err as Error).message });
        throw err;
      }
      this.opts.events.emit('deployment.started', { name });
    });
  }

  async remove(name: string, options: { remove_files?: boolean; remove_volumes?: boolean } = {}): Promise<void> {
    const entry = this.require(name);
    this.opts.docker.assertAvailable();
    await this.lock.run(name, async () => {
      await this.cache.reconcile();
      // Nothing compose created is left (never started): skip `down`, a slow no-op.
      const leftovers =
        this.cache.containers(name).length > 0 || options.remove_volumes || (await this.opts.docker.networks.list({ deployment: name })).length > 0;
      if (leftovers) {
        try {
          const model = await this.runningModel(entry);
          if (model) await this.composeRun(model, { command: 'down', removeOrphans: true, volumes: options.remove_volumes }, 'removing');
          else await this.opts.docker.compose.removeProject(name, { volumes: options.remove_volumes });
        } finally {
          await this.cache.reconcile();
        }
      }
      await this.opts.docker.compose.forget(name);
      // The folder's containers are gone, but what they left may be links: removed relative to open folders, a
      // link is unlinked itself, never followed.
      if (options.remove_files) await removeInside(this.opts.root, name);
      const deletedAt = new Date();
      await this.opts.records.remove(name, !options.remove_files, deletedAt);
      this.entries.delete(name);
      this.invalidate();
      // What hangs on the name is removed or kept under the retired name by its owner (admins can still read it).
      this.opts.events.emit('deployment.deleted', { name, removed_files: options.remove_files ?? false, retired_as: retiredName(name, deletedAt) });
    });
  }

  async refresh(name: string): Promise<void> {
    if (!isDeploymentName(name)) throw errors.badRequest(`invalid deployment name '${name}'`);
    await this.lock.run(name, async () => {
      const entry = await this.load(name);
      if (!entry) throw errors.notFound(`deployment '${name}' not found`);
      await this.declareCurrent(entry);
      await this.cache.reconcile();
    });
  }

  /** Moves a deleted deployment's kept folder to `<root>/.retired/<name>~<time>`. */
  private async retireFolder(name: string, dir: string): Promise<void> {
    const retired = join(this.opts.root, RETIRED_DIR);
    await mkdir(retired, { recursive: true, mode: 0o700 });
    const kept = this.opts.records.keptSince(name) ?? new Date().toISOString();
    await rename(dir, join(retired, retiredName(name, new Date(kept))));
    this.opts.log.info('kept folder of a deleted deployment set aside', { deployment: name, to: join(retired, retiredName(name, new Date(kept))) });
  }

  /**
   * Keeps the scale of a service set through the API (under the deployment's lock) for the next deploys of the
   * same file: with the file's replicas of now, which decide again once they change (deploy/scale.ts).
   */
  async rememberScale(entry: Entry, service: string, replicas: number): Promise<void> {
    const { content } = await this.source(entry);
    const scale = { ...holdingScale(content, entry.record.scale) };
    const file = fileReplicas(content)[service] ?? null;
    if (file === replicas) delete scale[service];
    else scale[service] = { replicas, file };
    entry.record = await this.opts.records.patch(entry.name, { scale });
  }

  /** The file's replicas of a service changed: the scale set through the API for it no longer holds. */
  private async dropStaleScale(entry: Entry, content: string): Promise<void> {
    const scale = entry.record.scale;
    if (!scale || !Object.keys(scale).length) return;
    const holding = holdingScale(content, scale);
    if (Object.keys(holding).length !== Object.keys(scale).length) entry.record = await this.opts.records.patch(entry.name, { scale: holding });
  }

  /** Saves what the agent keeps about a deployment (log sources, exceptions). */
  async saveRecord(entry: Entry, patch: Partial<DeploymentRecord>): Promise<void> {
    await this.lock.run(entry.name, async () => {
      entry.record = await this.opts.records.patch(entry.name, patch);
      // Revoked exceptions take effect at once: the containers of a model that needed them are no longer current.
      if (patch.exceptions) await this.declareCurrent(entry);
    });
  }

  // ---- revisions, redeploys and rollbacks --------------------------------------------------------------------------

  /** Records a change as it starts (its files, the model that runs, who and why). */
  private beginRevision(
    entry: Entry,
    action: BeginRevision['action'],
    change: Pick<ChangeContext, 'principal' | 'reason' | 'jobId'>,
    files: { content: string; env: Record<string, string>; checked: CheckedCompose },
    extra: Partial<BeginRevision> = {},
  ): number {
    return this.opts.revisions.begin({
      deployment: entry.name,
      action,
      principal: change.principal ? { id: change.principal.id, name: change.principal.name } : null,
      reason: change.reason ?? null,
      composeFile: entry.composeFile,
      content: files.content,
      env: files.env,
      model: files.checked.model as Record<string, unknown>,
      modelHash: files.checked.hash,
      jobId: change.jobId ?? null,
      ...extra,
    });
  }

  /** The image each service ran, read from its containers after a run (undefined when the engine could not tell). */
  private async ranImages(entry: Entry, checked: CheckedCompose): Promise<Record<string, RevisionImage> | undefined> {
    try {
      return await imagesOf(this.opts.docker, entry.name, checked.model);
    } catch (err) {
      this.opts.log.warn('images of a revision could not be read', { deployment: entry.name, error: (err as Error).message });
      return undefined;
    }
  }

  /** A start ran the model of a revision that had not run (its files changed while stopped): its images now. */
  private async ranLater(entry: Entry, checked: CheckedCompose): Promise<void> {
    const latest = this.opts.revisions.latest(entry.name);
    if (!latest || latest.ran) return;
    const images = await this.ranImages(entry, checked);
    if (images) this.opts.revisions.ranLater(entry.name, checked.hash, images);
  }

  /** The backup a change asked for, taken before it (null when it asked for none). */
  private async backupFirst(entry: Entry, change: ChangeContext): Promise<string | null> {
    if (!change.backup) return null;
    const backups = requireBackups(this.opts.backups());
    change.progress?.('backing up');
    const id = await backupBefore(
      backups,
      { deployment: entry.name, description: `before a change${change.reason ? `: ${change.reason}` : ''}`, created_by: change.principal?.id ?? null },
      change.signal,
    );
    change.output?.(`backup ${id} taken`);
    return id;
  }

  /** The containers of each service now (to tell, after a change stopped half-way, which it replaced). */
  private async containersNow(name: string): Promise<Map<string, Set<string>>> {
    const out = new Map<string, Set<string>>();
    for (const c of await this.opts.docker.images.ofProject(name)) {
      if (!c.service) continue;
      const set = out.get(c.service) ?? new Set<string>();
      set.add(c.container_id);
      out.set(c.service, set);
    }
    return out;
  }

  /** What a change that failed or was cancelled left: each service's container, its state, and whether it is new. */
  private async leftBy(entry: Entry, services: readonly string[], before: Map<string, Set<string>>): Promise<LeftService[]> {
    const now = await this.opts.docker.images.ofProject(entry.name);
    return services.map((service) => {
      const mine = now.filter((c) => c.service === service);
      const c = mine.find((x) => x.state === 'running') ?? mine[0];
      return {
        service,
        container: c?.name ?? null,
        state: c?.state ?? 'missing',
        image_id: c?.image_id ?? null,
        recreated: !!c && !(before.get(service)?.has(c.container_id) ?? false),
      };
    });
  }

  /**
   * Runs a checked model with a strategy and records it as a revision (under the deployment's lock). A failure or a
   * cancel (the compose process is stopped) leaves the deployment as compose left it: the revision and the job
   * say what that is (each service's container, its state, whether the change replaced it).
   */
  private async deployRun(
    entry: Entry,
    run: {
      action: 'redeploy' | 'rollback';
      checked: CheckedCompose;
      content: string;
      env: Record<string, string>;
      services?: string[];
      strategy: DeployStrategy;
      pins: Record<string, string>;
      rollbackOf?: number;
      backupId: string | null;
      pulled: string[];
    },
    change: ChangeContext,
  ): Promise<DeployResult> {
    const { checked, strategy } = run;
    const signal = change.signal ?? new AbortController().signal;
    const rev = this.beginRevision(entry, run.action, change, run, {
      strategy: strategy.name,
      services: run.services ?? null,
      pins: run.pins,
      rollbackOf: run.rollbackOf ?? null,
      backupId: run.backupId,
    });
    const touched = run.services ?? [...checked.services];
    let before = new Map<string, Set<string>>();
    let fallbacks: { service: string; why: string }[] = [];
    // A swarm stack that ran before the change is rolled back as a whole when the change fails (not when cancelled).
    let stackRan = false;
    try {
      before = await this.containersNow(entry.name);
      stackRan = entry.record.runtime === 'swarm' && (await this.opts.docker.swarm.stackServices(entry.name)).length > 0;
      change.progress?.(`${run.action}: ${strategy.name}`);
      ({ fallbacks } = await strategy.run({
        deployment: entry.name,
        checked,
        services: run.services,
        signal,
        output: (line) => change.output?.(line),
        compose: (command, what) => this.composeRun(checked, command, what, { signal, onLine: change.output }),
      }));
      signal.throwIfAborted();
      entry.failure = null;
    } catch (err) {
      const cancelled = signal.aborted;
      const error = cancelled ? ((signal.reason as Error)?.message ?? 'cancelled') : (err as Error).message;
      let left: LeftService[] | null = null;
      try {
        this.invalidate();
        left = await this.leftBy(entry, touched, before);
      } catch (inspect) {
        this.opts.log.warn('what a stopped change left could not be read', { deployment: entry.name, error: (inspect as Error).message });
      }
      this.opts.revisions.finish(entry.name, rev, { status: cancelled ? 'cancelled' : 'failed', error, ran: true, left });
      change.report?.({ deployment: entry.name, revision: rev, changed: true, left });
      if (!cancelled) this.opts.events.emit('deployment.failed', { name: entry.name, error });
      if (cancelled) throw signal.reason;
      if (!stackRan) throw err;
      const failed = await this.rollBackStack(entry, rev, err, change);
      if (failed instanceof HttpError && failed.extra?.rolled_back_to !== undefined)
        change.report?.({ deployment: entry.name, revision: rev, changed: true, left, ...failed.extra });
      throw failed;
    } finally {
      this.invalidate();
      await this.cache.reconcile().catch(() => undefined);
    }
    const images = (await this.ranImages(entry, checked)) ?? {};
    this.opts.revisions.finish(entry.name, rev, { status: 'succeeded', ran: true, images });
    this.opts.events.emit('deployment.started', { name: entry.name });
    return {
      deployment: entry.name,
      revision: rev,
      strategy: strategy.name,
      services: touched,
      pulled: run.pulled,
      pins: run.pins,
      images,
      backup_id: run.backupId,
      fallbacks,
    };
  }

  /**
   * A change of a swarm deployment whose stack ran before it failed (the deploy, or the stack did not converge):
   * Swarm rolled back (or paused) at most the service whose update failed, and the others may run the new model
   * already. The whole stack goes back to the last revision that succeeded and ran: its files written back, its
   * images pinned (where the tag names another image now), deployed through the guard and converged, as a
   * `rollback` revision of its own (`rollback_of`). Answers the error the change fails with, saying where the stack
   * was left (`rolled_back_to`, `rollback_revision`). Runs under the deployment's lock, inside the failed change.
   */
  private async rollBackStack(entry: Entry, failedRev: number, err: unknown, change: ChangeContext): Promise<unknown> {
    if (entry.record.runtime !== 'swarm' || !(err instanceof HttpError) || err.code !== 'COMPOSE_FAILED') return err;
    const good = this.opts.revisions.lastGood(entry.name, failedRev);
    if (!good) return err;
    const failed = (message: string, extra: Record<string, unknown>) =>
      new HttpError(err.status, err.code, `${err.message}\n${message}`, { ...err.extra, ...extra });
    change.progress?.(`rolling the whole stack back to revision ${good.rev}`);
    change.output?.(`revision ${failedRev} failed: rolling the whole stack back to revision ${good.rev}`);
    let rev: number | null = null;
    try {
      const plan = await this.checkRollback(entry, good.rev);
      // A service whose tag still names the image the revision ran needs no pin: pinned, its spec would differ from
      // the one Swarm just rolled it back to, and its tasks would be replaced for nothing.
      const pins: Record<string, string> = {};
      for (const [service, pin] of Object.entries(plan.pins)) {
        const ran = plan.record.images[service];
        const tag = ran?.image ?? '';
        const now = tag && !tag.startsWith('sha256:') && !tag.includes('@') ? await this.opts.docker.images.inspect(tag) : null;
        if (!now || now.id !== ran?.id) pins[service] = pin;
      }
      if (Object.keys(pins).length !== Object.keys(plan.pins).length) {
        plan.pins = pins;
        plan.checked = await this.check(entry.name, entry.dir, pinContent(plan.record.compose_content, pins), plan.env, entry.record.exceptions);
      }
      const p = this.paths(entry);
      await writeAtomic(p.env, serializeEnv(plan.env), 0o600);
      await writeAtomic(p.compose, plan.record.compose_content);
      entry.record = await this.opts.records.patch(entry.name, { pins: plan.pins });
      await this.dropStaleScale(entry, plan.record.compose_content);
      entry.services = [...plan.checked.services];
      await this.declareCurrent(entry, plan.checked);
      this.opts.events.emit('deployment.updated', { name: entry.name });
      rev = this.beginRevision(
        entry,
        'rollback',
        { principal: change.principal, reason: `automatic: revision ${failedRev} failed`, jobId: change.jobId },
        { content: plan.record.compose_content, env: plan.env, checked: plan.checked },
        { pins: plan.pins, rollbackOf: good.rev, strategy: 'swarm' },
      );
      await this.composeRun(plan.checked, { command: 'up' }, 'rolling the stack back', { onLine: change.output });
      entry.failure = null;
      this.opts.revisions.finish(entry.name, rev, { status: 'succeeded', ran: true, images: await this.ranImages(entry, plan.checked) });
      change.output?.(`the whole stack runs revision ${good.rev} again (revision ${rev})`);
      return failed(`The whole stack was rolled back to revision ${good.rev} (revision ${rev}) and converged.`, {
        rolled_back_to: good.rev,
        rollback_revision: rev,
      });
    } catch (again) {
      const message = (again as Error).message;
      if (rev !== null) this.opts.revisions.finish(entry.name, rev, { status: 'failed', error: message, ran: true });
      this.opts.log.warn('a swarm stack could not be rolled back', { deployment: entry.name, to: good.rev, error: message });
      return failed(`Rolling the whole stack back to revision ${good.rev} failed too: ${message}`, { rolled_back_to: null, rollback_revision: rev });
    } finally {
      this.invalidate();
    }
  }

  /** A change that waited for the lock finds its deployment deleted (or deleted and created again) meanwhile: 404. */
  private assertStill(entry: Entry): void {
    if (this.entries.get(entry.name) !== entry) throw errors.notFound(`deployment '${entry.name}' was deleted meanwhile`);
  }

  /** The checks of a redeploy: the services named exist in the files as they are now (checked). */
  async checkRedeploy(entry: Entry, services?: string[]): Promise<CheckedCompose> {
    this.opts.docker.assertAvailable();
    const { content, env } = await this.source(entry);
    // A redeploy runs the files as they are: the images a rollback pinned are resolved from their tags again.
    const checked = await this.check(entry.name, entry.dir, content, env, entry.record.exceptions);
    const unknown = (services ?? []).filter((s) => !checked.services.includes(s));
    if (unknown.length)
      throw errors.badRequest(`services: '${unknown[0]}' is not a service of deployment '${entry.name}'`, 'VALIDATION_FAILED', { field: 'services' });
    return checked;
  }

  /**
   * Redeploys: pulls the images first when asked, then replaces the containers of the services (all by default)
   * with the strategy, from the files as they are now. A revision.
   */
  async redeploy(name: string, options: { pull?: boolean; services?: string[]; strategy: DeployStrategy }, change: ChangeContext): Promise<DeployResult> {
    const entry = this.require(name);
    const backupId = await this.backupFirst(entry, change);
    return this.lock.run(
      name,
      async () => {
        this.assertStill(entry);
        const { content, env } = await this.source(entry);
        const checked = await this.checkRedeploy(entry, options.services);
        const pulled: string[] = [];
        if (options.pull) {
          const defs = checked.model.services as Record<string, any>;
          for (const service of options.services ?? checked.services) {
            const def = defs[service];
            // A service that builds has no registry image to pull: its image is built when missing.
            if (def?.build !== undefined || typeof def?.image !== 'string') {
              change.output?.(`${service}: builds its image, nothing to pull`);
              continue;
            }
            if (pulled.includes(def.image)) continue;
            change.progress?.(`pulling ${def.image}`);
            await this.opts.docker.images.pull(def.image, { signal: change.signal, onLine: (line) => change.output?.(`${service}: ${line}`) });
            pulled.push(def.image);
          }
        }
        if (Object.keys(entry.record.pins ?? {}).length) {
          entry.record = await this.opts.records.patch(name, { pins: {} });
          change.output?.('images pinned by an earlier rollback are resolved from their tags again');
        }
        return this.deployRun(
          entry,
          { action: 'redeploy', checked, content, env, services: options.services, strategy: options.strategy, pins: {}, backupId, pulled },
          change,
        );
      },
      change.signal,
    );
  }

  /**
   * Every check of a rollback: the revision exists and succeeded, every image it ran is still on the host (409
   * IMAGE_MISSING naming it otherwise), and its files pass the compose guard as they are (the names they use,
   * against today's other projects) and pinned (the model that will run).
   */
  async checkRollback(entry: Entry, revision: number): Promise<RollbackPlan> {
    this.opts.docker.assertAvailable();
    const record = this.opts.revisions.get(entry.name, revision);
    if (!record) throw errors.notFound(`deployment '${entry.name}' has no revision ${revision}`, 'REVISION_NOT_FOUND');
    if (record.status !== 'succeeded')
      throw errors.conflict(
        `revision ${revision} of '${entry.name}' ${record.status === 'pending' ? 'is still running' : `did not succeed (${record.status})`}: only a revision that succeeded can be gone back to`,
        'REVISION_NOT_RESTORABLE',
        {
          status: record.status,
        },
      );
    const env = this.opts.revisions.env(record);
    const pins: Record<string, string> = {};
    const unpinned: { service: string; why: string }[] = [];
    const services = Object.keys((record.model?.services ?? {}) as Record<string, unknown>);
    for (const service of services) {
      const image = record.images[service];
      const ref = image ? pinOf(image) : null;
      if (!image || !ref) {
        unpinned.push({
          service,
          why: record.ran
            ? 'it had no container when the revision ran'
            : 'the revision did not run (the deployment was stopped): its image is resolved from its tag now',
        });
        continue;
      }
      // The registry digest first, else the image id (both name exactly the image that ran).
      let pin = ref;
      let found = await this.opts.docker.images.inspect(ref);
      if (!found && image.id && image.id !== ref) {
        found = await this.opts.docker.images.inspect(image.id);
        pin = image.id;
      }
      if (!found)
        throw errors.conflict(
          `the image service '${service}' ran in revision ${revision} (${ref}${image.image !== ref ? `, then tagged ${image.image}` : ''}) is no longer on this host; pull it again or choose another revision`,
          'IMAGE_MISSING',
          { service, image: ref },
        );
      pins[service] = pin;
    }
    // The files as they were, checked as they are now (the image names they use, against today's other projects),
    // then the pinned model that runs.
    await this.check(entry.name, entry.dir, record.compose_content, env, entry.record.exceptions);
    const checked = await this.check(entry.name, entry.dir, pinContent(record.compose_content, pins), env, entry.record.exceptions);
    return { record, env, pins, unpinned, checked, current: await this.source(entry) };
  }

  /**
   * Goes back to a revision: its compose file and `.env` are written back, and it runs with each service pinned to
   * the image that revision ran. Volumes are not touched. A revision itself.
   */
  async rollback(name: string, revision: number, options: { strategy: DeployStrategy }, change: ChangeContext): Promise<DeployResult> {
    const entry = this.require(name);
    const backupId = await this.backupFirst(entry, change);
    return this.lock.run(
      name,
      async () => {
        // Checked again under the lock: an image may have gone, a file of the folder changed.
        this.assertStill(entry);
        const plan = await this.checkRollback(entry, revision);
        const { record, env, pins, checked } = plan;
        const p = this.paths(entry);
        await writeAtomic(p.env, serializeEnv(env), 0o600);
        await writeAtomic(p.compose, record.compose_content);
        entry.record = await this.opts.records.patch(name, { pins });
        await this.dropStaleScale(entry, record.compose_content);
        entry.services = [...checked.services];
        await this.declareCurrent(entry, checked);
        this.invalidate();
        this.opts.events.emit('deployment.updated', { name });
        for (const u of plan.unpinned) change.output?.(`${u.service}: not pinned (${u.why})`);
        return this.deployRun(
          entry,
          { action: 'rollback', checked, content: record.compose_content, env, strategy: options.strategy, pins, rollbackOf: revision, backupId, pulled: [] },
          change,
        );
      },
      change.signal,
    );
  }
}
