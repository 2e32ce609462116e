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
import { isAbsolute, join, resolve } from 'node:path';
import { parse } from 'yaml';
import { errors, HttpError, type Logger } from '@agent/sdk';
import { type CheckedCompose, type ComposeCommand, type ComposeFlavour, type ComposeRunResult, type ComposeSource, type HostSafetyViolation } from '../api.js';
import { flavourOf, interpolationEnv, runCompose, type ComposeRunOptions } from './cli.js';
import { checkModel, recheckHostPaths, type HostPath } from './policy.js';
import { envFileKeys, prepareSource, type PreparedSource } from './source.js';

/** Part of every content hash: a change of the policy's code must check every project again. */
const POLICY_VERSION = 'policy-1';
const PROJECT = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const SERVICE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;
/** Models kept per project besides the one that last ran (plans preview several versions). */
const KEEP = 4;

export interface GuardOptions {
  /** Private folder of the guard (inside the agent's data folder, never mounted into containers). */
  root: string;
  dockerHost: string | null;
  /** The detected compose command; rejects with 503 COMPOSE_UNAVAILABLE. */
  command(): Promise<string[]>;
  /** Names of existing containers and their compose project (container_name collisions). */
  containerNames(): Promise<{ name: string; project: string | null }[]>;
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
}

interface KeptFile {
  project: string;
  dir: string;
  hash: string;
  flavour: ComposeFlavour;
  model: Record<string, any>;
  granted: string[];
  violations: HostSafetyViolation[];
  hostPaths: HostPath[];
  exceptions: string[];
  enforce: boolean;
  profiles: string | null;
  envCopies: string[];
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Every string value of a model, mapped (keys are data compose never interpolates). */
function mapStrings(value: unknown, fn: (s: string) => string): any {
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
  private escapedOutput: Promise<boolean> | null = null;

  constructor(private readonly opts: GuardOptions) {}

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
        const r = await runCompose(command, this.opts.dockerHost, dir, ['-f', join(dir, 'probe.yml'), '--project-directory', dir, '-p', 'probe', 'config'], {
          env: interpolationEnv(flavourOf(command), dir),
          stdout: true,
        });
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
    const hash = sha256(JSON.stringify([POLICY_VERSION, flavour, source.project, dir, prepared.text, Object.entries(env).sort(), exceptions, enforce]));

    const known = this.byHash.get(hash) ?? (await this.load(source.project, hash));
    if (known) return known.public;

    await mkdir(envDir, { recursive: true, mode: 0o700 });
    for (const copy of prepared.envCopies) {
      const path = join(envDir, copy.name);
      if (!existsSync(path)) await writeAtomic(path, copy.content);
    }
    const staging = await mkdtemp(join(projectDir, '.check-'));
    let model: Record<string, any>;
    try {
      await writeFile(join(staging, 'source.yml'), prepared.text, { mode: 0o600 });
      await writeFile(join(staging, 'source.env'), envText(env), { mode: 0o600 });
      const r = await runCompose(
        command,
        this.opts.dockerHost,
        staging,
        ['--env-file', join(staging, 'source.env'), '-f', join(staging, 'source.yml'), '--project-directory', dir, '-p', source.project, 'config'],
        { env: interpolationEnv(flavour, join(staging, 'docker-config')), stdout: true },
      );
      // Relative paths of extended services resolve against the file's own folder: that is the project folder.
      const unstage = (s: string) => s.split(`${staging}/source.yml`).join('the compose file').split(staging).join(dir);
      if (r.exit_code !== 0) {
        const message = unstage(r.output)
          .trim()
          .split('\n')
          .filter((l) => !/^\s*$/.test(l))
          .slice(-6)
          .join('\n');
        throw errors.badRequest(`compose_content: compose refused the file: ${message}`, 'INVALID_COMPOSE', { field: 'compose_content' });
      }
      const raw = parse(r.stdout, { version: flavour === 'v1' ? '1.1' : '1.2', merge: true, maxAliasCount: -1 }) as Record<string, any>;
      const escaped = await this.dollarsEscaped(command);
      model = mapStrings(raw, (s) => unstage(escaped ? s.replace(/\$\$/g, '$') : s));
    } finally {
      await rm(staging, { recursive: true, force: true });
    }

    const policy = checkModel(model, { project: source.project, dir, exceptions: new Set(exceptions) });
    const violations: HostSafetyViolation[] = [...policy.violations];
    violations.push(...this.unexpectedEnvironment(model, prepared, envDir));
    const existing = policy.containerNames.length ? await this.opts.containerNames() : [];
    for (const { service, name } of policy.containerNames) {
      const taken = existing.find((c) => c.name === name && c.project !== source.project);
      if (taken)
        violations.push({
          service,
          key: 'container_name',
          value: name,
          exception: `container_name:${name}`,
          why: `container name '${name}' is taken by ${taken.project ? `project '${taken.project}'` : 'a container outside any project'}`,
        });
    }
    for (const f of prepared.findings) violations.push({ service: null, key: f.key, value: f.value, exception: f.key, why: f.why });
    if (enforce && violations.length) throw hostSafetyError(violations, prepared);

    const envValue = env.COMPOSE_PROFILES;
    const kept: KeptFile = {
      project: source.project,
      dir,
      hash,
      flavour,
      model,
      granted: policy.granted,
      violations: enforce ? [] : violations,
      hostPaths: policy.hostPaths,
      exceptions,
      enforce,
      profiles: envValue === undefined ? null : envValue,
      envCopies: prepared.envCopies.map((c) => c.name),
    };
    await writeAtomic(join(projectDir, `${hash}.meta.json`), JSON.stringify(kept));
    await this.prune(source.project, hash);
    return this.remember(kept).public;
  }

  /**
   * Environment compose took from somewhere the agent did not hand it (a file the source scan could not see):
   * every variable of the model must come from an `environment` section or one of the private env file copies.
   */
  private unexpectedEnvironment(model: Record<string, any>, prepared: PreparedSource, envDir: string): HostSafetyViolation[] {
    const known = new Set(prepared.environmentKeys);
    for (const copy of prepared.envCopies) for (const k of envFileKeys(copy.content)) known.add(k);
    const out: HostSafetyViolation[] = [];
    for (const [service, def] of Object.entries((model.services ?? {}) as Record<string, any>)) {
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
    });
    const kept: Kept = {
      public: pub,
      hostPaths: file.hostPaths,
      exceptions: file.exceptions,
      enforce: file.enforce,
      profiles: file.profiles,
      envCopies: file.envCopies,
    };
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
    const keepSet = new Set([keep, last, ...metas.slice(0, KEEP).map((m) => m.hash)]);
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
    await rm(this.projectDir(project), { recursive: true, force: true });
  }

  async run(checked: CheckedCompose, command: ComposeCommand, options: ComposeRunOptions = {}): Promise<ComposeRunResult> {
    const kept = this.issued.get(checked);
    if (!kept) throw errors.internal('compose runs only models the guard checked');
    const { project, dir, hash } = checked;
    const projectDir = this.projectDir(project);
    for (const s of 'services' in command ? (command.services ?? []) : []) {
      if (!SERVICE.test(s) || !checked.services.includes(s)) throw errors.badRequest(`project '${project}' has no service '${s}'`, 'VALIDATION_FAILED');
    }
    if (kept.enforce && (command.command === 'up' || command.command === 'restart' || command.command === 'build')) {
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
    const args = ['--env-file', runEnv, '-f', file, '--project-directory', dir, '-p', project, ...subcommand(command)];
    const result = await runCompose(await this.opts.command(), this.opts.dockerHost, projectDir, args, options);
    return { exit_code: result.exit_code, output: result.output.split(file).join('the checked compose file') };
  }
}

function subcommand(c: ComposeCommand): string[] {
  switch (c.command) {
    case 'up':
      return [
        'up',
        '-d',
        ...(c.noRecreate ? ['--no-recreate'] : []),
        ...(c.forceRecreate ? ['--force-recreate'] : []),
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
