/**
 * The `deployments` service: deployment folders, their lifecycle through compose, and their state from the cache.
 * Routes and other plugins both go through it.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  errors, HttpError,
  type ContainerSummary, type DeploymentInfo, type DeploymentsService, type DockerService, type EventBus,
  type IdentityService, type Logger, type Principal,
} from '@agent/sdk';
import {
  createFolder, DEFAULT_COMPOSE, ENV_FILE, findComposeFile, folderCreatedAt, META_FILE, readMeta, readText, replaceFiles,
  writeAtomic, writeMeta, type DeploymentMeta,
} from './files.js';
import { envProblems, parseEnv, serializeEnv } from './env-file.js';
import { parseCompose } from './compose-check.js';
import { checkHostSafety } from './host-safety.js';
import { deploymentStatus, serviceStates, StateCache } from './state.js';
import { KeyedLock } from './lock.js';

export const NAME_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export interface Entry {
  name: string;
  dir: string;
  composeFile: string;
  meta: DeploymentMeta;
  /** Service names from the compose file (cached; refreshed whenever the file is written or re-read). */
  services: string[];
  /** Why the last start failed, until a start or stop succeeds (a deployment that never came up is `failed`). */
  failure: string | null;
}

export interface ManagerOptions {
  root: string;
  docker: DockerService;
  cache: StateCache;
  events: EventBus;
  identity: () => IdentityService | undefined;
  log: Logger;
  hostSafety: () => boolean;
}

export interface CreateInput {
  name: string;
  compose_content: string;
  env_vars?: { key: string; value: string }[];
  auto_start?: boolean;
  template?: string | null;
}

export interface CreateResult {
  info: DeploymentInfo;
  start_error: string | null;
}

const toVars = (list: { key: string; value: string }[] = []) => Object.fromEntries(list.map((v) => [v.key, v.value]));

/** The last lines of compose output, for error messages. */
const tailOf = (output: string, lines = 15) => output.trim().split('\n').slice(-lines).join('\n');

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

  constructor(readonly opts: ManagerOptions) {
    opts.cache.onChange(() => this.invalidate());
    opts.docker.compose.command().then((command) => {
      this.containerNameSeparator = command.length === 1 ? '_' : '-';
    }, () => { /* no compose: keep v2 naming */ });
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

  /** Finds deployment folders (a compose file, not marked deleted) under the root. */
  async discover(): Promise<void> {
    await mkdir(this.opts.root, { recursive: true, mode: 0o750 });
    for (const dirent of await readdir(this.opts.root, { withFileTypes: true })) {
      if (!dirent.isDirectory() || !NAME_RE.test(dirent.name)) continue;
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
    const meta0 = await readMeta(dir);
    if (meta0?.deleted_at) {
      this.entries.delete(name);
      this.invalidate();
      return null;
    }
    const composeName = meta0 && existsSync(join(dir, meta0.compose_file)) ? meta0.compose_file : findComposeFile(dir);
    if (!composeName) {
      this.entries.delete(name);
      this.invalidate();
      return null;
    }
    const meta: DeploymentMeta = meta0 ?? {
      created_at: await folderCreatedAt(dir), created_by: null, template: null, compose_file: composeName, log_sources: [], deleted_at: null,
    };
    meta.compose_file = composeName;
    if (!meta0) await writeMeta(dir, meta);
    let services: string[] = [];
    try {
      services = parseCompose((await readText(join(dir, composeName))) ?? '', name).services;
    } catch (err) {
      this.opts.log.warn('compose file of a deployment does not parse', { name, error: (err as Error).message });
    }
    const entry: Entry = { name, dir, composeFile: composeName, meta, services, failure: this.entries.get(name)?.failure ?? null };
    this.entries.set(name, entry);
    this.invalidate();
    return entry;
  }

  require(name: string): Entry {
    if (!NAME_RE.test(name)) throw errors.badRequest(`invalid deployment name '${name}'`, 'VALIDATION_FAILED', { field: 'name' });
    const entry = this.entries.get(name);
    if (!entry) throw errors.notFound(`deployment '${name}' not found`);
    return entry;
  }

  paths(entry: Entry) {
    return { compose: join(entry.dir, entry.composeFile), env: join(entry.dir, ENV_FILE), meta: join(entry.dir, META_FILE) };
  }

  info(entry: Entry): DeploymentInfo {
    const containers = this.cache.containers(entry.name);
    const p = this.paths(entry);
    return {
      name: entry.name,
      path: entry.dir,
      status: deploymentStatus(entry.services, containers, this.cache.engineUp(), entry.failure !== null),
      created_at: entry.meta.created_at,
      services: serviceStates(entry.services, containers),
      compose_file: p.compose,
      env_file: p.env,
    };
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

  async compose(name: string): Promise<{ content: string; parsed: Record<string, any> }> {
    const entry = this.require(name);
    const content = (await readText(this.paths(entry).compose)) ?? '';
    return { content, parsed: parseCompose(content, name).parsed };
  }

  async env(name: string): Promise<Record<string, string>> {
    return parseEnv((await readText(this.paths(this.require(name)).env)) ?? '');
  }

  async serviceContainer(name: string, service: string): Promise<ContainerSummary | null> {
    this.require(name);
    const list = await this.opts.docker.listContainers({ all: true, deployment: name });
    const mine = list.filter((c) => c.service === service);
    return mine.find((c) => c.state === 'running') ?? mine[0] ?? null;
  }

  // ---- validation ------------------------------------------------------------------------------------------------

  /** Parses and checks compose content and env for a deployment folder; throws 400 with the problem. */
  validate(name: string, dir: string, composeContent: string, vars: Record<string, string>) {
    const checked = parseCompose(composeContent, name);
    if (this.opts.hostSafety()) checkHostSafety(checked.parsed, dir, vars);
    return checked;
  }

  // ---- compose ---------------------------------------------------------------------------------------------------

  async composeRun(entry: Entry, args: string[], what: string): Promise<string> {
    const started = Date.now();
    const release = this.cache.hold(entry.name);
    let result;
    try {
      result = await this.opts.docker.compose.run(entry.name, entry.dir, ['-f', entry.composeFile, ...args]);
    } finally {
      release();
    }
    this.opts.log.debug('compose run', { deployment: entry.name, args: args.join(' '), exit_code: result.exit_code, ms: Date.now() - started });
    if (result.exit_code !== 0) {
      throw new HttpError(502, 'COMPOSE_FAILED', `${what} of '${entry.name}' failed (exit ${result.exit_code}): ${tailOf(result.output)}`);
    }
    return result.output;
  }

  /** `up -d`: creates what is missing and recreates services whose configuration changed. */
  private async up(entry: Entry, extra: string[] = []): Promise<void> {
    // Checked again at every start: a container may have turned a bind-mounted folder into a symlink out of it.
    const p = this.paths(entry);
    this.validate(entry.name, entry.dir, (await readText(p.compose)) ?? '', parseEnv((await readText(p.env)) ?? ''));
    try {
      await this.composeRun(entry, ['up', '-d', '--remove-orphans', ...extra], 'starting');
      entry.failure = null;
    } catch (err) {
      entry.failure = (err as Error).message;
      throw err;
    } finally {
      this.invalidate();
      await this.cache.reconcile();
    }
  }

  // ---- lifecycle -------------------------------------------------------------------------------------------------

  async create(input: CreateInput, principal: Principal | null): Promise<DeploymentInfo> {
    return (await this.createWithResult(input, principal)).info;
  }

  async createWithResult(input: CreateInput, principal: Principal | null): Promise<CreateResult> {
    const { name } = input;
    if (!NAME_RE.test(name)) throw errors.badRequest(`name: invalid deployment name '${name}'`, 'VALIDATION_FAILED', { field: 'name' });
    const problem = envProblems(input.env_vars ?? []);
    if (problem) throw errors.badRequest(problem, 'VALIDATION_FAILED', { field: 'env_vars' });
    if (input.auto_start) this.opts.docker.assertAvailable();
    return this.lock.run(name, async () => {
      if (this.entries.has(name)) throw errors.conflict(`deployment '${name}' already exists`, 'DEPLOYMENT_EXISTS');
      const dir = join(this.opts.root, name);
      const vars = toVars(input.env_vars);
      this.validate(name, dir, input.compose_content, vars);
      await mkdir(this.opts.root, { recursive: true, mode: 0o750 });
      const meta: DeploymentMeta = {
        created_at: new Date().toISOString(), created_by: principal?.id ?? null, template: input.template ?? null,
        compose_file: DEFAULT_COMPOSE, log_sources: [], deleted_at: null,
      };
      const files = {
        [DEFAULT_COMPOSE]: { content: input.compose_content },
        [ENV_FILE]: { content: serializeEnv(vars), mode: 0o600 },
        [META_FILE]: { content: JSON.stringify(meta, null, 2) + '\n' },
      };
      if (existsSync(dir)) {
        // A folder kept by an earlier delete (without remove_files) is reused: its data stays, its files are replaced.
        const old = await readMeta(dir);
        if (!old?.deleted_at) throw errors.conflict(`folder '${dir}' already exists and is not a deleted deployment`, 'DEPLOYMENT_EXISTS');
        for (const stale of [findComposeFile(dir)]) if (stale && stale !== DEFAULT_COMPOSE) await rm(join(dir, stale), { force: true });
        await replaceFiles(dir, files);
      } else {
        try {
          await createFolder(this.opts.root, name, files);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'ENOTEMPTY' || code === 'EEXIST') throw errors.conflict(`deployment '${name}' already exists`, 'DEPLOYMENT_EXISTS');
          throw err;
        }
      }
      const entry = (await this.load(name))!;
      if (principal) await this.opts.identity()?.grants.grantCreator(principal, name);
      this.opts.events.emit('deployment.created', { name });
      let startError: string | null = null;
      if (input.auto_start) {
        try {
          await this.up(entry);
          this.opts.events.emit('deployment.started', { name });
        } catch (err) {
          startError = (err as Error).message;
          this.opts.events.emit('deployment.failed', { name, error: startError });
        }
      }
      return { info: this.info(entry), start_error: startError };
    });
  }

  async update(name: string, input: { compose_content?: string; env_vars?: { key: string; value: string }[] }): Promise<{ info: DeploymentInfo; recreated: boolean }> {
    const entry = this.require(name);
    if (input.compose_content === undefined && input.env_vars === undefined) throw errors.badRequest('body: give compose_content and/or env_vars', 'VALIDATION_FAILED');
    const problem = envProblems(input.env_vars ?? []);
    if (problem) throw errors.badRequest(problem, 'VALIDATION_FAILED', { field: 'env_vars' });
    return this.lock.run(name, async () => {
      const p = this.paths(entry);
      const content = input.compose_content ?? (await readText(p.compose)) ?? '';
      const vars = input.env_vars ? toVars(input.env_vars) : parseEnv((await readText(p.env)) ?? '');
      const checked = this.validate(name, entry.dir, content, vars);
      await this.cache.reconcile();
      const status = this.info(entry).status;
      const wasRunning = status === 'running' || status === 'partial';
      if (wasRunning) this.opts.docker.assertAvailable();
      if (input.env_vars) await writeAtomic(p.env, serializeEnv(vars), 0o600);
      if (input.compose_content !== undefined) await writeAtomic(p.compose, content);
      entry.services = checked.services;
      this.invalidate();
      this.opts.events.emit('deployment.updated', { name });
      if (wasRunning) await this.up(entry);
      return { info: this.info(entry), recreated: wasRunning };
    });
  }

  async setEnv(name: string, vars: Record<string, string | null>, options: { recreate?: boolean } = {}): Promise<void> {
    const entry = this.require(name);
    const list = Object.entries(vars).filter(([, v]) => v !== null).map(([key, value]) => ({ key, value: value! }));
    const problem = envProblems(list, 'vars');
    if (problem) throw errors.badRequest(problem);
    await this.lock.run(name, async () => {
      const p = this.paths(entry);
      const current = parseEnv((await readText(p.env)) ?? '');
      for (const [k, v] of Object.entries(vars)) {
        if (v === null) delete current[k];
        else current[k] = v;
      }
      this.validate(name, entry.dir, (await readText(p.compose)) ?? '', current);
      await writeAtomic(p.env, serializeEnv(current), 0o600);
      this.opts.events.emit('deployment.updated', { name });
      if (options.recreate) {
        await this.cache.reconcile();
        const status = this.info(entry).status;
        if (status === 'running' || status === 'partial') await this.up(entry);
      }
    });
  }

  async start(name: string): Promise<void> {
    const entry = this.require(name);
    this.opts.docker.assertAvailable();
    await this.lock.run(name, async () => {
      try {
        await this.up(entry, ['--no-recreate']);
      } catch (err) {
        this.opts.events.emit('deployment.failed', { name, error: (err as Error).message });
        throw err;
      }
      this.opts.events.emit('deployment.started', { name });
    });
  }

  async stop(name: string): Promise<void> {
    const entry = this.require(name);
    this.opts.docker.assertAvailable();
    await this.lock.run(name, async () => {
      try {
        await this.composeRun(entry, ['stop'], 'stopping');
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
        // `restart` only touches existing containers: bring missing ones up afterwards.
        if (hasContainers) await this.composeRun(entry, ['restart'], 'restarting');
        await this.up(entry, ['--no-recreate']);
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
      const leftovers = this.cache.containers(name).length > 0 || options.remove_volumes || (await this.opts.docker.networks.list({ deployment: name })).length > 0;
      if (leftovers) {
        try {
          await this.composeRun(entry, ['down', '--remove-orphans', ...(options.remove_volumes ? ['--volumes'] : [])], 'removing');
        } finally {
          await this.cache.reconcile();
        }
      }
      if (options.remove_files) await rm(entry.dir, { recursive: true, force: true });
      else await writeMeta(entry.dir, { ...entry.meta, deleted_at: new Date().toISOString() });
      this.entries.delete(name);
      this.invalidate();
      await this.opts.identity()?.grants.removeDeployment(name);
      this.opts.events.emit('deployment.deleted', { name, removed_files: options.remove_files ?? false });
    });
  }

  async refresh(name: string): Promise<void> {
    if (!NAME_RE.test(name)) throw errors.badRequest(`invalid deployment name '${name}'`);
    await this.lock.run(name, async () => {
      const entry = await this.load(name);
      if (!entry) throw errors.notFound(`deployment '${name}' not found`);
      await this.cache.reconcile();
    });
  }

  /** Writes the metadata of a deployment (log sources). */
  async saveMeta(entry: Entry, patch: Partial<DeploymentMeta>): Promise<void> {
    await this.lock.run(entry.name, async () => {
      entry.meta = { ...entry.meta, ...patch };
      await writeMeta(entry.dir, entry.meta);
    });
  }
}
