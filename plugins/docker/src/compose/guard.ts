/**
 * The one path every compose call of the agent takes. For a project it
 *   1. reads nothing itself from the project folder but what the caller read safely (and env files, see source.ts),
 *   2. asks compose for its canonical model (`config`) with a fixed environment, from private copies,
 *   3. checks that model (policy.ts),
 *   4. writes the checked model where no container can write and runs compose on exactly that file, with the
 *      project folder given explicitly.
 * A container that edits the files of its folder changes nothing that runs until the caller checks them again.
 * Checked models are kept by content hash, so an unchanged project costs no `config` call at the next start.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { parse } from 'yaml';
import { errors, HttpError, isInside, readTextInside, type Logger } from '@agent/sdk';
import { type CheckedCompose, type ComposeCommand, type ComposeFlavour, type ComposeRunResult, type ComposeSource, type HostSafetyViolation } from '../api.js';
import { copyContext } from './build-context.js';
import { flavourOf, interpolationEnv, runCompose, type ComposeRunOptions } from './cli.js';
import { ConfigTimeout, pythonOf, WarmComposeConfig, type ConfigResult } from './warm-config.js';
import { checkDockerfile } from './dockerfile.js';
import {
  checkModel,
  containersAbove,
  containersBelow,
  normalImage,
  ownsImageName,
  repository,
  recheckHostPaths,
  STAMP_LABEL,
  type BuiltImage,
  type ExistingContainer,
  type HostPath,
  type ModelNode,
  type Pin,
  type PolicyResult,
} from './policy.js';
import { envFileKeys, prepareSource, type PreparedSource } from './source.js';
import { checkSwarm, withSwarmDefaults } from './swarm-policy.js';
import { envSecretsOf, secretValues, SECRET_LABEL, withEnvSecrets } from './swarm-secrets.js';
import { STACK_LABEL } from '../swarm.js';

/** Part of every content hash: a change of the policy's code must check every project again. */
const POLICY_VERSION = 'policy-2';
const PROJECT = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const SERVICE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;
/** Models kept per project besides the one that last ran (plans preview several versions). */
const KEEP = 4;

/** What the guard asks the engine (the docker plugin's engine provides it; tests may give a real one of theirs). */
export interface GuardEngine {
  /** Containers in every state, of one compose project or of all. */
  containers(project?: string): Promise<ExistingContainer[]>;
  /** Networks or volumes of these names that exist, with their compose project label (null: none). */
  objects(kind: 'network' | 'volume', names: string[]): Promise<{ name: string; project: string | null }[]>;
  imageExists(image: string): Promise<boolean>;
  /** Removes a container at once (killed if it runs: it must not outlive the decision). */
  removeContainer(id: string): Promise<void>;
  /** Creates a swarm secret unless one of that name exists (secrets are immutable: the name says the value). */
  ensureSecret(name: string, value: string, labels: Record<string, string>): Promise<void>;
}

export interface GuardOptions {
  /** Private folder of the guard (inside the agent's data folder, never mounted into containers). */
  root: string;
  dockerHost: string | null;
  /** The detected compose command; rejects with 503 COMPOSE_UNAVAILABLE. */
  command(): Promise<string[]>;
  engine: GuardEngine;
  log: Logger;
}

/** What the guard keeps about a checked model besides what callers see. */
interface Kept {
  public: CheckedCompose;
  hostPaths: HostPath[];
  exceptions: string[];
  enforce: boolean;
  /** `COMPOSE_PROFILES` of the project's environment: which profiles `up` starts. */
  profiles: string | null;
  envCopies: string[];
  builtImages: BuiltImage[];
  images: { service: string; image: string }[];
  ownNames: PolicyResult['ownNames'];
  runtime: 'compose' | 'swarm';
}

interface KeptFile {
  project: string;
  dir: string;
  hash: string;
  flavour: ComposeFlavour;
  model: ModelNode;
  granted: string[];
  violations: HostSafetyViolation[];
  hostPaths: HostPath[];
  exceptions: string[];
  enforce: boolean;
  profiles: string | null;
  envCopies: string[];
  builtImages: BuiltImage[];
  images: { service: string; image: string }[];
  ownNames: PolicyResult['ownNames'];
  /** Absent in files kept before swarm deployments existed: compose. */
  runtime?: 'compose' | 'swarm';
}

/** Images a project builds and runs, from its kept models (for the names-are-owned rule across projects). */
interface ImageUse {
  built: Set<string>;
  used: Set<string>;
}

/** The model that runs: compose's model with the policy's pins applied (host paths as their real paths, …). */
function applyPins(model: ModelNode, pins: Pin[]): ModelNode {
  const out = structuredClone(model);
  for (const { path, value } of pins) {
    let at: ModelNode[string] = out;
    for (const step of path.slice(0, -1)) at = at?.[step];
    const last = path[path.length - 1]!;
    if (!at || typeof at !== 'object') continue;
    if (Array.isArray(at) || last in at) at[last] = value;
    else {
      // A new key (an image name for a build): placed where compose would write it.
      const parent = path.slice(0, -2).reduce((o: ModelNode[string], step) => o?.[step], out);
      if (parent && typeof parent === 'object') parent[path[path.length - 2]!] = withKey(at, String(last), value);
    }
  }
  return out;
}

/**
 * Stamps every service with the checked model it comes from (a label, so compose's own configuration hash changes
 * with it and `up` recreates the container): a container whose stamp differs was created from another model, or
 * under other exceptions, and is never started again as it is.
 */
function stampServices(model: ModelNode, granted: string[]): Record<string, string> {
  const stamps: Record<string, string> = {};
  for (const [name, def] of Object.entries((model.services ?? {}) as ModelNode)) {
    if (!def || typeof def !== 'object') continue;
    const stamp = createHash('sha256')
      .update(JSON.stringify([POLICY_VERSION, granted, def]))
      .digest('hex')
      .slice(0, 32);
    const labels = Array.isArray(def.labels)
      ? [...def.labels.filter((l: unknown) => !String(l).startsWith(`${STAMP_LABEL}=`)), `${STAMP_LABEL}=${stamp}`]
      : withKey({ ...(def.labels ?? {}) }, STAMP_LABEL, stamp);
    (model.services as Record<string, unknown>)[name] = withKey(def, 'labels', labels);
    stamps[name] = stamp;
  }
  return stamps;
}

/**
 * `object` with `key` set; in its place among the others when they are in order (compose writes its model with
 * sorted keys: the model that runs reads back exactly as it was checked).
 */
function withKey<T extends Record<string, unknown>>(object: T, key: string, value: unknown): T {
  const keys = Object.keys(object).filter((k) => k !== key);
  const sorted = keys.every((k, i) => i === 0 || keys[i - 1]! <= k);
  if (!sorted) return { ...object, [key]: value };
  const out: Record<string, unknown> = {};
  for (const k of [...keys, key].sort()) out[k] = k === key ? value : object[k];
  return out as T;
}

/** The stamp a service of a checked model carries. */
function stampOf(model: Readonly<ModelNode>, service: string): string | null {
  const labels = model.services?.[service]?.labels;
  if (Array.isArray(labels)) {
    const entry = labels.map(String).find((l) => l.startsWith(`${STAMP_LABEL}=`));
    return entry ? entry.slice(STAMP_LABEL.length + 1) : null;
  }
  return typeof labels?.[STAMP_LABEL] === 'string' ? labels[STAMP_LABEL] : null;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Every string value of a model, mapped (keys are data compose never interpolates). */
function mapStrings(value: unknown, fn: (s: string) => string): ModelNode[string] {
  if (typeof value === 'string') return fn(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, fn));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = mapStrings(v, fn);
    return out;
  }
  return value;
}

/**
 * The checked model as the file compose runs: JSON (which both compose flavours read as YAML, without any of the
 * ambiguity of plain YAML scalars), every `$` doubled so compose's interpolation gives back exactly the checked
 * value, and characters some YAML readers refuse written as escapes.
 */
export function serializeModel(model: Record<string, unknown>): string {
  const escaped = mapStrings(model, (s) => s.replace(/\$/g, '$$$$'));
  return (
    JSON.stringify(escaped, null, 1).replace(/[\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) +
    '\n'
  );
}

/** `.env` text both compose flavours read back as the same values. */
function envText(vars: Record<string, string>): string {
  return (
    Object.entries(vars)
      .map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
      .join('\n') + '\n'
  );
}

function hostSafetyError(violations: HostSafetyViolation[], prepared: PreparedSource | null): HttpError {
  const first = violations[0]!;
  const where =
    prepared && first.service
      ? prepared.position(['services', first.service, first.key.split('.')[0]!])
      : prepared
        ? prepared.position(first.key.split('.'))
        : '';
  const more = violations.length > 1 ? ` (and ${violations.length - 1} more, see \`violations\`)` : '';
  return errors.badRequest(
    `${first.service ? `service '${first.service}': ` : ''}${first.key}: ${first.why}${where}; refused by the host-safety policy, an admin may grant the exception '${first.exception}'${more}`,
    'HOST_SAFETY',
    { service: first.service, key: first.key, value: first.value, exception: first.exception, violations },
  );
}

export class ComposeGuard {
  private readonly issued = new WeakMap<CheckedCompose, Kept>();
  private readonly byHash = new Map<string, Kept>();
  /** Images of every project's kept models (null until first needed). */
  private imageUse: Map<string, ImageUse> | null = null;
  private escapedOutput: Promise<boolean> | null = null;
  /**
   * The values of the `.env` secrets of swarm models checked lately, by model hash (in memory only: a stack deploy
   * creates the secrets its model names from them; a model loaded from disk gets them at its next check).
   */
  private readonly stackSecrets = new Map<string, { project: string; values: Map<string, string> }>();
  private secretKey: Promise<Buffer> | null = null;

  /** The warm parser of the compose command (v1 as a Python script), null when `config` runs compose itself. */
  private warm: { program: string; parser: WarmComposeConfig | null; failures: number } | null = null;

  constructor(private readonly opts: GuardOptions) {}

  /** Ends what the guard keeps running (the warm parser): the agent stops. */
  close(): void {
    this.warm?.parser?.close();
  }

  /**
   * `config` of `args` in `cwd` with exactly `env`: through the warm parser where there is one (see warm-config.ts),
   * else compose itself. A parser that fails three times is given up for compose itself.
   */
  private async config(command: string[], cwd: string, args: string[], env: Record<string, string>): Promise<ConfigResult> {
    if (this.warm?.program !== command[0]) {
      this.warm?.parser?.close();
      const python = command.length === 1 ? pythonOf(command[0]!) : null;
      this.warm = { program: command[0]!, parser: python ? new WarmComposeConfig(python, command[0]!, this.opts.log) : null, failures: 0 };
    }
    const warm = this.warm;
    if (warm.parser) {
      try {
        return await warm.parser.run(cwd, args, env);
      } catch (err) {
        if (err instanceof ConfigTimeout) throw errors.badRequest(`compose_content: ${err.message}`, 'INVALID_COMPOSE', { field: 'compose_content' });
        this.opts.log.warn('the warm compose parser failed; running compose itself', { error: (err as Error).message });
        if (++warm.failures >= 3) {
          warm.parser.close();
          warm.parser = null;
        }
      }
    }
    return runCompose(command, this.opts.dockerHost, cwd, args, { env, stdout: true });
  }

  /** The key of the digests in the names of `.env` secrets (random, created once, 0600 in the guard's folder). */
  private stackSecretKey(): Promise<Buffer> {
    this.secretKey ??= (async () => {
      const file = join(this.opts.root, '.stack-secrets.key');
      const known = await readFile(file, 'utf8').catch(() => '');
      if (/^[0-9a-f]{64}$/.test(known)) return Buffer.from(known, 'hex');
      await mkdir(this.opts.root, { recursive: true, mode: 0o700 });
      const key = randomBytes(32);
      await writeAtomic(file, key.toString('hex'));
      return key;
    })();
    this.secretKey.catch(() => {
      this.secretKey = null;
    });
    return this.secretKey;
  }

  /** Keeps the values of a swarm model's `.env` secrets for its deploy (the newest 8 models of a project). */
  private keepSecretValues(project: string, hash: string, model: Readonly<ModelNode>, env: Readonly<Record<string, string>>): void {
    const values = secretValues(model, env);
    this.stackSecrets.delete(hash);
    if (!values.size) return;
    this.stackSecrets.set(hash, { project, values });
    const mine = [...this.stackSecrets.entries()].filter(([, v]) => v.project === project);
    for (const [old] of mine.slice(0, -8)) this.stackSecrets.delete(old);
  }

  async flavour(): Promise<ComposeFlavour> {
    return flavourOf(await this.opts.command());
  }

  private projectDir(project: string): string {
    if (!PROJECT.test(project)) throw errors.badRequest(`invalid compose project name '${project}'`);
    return join(this.opts.root, project);
  }

  /** Whether `config` writes `$` doubled (v1 does): learnt once from a probe file. */
  private dollarsEscaped(command: string[]): Promise<boolean> {
    this.escapedOutput ??= (async () => {
      await mkdir(this.opts.root, { recursive: true, mode: 0o700 });
      const dir = await mkdtemp(join(this.opts.root, '.probe-'));
      try {
        await writeFile(join(dir, 'probe.yml'), 'services:\n  probe:\n    image: probe\n    command: "a $$b"\n');
        const r = await this.config(
          command,
          dir,
          ['-f', join(dir, 'probe.yml'), '--project-directory', dir, '-p', 'probe', 'config'],
          interpolationEnv(flavourOf(command), dir),
        );
        if (r.exit_code !== 0) throw errors.unavailable(`compose does not work: ${r.output.trim().split('\n').slice(-3).join(' ')}`, 'COMPOSE_UNAVAILABLE');
        return /a \$\$b/.test(r.stdout);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    })();
    this.escapedOutput.catch(() => {
      this.escapedOutput = null;
    });
    return this.escapedOutput;
  }

  async check(source: ComposeSource): Promise<CheckedCompose> {
    const projectDir = this.projectDir(source.project);
    if (!isAbsolute(source.dir)) throw errors.internal(`compose project folder must be absolute: ${source.dir}`);
    const dir = resolve(source.dir);
    const command = await this.opts.command();
    const flavour = flavourOf(command);
    const enforce = source.enforce !== false;
    const env = source.env ?? {};
    const exceptions = [...new Set(source.exceptions ?? [])].sort();
    const envDir = join(projectDir, 'env');
    const prepared = await prepareSource({
      project: source.project,
      dir,
      content: source.content,
      env,
      enforce,
      envDir,
      files: source.files,
      dropName: flavour === 'v1',
    });
    const swarm = source.runtime === 'swarm';
    // The runtime is part of what was checked (a swarm model passes more rules and runs with update defaults); compose
    // hashes stay what they were, so no kept model is checked again for it.
    const hash = sha256(
      JSON.stringify([
        POLICY_VERSION,
        flavour,
        source.project,
        dir,
        prepared.text,
        Object.entries(env).sort(),
        exceptions,
        enforce,
        ...(swarm ? ['swarm'] : []),
      ]),
    );

    const known = this.byHash.get(hash) ?? (await this.load(source.project, hash));
    if (known) {
      if (swarm) this.keepSecretValues(source.project, hash, known.public.model as ModelNode, env);
      return known.public;
    }

    await mkdir(envDir, { recursive: true, mode: 0o700 });
    for (const copy of prepared.envCopies) {
      const path = join(envDir, copy.name);
      if (!existsSync(path)) await writeAtomic(path, copy.content);
    }
    const staging = await mkdtemp(join(projectDir, '.check-'));
    let model: ModelNode;
    try {
      await writeFile(join(staging, 'source.yml'), prepared.text, { mode: 0o600 });
      await writeFile(join(staging, 'source.env'), envText(env), { mode: 0o600 });
      // Compose builds its model against a stand-in of the project folder: it never reads the real one (which a
      // container may be rearranging), and a folder that does not exist yet (a deployment being created) or lacks a
      // build context so far is no reason to refuse a valid file (compose v1 insists that build contexts exist).
      const standIn = join(staging, 'project');
      await mkdir(standIn, { mode: 0o700 });
      for (const context of prepared.buildContexts) {
        if (isAbsolute(context) || /^[a-z][a-z0-9+.-]*:\/\/|^git@/i.test(context)) continue;
        const at = resolve(standIn, context);
        if (isInside(standIn, at)) await mkdir(at, { recursive: true, mode: 0o700 });
      }
      const r = await this.config(
        command,
        staging,
        ['--env-file', join(staging, 'source.env'), '-f', join(staging, 'source.yml'), '--project-directory', standIn, '-p', source.project, 'config'],
        interpolationEnv(flavour, join(staging, 'docker-config')),
      );
      // Paths come back below the stand-in (and, for extended services, below the file's own folder): both are
      // the project folder.
      const unstage = (s: string) => s.split(`${staging}/source.yml`).join('the compose file').split(standIn).join(dir).split(staging).join(dir);
      if (r.exit_code !== 0) {
        const message = unstage(r.output)
          .trim()
          .split('\n')
          .filter((l) => !/^\s*$/.test(l))
          .slice(-6)
          .join('\n');
        throw errors.badRequest(`compose_content: compose refused the file: ${message}`, 'INVALID_COMPOSE', { field: 'compose_content' });
      }
      const raw = parse(r.stdout, { version: flavour === 'v1' ? '1.1' : '1.2', merge: true, maxAliasCount: -1 }) as ModelNode;
      const escaped = await this.dollarsEscaped(command);
      model = mapStrings(raw, (s) => unstage(escaped ? s.replace(/\$\$/g, '$') : s));
    } finally {
      await rm(staging, { recursive: true, force: true });
    }

    const policy = checkModel(model, { project: source.project, dir, exceptions: new Set(exceptions) });
    const violations: HostSafetyViolation[] = [...policy.violations];
    violations.push(...this.unexpectedEnvironment(model, prepared, envDir));
    const runModel = applyPins(model, policy.pins);
    if (swarm) {
      const rules = checkSwarm(model, new Set(exceptions));
      violations.push(...rules.violations);
      policy.granted = [...new Set([...policy.granted, ...rules.granted])].sort();
      withSwarmDefaults(runModel, source.project);
      withEnvSecrets(runModel, source.project, env, await this.stackSecretKey());
    }
    stampServices(runModel, policy.granted);
    violations.push(...(await this.dockerfiles(source.project, dir, runModel)));
    violations.push(...(await this.foreignNames(source.project, { ...policy, services: Object.keys(runModel.services ?? {}) }, new Set(exceptions))));
    for (const f of prepared.findings) violations.push({ service: null, key: f.key, value: f.value, exception: f.key, why: f.why });
    if (enforce && violations.length) throw hostSafetyError(violations, prepared);

    const envValue = env.COMPOSE_PROFILES;
    const kept: KeptFile = {
      project: source.project,
      dir,
      hash,
      flavour,
      model: runModel,
      granted: policy.granted,
      violations: enforce ? [] : violations,
      hostPaths: policy.hostPaths,
      exceptions,
      enforce,
      profiles: envValue === undefined ? null : envValue,
      envCopies: prepared.envCopies.map((c) => c.name),
      builtImages: policy.builtImages,
      images: policy.images,
      ownNames: policy.ownNames,
      runtime: swarm ? 'swarm' : 'compose',
    };
    await writeAtomic(join(projectDir, `${hash}.meta.json`), JSON.stringify(kept));
    await this.prune(source.project, hash);
    if (swarm) this.keepSecretValues(source.project, hash, runModel, env);
    return this.remember(kept).public;
  }

  /**
   * Environment compose took from somewhere the agent did not hand it (a file the source scan could not see):
   * every variable of the model must come from an `environment` section or one of the private env file copies.
   */
  private unexpectedEnvironment(model: ModelNode, prepared: PreparedSource, envDir: string): HostSafetyViolation[] {
    const known = new Set(prepared.environmentKeys);
    for (const copy of prepared.envCopies) for (const k of envFileKeys(copy.content)) known.add(k);
    const out: HostSafetyViolation[] = [];
    for (const [service, def] of Object.entries((model.services ?? {}) as ModelNode)) {
      const env = def?.environment;
      const keys = Array.isArray(env) ? env.map((e: unknown) => String(e).split('=')[0]!) : env && typeof env === 'object' ? Object.keys(env) : [];
      const stray = keys.filter((k) => !known.has(k));
      if (stray.length)
        out.push({
          service,
          key: 'env_file',
          value: stray.join(', '),
          exception: 'env_file',
          why: `compose read variables (${stray.slice(0, 5).join(', ')}) from a file the agent did not check`,
        });
      for (const f of Array.isArray(def?.env_file) ? def.env_file : def?.env_file ? [def.env_file] : []) {
        const path = typeof f === 'string' ? f : String(f?.path ?? '');
        if (!path.startsWith(envDir + '/'))
          out.push({ service, key: 'env_file', value: path, exception: 'env_file', why: `compose reads '${path}', a file the agent did not check` });
      }
    }
    return out;
  }

  private remember(file: KeptFile): Kept {
    const existing = this.byHash.get(file.hash);
    if (existing) return existing;
    const services = Object.keys((file.model.services ?? {}) as Record<string, unknown>);
    const pub: CheckedCompose = Object.freeze({
      project: file.project,
      dir: file.dir,
      hash: file.hash,
      flavour: file.flavour,
      model: deepFreeze(file.model),
      services: Object.freeze(services),
      granted: Object.freeze([...file.granted]),
      violations: Object.freeze([...file.violations]),
      runtime: file.runtime ?? 'compose',
    });
    const kept: Kept = {
      public: pub,
      hostPaths: file.hostPaths,
      exceptions: file.exceptions,
      enforce: file.enforce,
      profiles: file.profiles,
      envCopies: file.envCopies,
      builtImages: file.builtImages ?? [],
      images: file.images ?? [],
      ownNames: file.ownNames ?? [],
      runtime: file.runtime ?? 'compose',
    };
    this.noteImages(file.project, kept);
    this.issued.set(pub, kept);
    this.byHash.set(file.hash, kept);
    // A bounded memory: the files on disk stay the record.
    if (this.byHash.size > 512) this.byHash.delete(this.byHash.keys().next().value!);
    return kept;
  }

  private async load(project: string, hash: string): Promise<Kept | null> {
    try {
      const file = JSON.parse(await readFile(join(this.projectDir(project), `${hash}.meta.json`), 'utf8')) as KeptFile;
      if (file.hash !== hash || file.project !== project) return null;
      return this.remember(file);
    } catch {
      return null;
    }
  }

  async lastChecked(project: string): Promise<CheckedCompose | null> {
    let hash: string;
    try {
      hash = (await readFile(join(this.projectDir(project), 'last'), 'utf8')).trim();
    } catch {
      return null;
    }
    return (this.byHash.get(hash) ?? (await this.load(project, hash)))?.public ?? null;
  }

  /** See `DockerService.compose.declareCurrent`: kept as `current` (a hash, or `none`) beside `last`. */
  async declareCurrent(project: string, checked: CheckedCompose | null): Promise<void> {
    if (checked && (checked.project !== project || !this.issued.has(checked)))
      throw errors.internal('only a model the guard checked for this project can be current');
    const dir = this.projectDir(project);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeAtomic(join(dir, 'current'), (checked ? checked.hash : 'none') + '\n');
  }

  /** The model containers of a project must come from: the one declared current, else the one that last ran. */
  private async currentModel(project: string): Promise<CheckedCompose | null | 'none'> {
    const declared = await readFile(join(this.projectDir(project), 'current'), 'utf8').then(
      (t) => t.trim(),
      () => '',
    );
    if (declared === 'none') return 'none';
    if (declared) {
      const kept = this.byHash.get(declared) ?? (await this.load(project, declared));
      if (kept) return kept.public;
    }
    return this.lastChecked(project);
  }

  /** Drops kept models of a project except `keep`, the one that last ran and the newest few; then unused env copies. */
  private async prune(project: string, keep: string): Promise<void> {
    const dir = this.projectDir(project);
    const last = await readFile(join(dir, 'last'), 'utf8').then(
      (t) => t.trim(),
      () => '',
    );
    const metas: { hash: string; mtime: number }[] = [];
    for (const name of await readdir(dir)) {
      const m = /^([0-9a-f]{64})\.meta\.json$/.exec(name);
      if (m)
        metas.push({
          hash: m[1]!,
          mtime: await stat(join(dir, name)).then(
            (st) => st.mtimeMs,
            () => 0,
          ),
        });
    }
    metas.sort((a, b) => b.mtime - a.mtime);
    const current = await readFile(join(dir, 'current'), 'utf8').then(
      (t) => t.trim(),
      () => '',
    );
    const keepSet = new Set([keep, last, current, ...metas.slice(0, KEEP).map((m) => m.hash)]);
    const usedCopies = new Set<string>();
    for (const { hash } of metas) {
      if (keepSet.has(hash)) {
        for (const c of (await this.load(project, hash))?.envCopies ?? []) usedCopies.add(c);
        continue;
      }
      this.byHash.delete(hash);
      for (const suffix of ['.meta.json', '.json', '.env']) await rm(join(dir, hash + suffix), { force: true });
    }
    for (const name of await readdir(join(dir, 'env')).catch(() => [] as string[])) {
      if (!usedCopies.has(name)) await rm(join(dir, 'env', name), { force: true });
    }
  }

  async forget(project: string): Promise<void> {
    for (const [hash, kept] of this.byHash) if (kept.public.project === project) this.byHash.delete(hash);
    this.imageUse?.delete(project);
    await rm(this.projectDir(project), { recursive: true, force: true });
  }

  // ---- names are owned ----------------------------------------------------------------------------------------------

  /** Images every project builds and runs, from the kept models on disk (read once, then kept current). */
  private async imageUses(): Promise<Map<string, ImageUse>> {
    if (this.imageUse) return this.imageUse;
    const map = new Map<string, ImageUse>();
    for (const project of await readdir(this.opts.root).catch(() => [] as string[])) {
      if (!PROJECT.test(project)) continue;
      for (const name of await readdir(join(this.opts.root, project)).catch(() => [] as string[])) {
        if (!name.endsWith('.meta.json')) continue;
        try {
          const file = JSON.parse(await readFile(join(this.opts.root, project, name), 'utf8')) as Partial<KeptFile>;
          addImages(map, project, file.builtImages ?? [], file.images ?? []);
        } catch {
          /* an unreadable kept model names nothing */
        }
      }
    }
    this.imageUse ??= map;
    return this.imageUse;
  }

  private noteImages(project: string, kept: Kept): void {
    if (this.imageUse) addImages(this.imageUse, project, kept.builtImages, kept.images);
  }

  /**
   * What the engine and the other projects hold under the names this project would create or take: its networks
   * and volumes (another project's, or one of no project), its containers' names (v1 `p_s_1`, v2 `p-s-1`,
   * `container_name`), the images its builds tag (run or built by another project) and the images it runs (built by
   * another project). Checked when a model is checked and again before every `up`.
   */
  private async foreignNames(
    project: string,
    facts: Pick<PolicyResult, 'ownNames' | 'containerNames' | 'builtImages' | 'images'> & { services: string[] },
    exceptions: ReadonlySet<string>,
  ): Promise<HostSafetyViolation[]> {
    const out: HostSafetyViolation[] = [];
    const push = (v: HostSafetyViolation) => {
      if (!exceptions.has(v.exception)) out.push(v);
    };
    let containers: ExistingContainer[];
    let objects: { kind: 'network' | 'volume'; key: string; name: string; owner: string | null }[];
    try {
      containers = await this.opts.engine.containers();
      objects = [];
      for (const kind of ['network', 'volume'] as const) {
        const wanted = facts.ownNames.filter((n) => n.kind === kind);
        if (!wanted.length) continue;
        const found = await this.opts.engine.objects(
          kind,
          wanted.map((n) => n.name),
        );
        for (const f of found) {
          const n = wanted.find((w) => w.name === f.name);
          if (n) objects.push({ ...n, owner: f.project });
        }
      }
    } catch (err) {
      // Without an engine nothing can be taken over now; `up` checks again before anything is created.
      if (err instanceof HttpError && err.status === 503) return out;
      throw err;
    }
    const owner = (p: string | null) => (p ? `project '${p}'` : 'no compose project');
    for (const o of objects) {
      if (o.owner === project) continue;
      const section = o.kind === 'network' ? 'networks' : 'volumes';
      push({
        service: null,
        key: `${section}.${o.key}`,
        value: o.name,
        exception: `${section}.external:${o.name}`,
        why: `the ${o.kind} '${o.name}' this project would use already exists and belongs to ${owner(o.owner)}`,
      });
    }
    for (const { service, name } of facts.containerNames) {
      const taken = containers.find((c) => c.name === name && c.project !== project);
      if (taken)
        push({
          service,
          key: 'container_name',
          value: name,
          exception: `container_name:${name}`,
          why: `container name '${name}' is taken by ${taken.project ? `project '${taken.project}'` : 'a container outside any project'}`,
        });
    }
    const explicit = new Set(facts.containerNames.map((c) => c.service));
    for (const service of facts.services) {
      if (explicit.has(service)) continue;
      const derived = new RegExp(`^${escapeRegExp(project)}[_-]${escapeRegExp(service)}[_-]\\d+$`);
      const taken = containers.find((c) => derived.test(c.name) && c.project !== project);
      if (taken)
        push({
          service,
          key: 'container_name',
          value: taken.name,
          exception: `container_name:${taken.name}`,
          why: `the container name compose derives ('${taken.name}') is taken by ${owner(taken.project)}`,
        });
    }
    const uses = await this.imageUses();
    const others = [...uses.entries()].filter(([p]) => p !== project);
    for (const { service, tags } of facts.builtImages) {
      for (const tag of tags.map(normalImage)) {
        if (ownsImageName(project, tag)) continue;
        const user =
          others.find(([, u]) => u.built.has(tag) || u.used.has(tag))?.[0] ??
          containers.find((c) => c.project !== project && normalImage(c.image) === tag)?.project;
        if (user !== undefined)
          push({
            service,
            key: 'build',
            value: tag,
            exception: `build.image:${tag}`,
            why: `the build would tag '${tag}', an image ${user ? `project '${user}'` : 'a container outside any project'} uses: name it '${project}_…'`,
          });
      }
    }
    for (const { service, image } of facts.images) {
      const builder = others.find(([, u]) => u.built.has(normalImage(image)))?.[0];
      if (builder) push({ service, key: 'image', value: image, exception: `image:${image}`, why: `'${image}' is an image project '${builder}' builds` });
    }
    return out;
  }

  /**
   * The Dockerfiles of a model's builds as they are in the folder now (an early answer; what is built is checked
   * again in the copy the build reads). A Dockerfile that does not exist yet is checked when it is built.
   */
  private async dockerfiles(project: string, dir: string, model: ModelNode): Promise<HostSafetyViolation[]> {
    const out: HostSafetyViolation[] = [];
    for (const [service, def] of Object.entries((model.services ?? {}) as ModelNode)) {
      const build = typeof def?.build === 'string' ? { context: def.build } : def?.build;
      if (!build || typeof build !== 'object') continue;
      const text = await this.dockerfileText(dir, build).catch(() => null);
      if (text !== null) out.push(...(await this.dockerfileViolations(project, service, build, text)));
    }
    return out;
  }

  private async dockerfileText(root: string, build: ModelNode, context?: string): Promise<string | null> {
    if (typeof build.dockerfile_inline === 'string') return build.dockerfile_inline;
    const ctx = context ?? resolve(root, String(build.context ?? '.'));
    if (!context && !isInside(root, ctx)) return null;
    return readTextInside(ctx, typeof build.dockerfile === 'string' ? build.dockerfile : 'Dockerfile');
  }

  private async dockerfileViolations(project: string, service: string, build: ModelNode, text: string): Promise<HostSafetyViolation[]> {
    const args = argsOf(build.args);
    const facts = checkDockerfile(text, service, 'build', args);
    const out = [...facts.violations];
    const uses = await this.imageUses();
    for (const image of facts.images) {
      const m = /^([a-z0-9][a-z0-9-]*)_[^/]*$/.exec(repository(image));
      const builder = m && m[1] !== project ? m[1] : [...uses.entries()].find(([p, u]) => p !== project && u.built.has(normalImage(image)))?.[0];
      if (builder)
        out.push({
          service,
          key: 'build.dockerfile',
          value: image,
          exception: `image:${image}`,
          why: `the Dockerfile reads '${image}', an image of deployment '${builder}'`,
        });
    }
    return out;
  }

  // ---- running --------------------------------------------------------------------------------------------------

  /**
   * Whether an existing container of a project the agent runs may be started as it is (the container routes): only
   * when it was created from the model the project last ran, its host paths still lead where they did, and no other container
   * of the project could rearrange them. Throws 409 CONTAINER_STALE or 400 HOST_SAFETY otherwise.
   */
  async assertStartable(container: ExistingContainer): Promise<void> {
    // A project the guard never checked is not the agent's (a compose project run by hand): it has no model to
    // hold its containers to.
    if (!container.project || !PROJECT.test(container.project) || !existsSync(this.projectDir(container.project))) return;
    const current = await this.currentModel(container.project);
    const last = current === 'none' ? null : current;
    const kept = last ? this.issued.get(last) : undefined;
    const wanted = last && container.service ? stampOf(last.model, container.service) : null;
    if (!last || !kept || !wanted || container.labels[STAMP_LABEL] !== wanted)
      throw errors.conflict(
        `container '${container.name}' was not created from the model its deployment last ran (checked); start the deployment instead, which recreates it`,
        'CONTAINER_STALE',
      );
    if (!kept.enforce) return;
    const moved = recheckHostPaths(kept.hostPaths, { project: last.project, dir: last.dir, exceptions: new Set(kept.exceptions) });
    if (moved.length) throw hostSafetyError(moved, null);
    const others = (await this.opts.engine.containers(container.project)).filter((c) => c.id !== container.id);
    const above = containersAbove(
      kept.hostPaths.filter((p) => p.service === container.service),
      others,
    );
    if (above.length)
      throw errors.conflict(
        `container '${container.name}' cannot start while '${above[0]!.name}' of the same project can write above what it mounts; start the deployment instead`,
        'CONTAINER_STALE',
      );
  }

  async run(checked: CheckedCompose, command: ComposeCommand, options: ComposeRunOptions = {}): Promise<ComposeRunResult> {
    const kept = this.issued.get(checked);
    if (!kept) throw errors.internal('compose runs only models the guard checked');
    const { project, dir, hash } = checked;
    const projectDir = this.projectDir(project);
    const targets = command.command === 'start-beside' ? [command.service] : 'services' in command ? command.services : undefined;
    for (const s of targets ?? []) {
      if (!SERVICE.test(s) || !checked.services.includes(s)) throw errors.badRequest(`project '${project}' has no service '${s}'`, 'VALIDATION_FAILED');
    }
    const starts = command.command === 'up' || command.command === 'restart' || command.command === 'build' || command.command === 'start-beside';
    if (kept.enforce && starts) {
      // The engine resolves host paths again at every start: a symlink planted since the check must not count.
      const moved = recheckHostPaths(kept.hostPaths, { project, dir, exceptions: new Set(kept.exceptions) });
      if (moved.length) throw hostSafetyError(moved, null);
    }
    const file = join(projectDir, `${hash}.json`);
    const runEnv = join(projectDir, `${hash}.env`);
    await mkdir(projectDir, { recursive: true, mode: 0o700 });
    if (!existsSync(file)) await writeAtomic(file, serializeModel(checked.model as Record<string, unknown>));
    if (!existsSync(runEnv)) await writeAtomic(runEnv, kept.profiles === null ? '' : envText({ COMPOSE_PROFILES: kept.profiles }));
    await writeAtomic(join(projectDir, 'last'), hash + '\n');
    if (starts) await writeAtomic(join(projectDir, 'current'), hash + '\n');
    const base = ['--env-file', runEnv, '-f', file, '--project-directory', dir, '-p', project];
    const compose = async (args: string[]) => {
      const r = await runCompose(await this.opts.command(), this.opts.dockerHost, projectDir, [...base, ...args], options);
      return { exit_code: r.exit_code, output: r.output.split(file).join('the checked compose file') };
    };

    if (command.command === 'build') return this.build(checked, kept, command.services ?? kept.builtImages.map((b) => b.service), options);
    if (command.command !== 'up' && command.command !== 'restart' && command.command !== 'start-beside') return compose(subcommand(command));

    if (kept.enforce) {
      const names = await this.foreignNames(
        project,
        { ...kept, containerNames: containerNamesOf(checked.model), services: [...checked.services] },
        new Set(kept.exceptions),
      );
      if (names.length) throw hostSafetyError(names, null);
    }
    // What exists now: containers created from another model are never started as they are, and a container that
    // could rearrange what the model mounts is gone before anything of the model is created or started.
    const existing = await this.opts.engine.containers(project);
    const stale = existing.filter((c) => !c.service || c.labels[STAMP_LABEL] !== stampOf(checked.model, c.service));
    const above = kept.enforce ? containersAbove(kept.hostPaths, existing) : [];
    // An older container with a bind below what the model mounts read-write would mount it again at its next start
    // (a restart policy needs no one to ask) while the model's containers can rearrange it: gone before they start.
    const below = kept.enforce ? containersBelow(kept.hostPaths, stale).filter((c) => !above.includes(c)) : [];
    for (const [c, why] of [...above.map((c) => [c, 'above'] as const), ...below.map((c) => [c, 'below'] as const)]) {
      this.opts.log.info(`container removed before a start: it could ${why === 'above' ? 'write above' : 'mount again below'} what the model mounts`, {
        project,
        container: c.name,
      });
      await this.opts.engine.removeContainer(c.id).catch((err: unknown) => {
        if (!(err instanceof HttpError && err.status === 404)) throw err;
      });
    }
    if (kept.enforce && (above.length || below.length)) {
      // The paths were checked while those containers could still rearrange them (and may have, right before they
      // were killed): only now, with no container left that can write above them, does a check hold until the mount.
      const moved = recheckHostPaths(kept.hostPaths, { project, dir, exceptions: new Set(kept.exceptions) });
      if (moved.length) throw hostSafetyError(moved, null);
    }
    const outputs: ComposeRunResult[] = [];
    const built = await this.build(checked, kept, await this.missingImages(kept, targets), options);
    outputs.push(built);
    if (built.exit_code !== 0) return merge(outputs);
    if (command.command === 'start-beside') {
      // `--no-recreate` starts a stopped container as it is: one from another model must not be among them (a
      // running one is not started: it keeps serving until the caller removes it).
      const gone = new Set([...above, ...below].map((c) => c.id));
      const mine = existing.filter((c) => c.service === command.service && !gone.has(c.id));
      const stopped = mine.find((c) => c.state !== 'running' && c.labels[STAMP_LABEL] !== stampOf(checked.model, command.service));
      if (stopped)
        throw errors.conflict(
          `container '${stopped.name}' was not created from the model that runs and is not running: redeploy with strategy recreate`,
          'CONTAINER_STALE',
        );
      outputs.push(await compose(['up', '--no-build', ...subcommand(command).slice(1), `${command.service}=${mine.length + 1}`, command.service]));
      return merge(outputs);
    }
    if (command.command === 'up') {
      // `--no-build` among the options: compose v1 reads whatever follows the services as more services.
      const [up, ...rest] = subcommand(command);
      outputs.push(await compose([up!, '--no-build', ...rest]));
      return merge(outputs);
    }
    // restart: stale or removed containers are recreated from the model; the current ones restart as they are.
    const gone = new Set([...stale, ...above, ...below].map((c) => c.service).filter((s): s is string => s !== null));
    const wanted = command.services ?? [...checked.services];
    const recreate = wanted.filter((s) => gone.has(s));
    if (recreate.length || stale.some((c) => !c.service || !checked.services.includes(c.service))) {
      outputs.push(await compose(['up', '-d', '--no-build', ...recreate]));
      if (outputs[outputs.length - 1]!.exit_code !== 0) return merge(outputs);
    }
    // Only services that have a container: compose v1 fails a restart of one that has none (the caller's `up`
    // creates those).
    const current = wanted.filter((s) => !gone.has(s) && existing.some((c) => c.service === s));
    if (current.length) outputs.push(await compose(['restart', ...current]));
    return merge(outputs);
  }

  /**
   * Deploys a model checked for swarm as the stack of its project (`docker stack deploy`), with the same re-checks
   * a compose start has (host paths, names other projects own) and its builds done first from private copies;
   * the file the stack is deployed from is the checked model, written where no container can write.
   */
  async stack(checked: CheckedCompose, options: ComposeRunOptions = {}): Promise<ComposeRunResult> {
    const kept = this.issued.get(checked);
    if (!kept) throw errors.internal('a stack deploys only models the guard checked');
    if (kept.runtime !== 'swarm') throw errors.internal(`project '${checked.project}' was not checked for swarm`);
    const { project, dir, hash } = checked;
    const projectDir = this.projectDir(project);
    if (kept.enforce) {
      const moved = recheckHostPaths(kept.hostPaths, { project, dir, exceptions: new Set(kept.exceptions) });
      if (moved.length) throw hostSafetyError(moved, null);
      const names = await this.foreignNames(
        project,
        { ...kept, containerNames: containerNamesOf(checked.model), services: [...checked.services] },
        new Set(kept.exceptions),
      );
      if (names.length) throw hostSafetyError(names, null);
    }
    const file = join(projectDir, `${hash}.json`);
    await mkdir(projectDir, { recursive: true, mode: 0o700 });
    if (!existsSync(file)) await writeAtomic(file, serializeModel(checked.model as Record<string, unknown>));
    const built = await this.build(checked, kept, await this.missingImages(kept), options);
    if (built.exit_code !== 0) return built;
    // The secrets the model takes from the `.env`, created from their values in memory (never a file); one that
    // exists already has that value (its name is the value's digest).
    const secrets = envSecretsOf(checked.model as ModelNode);
    const values = this.stackSecrets.get(hash)?.values;
    for (const secret of secrets) {
      const value = values?.get(secret.name);
      if (value === undefined) throw errors.internal(`the value of secret '${secret.key}' of '${project}' is not known: check the files again`);
      await this.opts.engine.ensureSecret(secret.name, value, { [STACK_LABEL]: project, [SECRET_LABEL]: secret.key });
    }
    await writeAtomic(join(projectDir, 'last'), hash + '\n');
    await writeAtomic(join(projectDir, 'current'), hash + '\n');
    // `--prune`: services removed from the file go (as `up --remove-orphans` would); the docker CLI with the same
    // fixed environment as compose (nothing of the agent's own reaches its interpolation).
    const r = await runCompose(['docker'], this.opts.dockerHost, projectDir, ['stack', 'deploy', '--prune', '-c', file, project], options);
    return merge([built, { exit_code: r.exit_code, output: r.output.split(file).join('the checked compose file') }]);
  }

  /** Services of a model whose built image is not on the engine (compose would build them at `up`). */
  private async missingImages(kept: Kept, services?: string[]): Promise<string[]> {
    const out: string[] = [];
    for (const b of kept.builtImages) {
      if (services && !services.includes(b.service)) continue;
      if (!(await this.opts.engine.imageExists(b.tags[0]!))) out.push(b.service);
    }
    return out;
  }

  /**
   * Builds services from copies of their contexts in the guard's own folder (see build-context.ts); the Dockerfile
   * checked is the copied one, which is the one built.
   */
  private async build(checked: CheckedCompose, kept: Kept, services: string[], options: ComposeRunOptions): Promise<ComposeRunResult> {
    if (!services.length) return { exit_code: 0, output: '' };
    const { project, dir } = checked;
    const work = await mkdtemp(join(this.projectDir(project), '.build-'));
    try {
      const model = structuredClone(checked.model) as ModelNode;
      const violations: HostSafetyViolation[] = [];
      for (const service of services) {
        const def = model.services?.[service];
        const build = typeof def?.build === 'string' ? { context: def.build } : def?.build;
        if (!build || typeof build !== 'object') continue;
        const context = resolve(dir, String(build.context ?? '.'));
        if (!isInside(dir, context)) {
          if (kept.enforce) throw errors.internal(`build context of '${service}' is outside the project folder`);
          continue;
        }
        const copy = join(work, service);
        await mkdir(copy, { mode: 0o700 });
        const stats = await copyContext(dir, context, copy);
        if (stats.skipped.length)
          this.opts.log.warn('build context: entries not copied (links swapped in, special files)', { project, service, skipped: stats.skipped.slice(0, 20) });
        const contexts: Record<string, string> = {};
        for (const [name, path] of Object.entries(argsOf(build.additional_contexts))) {
          const abs = resolve(dir, path);
          if (/^(service|target):/.test(path) || !isInside(dir, abs)) {
            contexts[name] = path;
            continue;
          }
          const extra = join(work, `${service}.${Object.keys(contexts).length}`);
          await mkdir(extra, { mode: 0o700 });
          await copyContext(dir, abs, extra);
          contexts[name] = extra;
        }
        const text = await this.dockerfileText(dir, build, copy).catch((err: unknown) => {
          if (err instanceof HttpError) throw errors.badRequest(`service '${service}': the Dockerfile ${err.message}`, 'HOST_SAFETY');
          return null;
        });
        if (text !== null && kept.enforce)
          violations.push(...(await this.dockerfileViolations(project, service, build, text)).filter((v) => !kept.exceptions.includes(v.exception)));
        def.build = { ...build, context: copy, ...(Object.keys(contexts).length ? { additional_contexts: contexts } : {}) };
      }
      if (violations.length) throw hostSafetyError(violations, null);
      const file = join(work, 'build.json');
      await writeAtomic(file, serializeModel(model));
      const runEnv = join(this.projectDir(project), `${checked.hash}.env`);
      const r = await runCompose(
        await this.opts.command(),
        this.opts.dockerHost,
        work,
        ['--env-file', runEnv, '-f', file, '--project-directory', dir, '-p', project, 'build', ...services],
        options,
      );
      return { exit_code: r.exit_code, output: r.output.split(file).join('the checked compose file').split(work).join('the build copy') };
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
}

/** Build args (or additional contexts) as compose writes them: a mapping or a `KEY=VALUE` list. */
function argsOf(value: unknown): Record<string, string> {
  if (Array.isArray(value))
    return Object.fromEntries(
      value.map((v) => {
        const s = String(v);
        const eq = s.indexOf('=');
        return eq === -1 ? [s, ''] : [s.slice(0, eq), s.slice(eq + 1)];
      }),
    );
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, v === null || v === undefined ? '' : String(v)]));
  return {};
}

function containerNamesOf(model: Readonly<ModelNode>): { service: string; name: string }[] {
  return Object.entries((model.services ?? {}) as ModelNode)
    .filter(([, def]) => typeof def?.container_name === 'string')
    .map(([service, def]) => ({ service, name: String(def.container_name) }));
}

function addImages(map: Map<string, ImageUse>, project: string, built: BuiltImage[], images: { image: string }[]): void {
  const use = map.get(project) ?? { built: new Set<string>(), used: new Set<string>() };
  for (const b of built) for (const t of b.tags) use.built.add(normalImage(t));
  for (const i of images) use.used.add(normalImage(i.image));
  map.set(project, use);
}

function merge(results: ComposeRunResult[]): ComposeRunResult {
  const failed = results.find((r) => r.exit_code !== 0);
  return {
    exit_code: failed?.exit_code ?? 0,
    output: results
      .map((r) => r.output)
      .filter(Boolean)
      .join('\n'),
  };
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function subcommand(c: ComposeCommand): string[] {
  switch (c.command) {
    case 'up':
      return [
        'up',
        '-d',
        ...(c.forceRecreate ? ['--force-recreate'] : []),
        ...(c.noDeps ? ['--no-deps'] : []),
        ...(c.removeOrphans ? ['--remove-orphans'] : []),
        ...(c.services ?? []),
      ];
    case 'stop':
      return ['stop', ...(c.services ?? [])];
    case 'restart':
      return ['restart', ...(c.services ?? [])];
    case 'down':
      return ['down', ...(c.removeOrphans ? ['--remove-orphans'] : []), ...(c.volumes ? ['--volumes'] : [])];
    case 'build':
      return ['build', ...(c.services ?? [])];
    case 'start-beside':
      // The scale (one more than the service has now) and the service are added by the caller, which counts them.
      return ['up', '-d', '--no-deps', '--no-recreate', '--scale'];
  }
}

async function writeAtomic(path: string, content: string): Promise<void> {
  const tmp = `${path}.tmp-${randomBytes(6).toString('hex')}`;
  await writeFile(tmp, content, { mode: 0o600, flag: 'wx' });
  await rename(tmp, path);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
