/**
 * The host-safety policy: an allow-list over compose's own canonical model (the output of `compose config`, so
 * every spelling, default, interpolation and `extends` is already resolved the way compose resolves it).
 * Every key is classified here once — allowed, allowed with checks, or refused — and anything not classified is
 * refused. A refusal names the service, the key, the value and the exception an admin could grant; a granted
 * exception (e.g. `cap_add:NET_ADMIN`, `volumes:/var/run/docker.sock`) lets exactly that value through.
 */
import { existsSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, resolve, sep } from 'node:path';

export type KeyStatus = 'allowed' | 'checked' | 'refused';

/**
 * A mapping of compose's model: JSON whose shape compose decides (v1 and v2 differ), read field by field and
 * checked by the policy. The one loose type of the guard.
 */
export type ModelNode = Record<string, any>;

export interface Violation {
  /** The service the key belongs to; null for top-level sections. */
  service: string | null;
  /** Key path, e.g. `cap_add`, `volumes`, `networks.outside.external`. */
  key: string;
  value: string;
  /** What an admin grants to let exactly this through. */
  exception: string;
  why: string;
}

/** A host path a container will see (bind mount, build context, file-backed secret or config). */
export interface HostPath {
  service: string | null;
  key: string;
  /** Absolute, as in the model. */
  source: string;
  /** With symlinks resolved (the part that exists). The model that runs names this path (see `pins`). */
  real: string;
  /** A container can write below it. */
  writable: boolean;
  /** A bind mount of a container (build contexts and files compose reads itself are not). */
  mounted: boolean;
}

/** A value of the model replaced by the one that runs (a host path pinned to its real path). */
export interface Pin {
  path: (string | number)[];
  value: unknown;
}

/** An image a service builds and tags (its `image`, or the name the guard gives it, and `build.tags`). */
export interface BuiltImage {
  service: string;
  /** Names the build tags. */
  tags: string[];
  /** The service had no `image`: the guard writes this name into the model (compose would derive a name itself). */
  derived: boolean;
}

export interface PolicyInput {
  project: string;
  /** The project folder (absolute). */
  dir: string;
  exceptions: ReadonlySet<string>;
  /** Resolves symlinks of the existing part of a path (injectable for tests). */
  realpath?: (path: string) => string;
}

export interface PolicyResult {
  violations: Violation[];
  /** Exceptions that were needed and granted. */
  granted: string[];
  /** Host paths inside the folder, re-checked before every start. */
  hostPaths: HostPath[];
  /** `container_name`s the model sets (checked against other projects by the caller). */
  containerNames: { service: string; name: string }[];
  /** Values the model that runs has instead (host paths pinned to their real paths, derived image names). */
  pins: Pin[];
  /** Images the project's builds tag (checked against other projects' images by the caller). */
  builtImages: BuiltImage[];
  /** Images the services run without building them (`service → image`). */
  images: { service: string; image: string }[];
  /** Networks and volumes the project creates, by the engine name compose gives them. */
  ownNames: { kind: 'network' | 'volume'; key: string; name: string }[];
}

/** Files at the root of a project folder that the agent writes and reads: no container may write them. */
export const AGENT_FILES = ['docker-compose.yml', 'docker-compose.yaml', 'compose.yaml', 'compose.yml', '.env'];

/** The engine name compose gives a network or volume `key` of `project` (v1 and v2 alike). */
export const ownName = (project: string, key: string) => `${project}_${key}`;

/** The image name the guard gives a service that builds without naming its image: compose v1's own default. */
export const builtImageName = (project: string, service: string) => `${project}_${service.toLowerCase()}`;

/**
 * An image name a project owns outright: one path component (no registry, no namespace) starting with
 * `<project>_`. Deployment names are chosen so that no project's prefix is another's (see the deployments plugin),
 * so `<project>_…` names exactly one project.
 */
export const ownsImageName = (project: string, image: string) => repository(image).startsWith(`${project}_`) && !repository(image).includes('/');

/** The repository of an image reference: without its tag or digest (`a/b:1` → `a/b`; `host:5000/a` stays). */
export function repository(image: string): string {
  const at = image.indexOf('@');
  const noDigest = at === -1 ? image : image.slice(0, at);
  const slash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

/** The reference with an explicit tag, as the engine stores it (`x` → `x:latest`). */
export function normalImage(image: string): string {
  if (image.includes('@')) return image;
  return repository(image) === image ? `${image}:latest` : image;
}

/**
 * Names of the build namespace (`<word>_…`, one component): only the project of that prefix may run or build them,
 * so a deployment can neither run another's build nor tag a name another deployment will build.
 */
const BUILD_NAMESPACE = /^([a-z0-9][a-z0-9-]*)_[^/]*$/;

/** The real path of `path`, resolving the symlinks of the part that exists. */
export function realish(path: string): string {
  let existing = resolve(path);
  const rest: string[] = [];
  while (!existsSync(existing) && dirname(existing) !== existing) {
    rest.unshift(basename(existing));
    existing = dirname(existing);
  }
  try {
    return resolve(realpathSync(existing), ...rest);
  } catch {
    return resolve(path);
  }
}

const inside = (folder: string, path: string) => path === folder || path.startsWith(folder + sep);

/** Sockets that hand out the container runtime (root on the host). */
const RUNTIME_SOCKET =
  /(^|\/)(docker|containerd|podman|crio|cri-dockerd)\.sock$|^\/run\/(docker|containerd|podman|crio)(\/|$)|^\/var\/run\/(docker|containerd|podman|crio)(\/|$)/;

/** Capabilities Docker grants by default: adding them again changes nothing. */
const DEFAULT_CAPS = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'NET_RAW',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);

/** Sysctls that only affect the container's own namespaces (the "safe" set of container orchestrators). */
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.core.somaxconn',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.ping_group_range',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_tw_reuse',
]);

/** Logging drivers that keep logs on this host and readable by the agent. */
const LOG_DRIVERS = new Set(['json-file', 'local', 'none']);

/** Label namespaces that belong to compose, swarm and the agent: a file must not claim another project with them. */
const RESERVED_LABEL = /^(com\.docker\.compose\.|com\.docker\.stack\.|com\.docker\.swarm\.|agent\.infrastructure|agent\.checked$)/;

/** The label the guard stamps on every service: which checked model its container was created from. */
export const STAMP_LABEL = 'agent.checked';

/** Compose projects of the agent itself are named so; their images too (`agent/objstore`, …). */
const AGENT_PROJECT = /^agent-/;
const AGENT_IMAGE = /^agent([/_.-]|$)/;

const PRIVATE_NETS = [/^10\./, /^172\.(1[6-9]|2\d|3[01])\./, /^192\.168\./, /^f[cd][0-9a-f]{2}:/i];

// ---- the walk ---------------------------------------------------------------------------------------------------

class Scope {
  readonly violations: Violation[] = [];
  readonly granted = new Set<string>();
  readonly hostPaths: HostPath[] = [];
  readonly containerNames: { service: string; name: string }[] = [];
  readonly pins: Pin[] = [];
  readonly builtImages: BuiltImage[] = [];
  readonly images: { service: string; image: string }[] = [];
  readonly ownNames: { kind: 'network' | 'volume'; key: string; name: string }[] = [];
  readonly services: Set<string>;
  readonly dir: string;

  constructor(
    readonly input: PolicyInput,
    readonly model: ModelNode,
  ) {
    this.services = new Set(Object.keys(isMap(model.services) ? model.services : {}));
    this.dir = this.real(input.dir);
  }

  real(path: string): string {
    return (this.input.realpath ?? realish)(path);
  }

  /** Records a refusal unless the exception was granted. */
  refuse(service: string | null, key: string, value: unknown, exception: string, why: string): void {
    if (this.input.exceptions.has(exception)) {
      this.granted.add(exception);
      return;
    }
    this.violations.push({ service, key, value: show(value), exception, why });
  }

  /**
   * A host path a container gets: inside the folder, or outside with an exception naming it. Returns the path the
   * model that runs names (the real one, so that the engine never walks a symlink when it mounts it), or null.
   */
  hostPath(service: string | null, key: string, source: string, writable: boolean, kind: 'volumes' | 'build' | 'secrets' | 'configs'): string | null {
    const abs = isAbsolute(source) ? resolve(source) : resolve(this.input.dir, source);
    const real = this.real(abs);
    const socket = RUNTIME_SOCKET.test(abs) || RUNTIME_SOCKET.test(real);
    const mounted = kind === 'volumes' || kind === 'secrets' || kind === 'configs';
    if (!socket && inside(this.dir, real)) {
      if (writable && mounted) this.agentFiles(service, key, abs, real);
      this.hostPaths.push({ service, key, source: abs, real, writable, mounted });
      return real;
    }
    const exception = `${kind}:${abs}`;
    // The exception may name the path as written or where it really leads (/var/run is often a link to /run).
    if (real !== abs && this.input.exceptions.has(`${kind}:${real}`)) {
      this.granted.add(`${kind}:${real}`);
      return real;
    }
    const why = socket
      ? `'${abs}' is the container runtime socket: whoever holds it is root on the host`
      : real === abs
        ? `host path '${abs}' is outside the deployment folder`
        : `host path '${abs}' leads to '${real}', outside the deployment folder`;
    this.refuse(service, key, abs, exception, why);
    return this.input.exceptions.has(exception) ? abs : null;
  }

  /**
   * The folder's root holds the agent's own files (the compose file, `.env`): a container that could write the
   * root, or one of them, could rewrite what the agent runs next, so neither is ever mounted read-write.
   */
  private agentFiles(service: string | null, key: string, abs: string, real: string): void {
    if (real === this.dir)
      this.refuse(
        service,
        key,
        abs,
        'volumes.folder:rw',
        `'${abs}' is the deployment folder itself, which holds the agent's compose file and .env: mount it read-only (':ro') or mount a subfolder`,
      );
    else if (dirname(real) === this.dir && AGENT_FILES.includes(basename(real)))
      this.refuse(
        service,
        key,
        abs,
        `volumes.agent-file:${basename(real)}`,
        `'${abs}' is a file the agent writes and runs (${basename(real)}): mount it read-only`,
      );
  }

  /** Records the value the model that runs has at `path`. */
  pin(path: (string | number)[], value: unknown): void {
    this.pins.push({ path, value });
  }

  labels(service: string | null, key: string, value: unknown): void {
    for (const name of Object.keys(toMap(value))) {
      if (RESERVED_LABEL.test(name))
        this.refuse(service, key, name, `labels:${name}`, `label '${name}' belongs to compose or the agent (it would claim another project)`);
    }
  }
}

const isMap = (v: unknown): v is ModelNode => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v)));
const asList = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined || v === null ? [] : [v]);

/** `{a: b}` or `['a=b', 'c']` as a map. */
function toMap(v: unknown): Record<string, unknown> {
  if (isMap(v)) return v;
  const out: Record<string, unknown> = {};
  for (const item of asList(v)) {
    const s = String(item);
    const eq = s.indexOf('=');
    out[eq === -1 ? s : s.slice(0, eq)] = eq === -1 ? null : s.slice(eq + 1);
  }
  return out;
}

type Check = (value: ModelNode[string], scope: Scope, service: string | null, key: string) => void;

interface KeyRule {
  status: KeyStatus;
  /** Why this key is classified so (shown in the README table). */
  note: string;
  check?: Check;
}

const allowed = (note: string): KeyRule => ({ status: 'allowed', note });
const checked = (note: string, check: Check): KeyRule => ({ status: 'checked', note, check });
/** Refused unless an admin granted `exception(value)` for exactly this value. */
const refused = (note: string, exception: (value: ModelNode[string]) => string | string[]): KeyRule => ({
  status: 'refused',
  note,
  check: (value, scope, service, key) => {
    for (const id of asList(exception(value))) scope.refuse(service, key, value, String(id), note);
  },
});

/** Namespace modes: the container's own, another service of this project, or (refused) the host's / a foreign container's. */
const namespace =
  (ownValues: string[], what: string): Check =>
  (value, scope, service, key) => {
    const v = String(value ?? '');
    if (ownValues.includes(v)) return;
    const m = /^service:(.+)$/.exec(v);
    if (m && scope.services.has(m[1]!)) return;
    if (v === 'host') return scope.refuse(service, key, v, `${key}:host`, `the host's ${what} namespace is not allowed`);
    if (v.startsWith('container:'))
      return scope.refuse(service, key, v, `${key}:${v}`, `joining the ${what} namespace of a container outside this project is not allowed`);
    scope.refuse(service, key, v, `${key}:${v}`, `${what} mode '${v}' is not allowed`);
  };

// ---- services -----------------------------------------------------------------------------------------------------

const VOLUME_MODES = new Set(['ro', 'rw', 'z', 'Z', 'nocopy', 'cached', 'delegated', 'consistent', 'private', 'rprivate']);
const PROPAGATION_SHARED = new Set(['shared', 'rshared', 'slave', 'rslave']);

const checkVolumes: Check = (value, scope, service, key) => {
  asList(value).forEach((item, index) => {
    const at = ['services', service!, key, index];
    if (typeof item === 'string') {
      const parts = item.split(':');
      if (parts.length === 1) return; // anonymous volume
      const [source, , mode = 'rw'] = parts as [string, string, string?];
      const modes = mode.split(',');
      for (const m of modes) {
        if (PROPAGATION_SHARED.has(m))
          scope.refuse(service, key, item, `volumes.propagation:${m}`, `mount propagation '${m}' lets mounts cross between the host and the container`);
        else if (!VOLUME_MODES.has(m)) scope.refuse(service, key, item, `volumes.mode:${m}`, `volume mode '${m}' is not known to the policy`);
      }
      if (source.startsWith('/') || source.startsWith('.') || source.startsWith('~')) {
        const real = scope.hostPath(service, key, source, !modes.includes('ro'), 'volumes');
        if (real && real !== source) scope.pin(at, [real, ...parts.slice(1)].join(':'));
      }
      return;
    }
    if (!isMap(item)) {
      scope.refuse(service, key, item, `volumes:${show(item)}`, 'volume entry not understood');
      return;
    }
    for (const k of Object.keys(item)) {
      if (!['type', 'source', 'target', 'read_only', 'bind', 'volume', 'tmpfs', 'consistency'].includes(k) && !k.startsWith('x-')) {
        scope.refuse(service, `${key}.${k}`, item[k], `key:${key}.${k}`, `'${k}' in a volume entry is not classified by the policy`);
      }
    }
    const type = String(item.type ?? (typeof item.source === 'string' && /^[./~]/.test(item.source) ? 'bind' : 'volume'));
    if (type === 'bind') {
      for (const k of Object.keys(isMap(item.bind) ? item.bind : {})) {
        // `create_host_path` and SELinux relabelling concern the source, which is checked; propagation below.
        if (!['propagation', 'create_host_path', 'selinux'].includes(k) && !k.startsWith('x-'))
          scope.refuse(service, `${key}.bind.${k}`, item.bind[k], `key:${key}.bind.${k}`, `bind option '${k}' is not classified by the policy`);
      }
      const propagation = item.bind?.propagation;
      if (propagation && PROPAGATION_SHARED.has(String(propagation))) {
        scope.refuse(
          service,
          `${key}.bind.propagation`,
          propagation,
          `volumes.propagation:${propagation}`,
          `mount propagation '${propagation}' lets mounts cross between the host and the container`,
        );
      }
      if (typeof item.source !== 'string' || !item.source) scope.refuse(service, key, item, 'volumes:bind-without-source', 'a bind mount needs a source');
      else {
        const real = scope.hostPath(service, key, item.source, item.read_only !== true, 'volumes');
        if (real && real !== item.source) scope.pin([...at, 'source'], real);
      }
    } else if (type === 'volume' || type === 'tmpfs') {
      // Named volumes are declared (and checked) at the top level; anonymous ones and tmpfs live in the engine.
      for (const k of Object.keys(isMap(item.volume) ? item.volume : {})) {
        // A subpath is resolved inside a volume that containers of the project can rearrange with links.
        if (k !== 'nocopy' && !k.startsWith('x-'))
          scope.refuse(
            service,
            `${key}.volume.${k}`,
            item.volume[k],
            `volumes.volume:${k}`,
            k === 'subpath'
              ? 'a volume subpath is resolved by the engine inside a volume containers can write'
              : `volume option '${k}' is not classified by the policy`,
          );
      }
    } else {
      scope.refuse(service, key, item, `volumes.type:${type}`, `mount type '${type}' is not allowed`);
    }
  });
};

const checkCapAdd: Check = (value, scope, service, key) => {
  for (const cap of asList(value)) {
    const name = String(cap).toUpperCase().replace(/^CAP_/, '');
    if (!DEFAULT_CAPS.has(name)) scope.refuse(service, key, cap, `cap_add:${name}`, `capability ${name} is not in the default set`);
  }
};

const checkSecurityOpt: Check = (value, scope, service, key) => {
  for (const opt of asList(value)) {
    const s = String(opt);
    if (/^no-new-privileges([:=](true|false))?$/.test(s)) continue;
    scope.refuse(service, key, s, `security_opt:${s}`, `security option '${s}' changes the container's confinement`);
  }
};

const checkSysctls: Check = (value, scope, service, key) => {
  for (const name of Object.keys(toMap(value))) {
    if (!SAFE_SYSCTLS.has(name)) scope.refuse(service, key, name, `sysctls:${name}`, `sysctl '${name}' is not in the namespaced safe set`);
  }
};

const checkDevices: Check = (value, scope, service, key) => {
  for (const dev of asList(value)) {
    const source = typeof dev === 'string' ? dev.split(':')[0]! : String((dev as ModelNode)?.source ?? (dev as ModelNode)?.path_on_host ?? show(dev));
    scope.refuse(service, key, source, `devices:${source}`, `host device '${source}' is not allowed`);
  }
};

const checkVolumesFrom: Check = (value, scope, service, key) => {
  for (const entry of asList(value)) {
    const s = String(entry);
    const name = s.replace(/^service:/, '').split(':')[0]!;
    if (!s.startsWith('container:') && scope.services.has(name)) continue;
    scope.refuse(service, key, s, `volumes_from:${s}`, 'mounting the volumes of a container outside this project is not allowed');
  }
};

const checkLogging: Check = (value, scope, service, key) => {
  const driver = isMap(value) ? value.driver : undefined;
  if (driver !== undefined && driver !== null && !LOG_DRIVERS.has(String(driver))) {
    scope.refuse(service, `${key}.driver`, driver, `logging:${driver}`, `logging driver '${driver}' sends logs off this host or out of the agent's reach`);
  }
};

const checkNetworkMode: Check = (value, scope, service, key) => namespace(['bridge', 'none', 'default'], 'network')(value, scope, service, key);

const BUILD_KEYS: Record<string, 'ok' | 'refused'> = {
  context: 'ok',
  dockerfile: 'ok',
  dockerfile_inline: 'ok',
  args: 'ok',
  target: 'ok',
  labels: 'ok',
  shm_size: 'ok',
  extra_hosts: 'ok',
  isolation: 'ok',
  pull: 'ok',
  no_cache: 'ok',
  tags: 'ok',
  platforms: 'ok',
  cache_from: 'ok',
  network: 'ok',
  ulimits: 'ok',
  additional_contexts: 'ok',
  ssh: 'refused',
  secrets: 'refused',
  privileged: 'refused',
  entitlements: 'refused',
  cache_to: 'refused',
};

const REMOTE = /^[a-z][a-z0-9+.-]*:\/\/|^git@/i;

const checkBuild: Check = (value, scope, service, key) => {
  const build = typeof value === 'string' ? { context: value } : value;
  if (!isMap(build)) return scope.refuse(service, key, value, 'build', 'build section not understood');
  for (const [k, v] of Object.entries(build)) {
    if (k.startsWith('x-')) continue;
    const rule = BUILD_KEYS[k];
    if (rule === 'ok') continue;
    if (k === 'privileged' && v === false) continue;
    const why = rule === 'refused' ? `build '${k}' reaches host files, host credentials or extra privileges` : `build '${k}' is not classified by the policy`;
    scope.refuse(service, `${key}.${k}`, v, `build.${k}`, why);
  }
  const context = String(build.context ?? '.');
  if (REMOTE.test(context)) {
    scope.refuse(service, `${key}.context`, context, `build.context:${context}`, 'remote build contexts are not allowed');
  } else {
    const real = scope.hostPath(service, `${key}.context`, context, false, 'build');
    if (real && typeof value !== 'string' && real !== build.context) scope.pin(['services', service!, key, 'context'], real);
    if (real && typeof build.dockerfile === 'string') {
      // Where the file really is, links resolved, must be inside the context (compose reads it from there).
      const file = scope.real(resolve(real, build.dockerfile));
      if (!inside(real, file))
        scope.refuse(service, `${key}.dockerfile`, build.dockerfile, `build.dockerfile:${build.dockerfile}`, 'the dockerfile must be inside the build context');
    }
  }
  for (const [name, ctx] of Object.entries(isMap(build.additional_contexts) ? build.additional_contexts : toMap(build.additional_contexts))) {
    const v = String(ctx ?? '');
    const ref = /^(service|target):(.+)$/.exec(v);
    if (ref && scope.services.has(ref[2]!)) continue;
    if (!REMOTE.test(v) && !/^[a-z-]+:/i.test(v)) {
      scope.hostPath(service, `${key}.additional_contexts`, v, false, 'build');
      continue;
    }
    scope.refuse(
      service,
      `${key}.additional_contexts`,
      `${name}=${v}`,
      `build.additional_contexts:${v}`,
      'an additional build context must be a folder inside the deployment folder or a service of this project',
    );
  }
  // The builder joins the network named here: another project's network or container is not the project's own.
  const network = build.network;
  if (network !== undefined && network !== null && network !== 'default' && network !== 'none') {
    const own = isMap(scope.model.networks)
      ? Object.entries(scope.model.networks).some(
          ([k, def]) => !(isMap(def) && (def.external === true || isMap(def.external))) && (network === k || network === ownName(scope.input.project, k)),
        )
      : false;
    if (!own)
      scope.refuse(
        service,
        `${key}.network`,
        network,
        `build.network:${network}`,
        network === 'host' ? "building on the host's network is not allowed" : `the build would join '${network}', which is not a network of this project`,
      );
  }
  for (const from of asList(build.cache_from)) {
    if (/(^|,)type=(local|tar)/.test(String(from)))
      scope.refuse(service, `${key}.cache_from`, from, `build.cache_from:${from}`, 'a build cache from host files is not allowed');
  }
  if (build.labels !== undefined) scope.labels(service, `${key}.labels`, build.labels);
};

/**
 * Images: what a build tags must not be a name another project runs or builds (the guard checks the others'
 * models); a name of another project's build namespace is never taken, neither to build nor to run.
 */
function checkImages(scope: Scope, service: string, def: ModelNode): void {
  const project = scope.input.project;
  const foreignNamespace = (image: string) => {
    const m = BUILD_NAMESPACE.exec(repository(image));
    return m !== null && m[1] !== project;
  };
  if (def.build === undefined || def.build === null) {
    if (typeof def.image === 'string') {
      scope.images.push({ service, image: def.image });
      if (foreignNamespace(def.image))
        scope.refuse(service, 'image', def.image, `image:${def.image}`, `'${def.image}' names an image another deployment builds (its build namespace)`);
    }
    return;
  }
  const derived = typeof def.image !== 'string';
  const main = derived ? builtImageName(project, service) : (def.image as string);
  if (derived) scope.pin(['services', service, 'image'], main);
  const tags = [main, ...asList(isMap(def.build) ? def.build.tags : undefined).map(String)];
  for (const tag of tags) {
    if (AGENT_IMAGE.test(repository(tag)) && !AGENT_PROJECT.test(project))
      scope.refuse(service, 'build', tag, `build.image:${tag}`, `'${tag}' is a name of the agent's own images`);
    if (foreignNamespace(tag))
      scope.refuse(service, 'build', tag, `build.image:${tag}`, `the build would tag '${tag}', a name of another deployment's build namespace`);
    if (tag.includes('@')) scope.refuse(service, 'build', tag, `build.image:${tag}`, 'a build cannot tag a digest reference');
  }
  scope.builtImages.push({ service, tags, derived });
}

const checkDeploy: Check = (value, scope, service, key) => {
  if (!isMap(value)) return;
  for (const k of Object.keys(value)) {
    if (
      !['mode', 'replicas', 'labels', 'update_config', 'rollback_config', 'restart_policy', 'placement', 'endpoint_mode', 'resources'].includes(k) &&
      !k.startsWith('x-')
    ) {
      scope.refuse(service, `${key}.${k}`, value[k], `key:${key}.${k}`, `deploy '${k}' is not classified by the policy`);
    }
  }
  if (value.labels !== undefined) scope.labels(service, `${key}.labels`, value.labels);
  const devices = value.resources?.reservations?.devices;
  if (devices !== undefined && asList(devices).length)
    scope.refuse(service, `${key}.resources.reservations.devices`, devices, 'gpus', 'device reservations (GPUs) give the container host devices');
};

const checkHooks: Check = (value, scope, service, key) => {
  for (const hook of asList(value)) {
    if (isMap(hook) && hook.privileged === true)
      scope.refuse(service, `${key}.privileged`, true, 'privileged', 'a privileged hook runs with every host privilege');
  }
};

const checkOomScore: Check = (value, scope, service, key) => {
  if (Number(value) < 0) scope.refuse(service, key, value, 'oom_score_adj', 'a negative OOM score makes the kernel kill host processes first');
};

const checkEnvFile: Check = () => {
  // Compose read the env files the agent copied (see source.ts); the guard checks the paths, nothing to do here.
};

const SERVICE_KEYS: Record<string, KeyRule> = {
  annotations: allowed('metadata only'),
  attach: allowed('log attachment of `up`'),
  blkio_config: allowed('I/O weights and throttles'),
  build: checked(
    'context, dockerfile and additional contexts inside the folder (links resolved), built from a private copy; the Dockerfile is parsed: `ADD` of URLs, `ONBUILD` and images of other deployments are refused; the build network is the default or one of the project; tags must not be names other projects use; refused: `ssh`, `secrets`, `privileged`, `entitlements`, `cache_to`, remote contexts, host-file caches',
    checkBuild,
  ),
  cap_add: checked("only Docker's default capabilities (adding them is a no-op); anything else needs `cap_add:<CAP>`", checkCapAdd),
  cap_drop: allowed('drops privileges'),
  cgroup: checked('`private` only; `host` needs `cgroup:host`', namespace(['', 'private'], 'cgroup')),
  cgroup_parent: refused('puts the container into an arbitrary host cgroup (escapes limits)', (v) => `cgroup_parent:${v}`),
  command: allowed('runs inside the container'),
  configs: allowed('references to top-level configs (checked there)'),
  container_name: checked('must not collide with a container of another project', (value, scope, service) => {
    if (service) scope.containerNames.push({ service, name: String(value) });
  }),
  cpu_count: allowed('limit'),
  cpu_percent: allowed('limit'),
  cpu_period: allowed('limit'),
  cpu_quota: allowed('limit'),
  cpu_rt_period: allowed('limit'),
  cpu_rt_runtime: allowed('limit'),
  cpu_shares: allowed('limit'),
  cpus: allowed('limit'),
  cpuset: allowed('limit'),
  credential_spec: refused('reads a host file or registry value (Windows)', () => 'credential_spec'),
  depends_on: allowed('ordering inside the project'),
  deploy: checked('resources, restart policy, replicas, labels; device reservations (GPUs) need `gpus`', checkDeploy),
  develop: allowed('only used by `compose watch`, which the agent never runs'),
  device_cgroup_rules: refused('opens host devices to the container', (v) => asList(v).map((r) => `device_cgroup_rules:${r}`)),
  devices: checked('every host device needs `devices:<path>`', checkDevices),
  dns: allowed('resolver of the container'),
  dns_opt: allowed('resolver options'),
  dns_search: allowed('resolver search domains'),
  domainname: allowed('inside the container'),
  entrypoint: allowed('runs inside the container'),
  env_file: checked('files inside the folder only, read by the agent without following symlinks and handed to compose as private copies', checkEnvFile),
  environment: allowed('inside the container'),
  expose: allowed('documentation of ports'),
  extends: checked('services of the same file only (`extends.file` is refused before compose reads anything)', (value, scope, service, key) => {
    if (isMap(value) && value.file !== undefined)
      scope.refuse(service, `${key}.file`, value.file, 'extends.file', 'extending a service of another file is not allowed');
  }),
  external_links: refused('links to containers outside the project', () => 'external_links'),
  extra_hosts: allowed('host entries inside the container'),
  gpus: refused('gives the container host GPUs', () => 'gpus'),
  group_add: allowed('groups inside the container'),
  healthcheck: allowed('runs inside the container'),
  hostname: allowed('inside the container'),
  image: checked("any image but another deployment's build namespace (`<deployment>_…`) or an image another project builds", () => undefined),
  init: allowed('an init process inside the container'),
  ipc: checked(
    'own, `shareable`, `none` or `service:<same project>`; `host` and `container:` need an exception',
    namespace(['', 'private', 'shareable', 'none'], 'IPC'),
  ),
  isolation: allowed('Windows isolation technology; no effect on Linux'),
  label_file: refused('reads labels from a host file', () => 'label_file'),
  labels: checked('compose, swarm and agent label namespaces are refused (they would claim another project or a checked model)', (value, scope, service, key) =>
    scope.labels(service, key, value),
  ),
  links: allowed('services of the same project'),
  logging: checked('drivers `json-file`, `local`, `none`; others need `logging:<driver>`', checkLogging),
  mac_address: allowed('inside the container network'),
  mem_limit: allowed('limit'),
  mem_reservation: allowed('limit'),
  mem_swappiness: allowed('limit'),
  memswap_limit: allowed('limit'),
  network_mode: checked('`bridge`, `none` or `service:<same project>`; `host`, `container:` and named networks need an exception', checkNetworkMode),
  networks: checked(
    'networks of the project (checked at the top level) with aliases and addresses; endpoint `driver_opts` need an exception',
    (value, scope, service, key) => {
      if (!isMap(value)) return;
      for (const [network, endpoint] of Object.entries(value)) {
        if (!isMap(endpoint)) continue;
        for (const k of Object.keys(endpoint)) {
          if (
            ['aliases', 'ipv4_address', 'ipv6_address', 'link_local_ips', 'priority', 'gw_priority', 'mac_address', 'interface_name'].includes(k) ||
            k.startsWith('x-')
          )
            continue;
          scope.refuse(service, `${key}.${network}.${k}`, endpoint[k], `networks.endpoint:${k}`, `network endpoint option '${k}' is not allowed`);
        }
      }
    },
  ),
  oom_kill_disable: checked('`true` needs `oom_kill_disable`', (value, scope, service, key) => {
    if (value === true) scope.refuse(service, key, value, 'oom_kill_disable', 'a container the OOM killer cannot stop can exhaust the host');
  }),
  oom_score_adj: checked('negative values need `oom_score_adj`', checkOomScore),
  pid: checked('own or `service:<same project>`; `host` and `container:` need an exception', namespace([''], 'PID')),
  pids_limit: allowed('limit'),
  platform: allowed('image platform'),
  ports: allowed('publishing on host ports is what deployments do'),
  post_start: checked('hooks run inside the container; `privileged: true` needs `privileged`', checkHooks),
  pre_stop: checked('hooks run inside the container; `privileged: true` needs `privileged`', checkHooks),
  privileged: checked('`true` needs `privileged`', (value, scope, service, key) => {
    if (value === true) scope.refuse(service, key, value, 'privileged', 'a privileged container has every host privilege');
  }),
  profiles: allowed('service selection'),
  provider: refused('runs an external provider program on the host', () => 'provider'),
  pull_policy: allowed('when to pull'),
  read_only: allowed('restricts the container'),
  restart: allowed('restart policy'),
  runtime: checked('`runc` only; any other runtime needs `runtime:<name>`', (value, scope, service, key) => {
    if (value !== 'runc' && value !== undefined && value !== null && value !== '')
      scope.refuse(service, key, value, `runtime:${value}`, `container runtime '${value}' is not allowed`);
  }),
  scale: allowed('number of containers'),
  secrets: allowed('references to top-level secrets (checked there)'),
  security_opt: checked('`no-new-privileges` only; anything else needs `security_opt:<value>`', checkSecurityOpt),
  shm_size: allowed('limit'),
  stdin_open: allowed('inside the container'),
  stop_grace_period: allowed('stop timing'),
  stop_signal: allowed('stop signal'),
  storage_opt: allowed('storage driver limits'),
  sysctls: checked('namespaced safe set only; others need `sysctls:<name>`', checkSysctls),
  tmpfs: allowed('memory-backed mounts'),
  tty: allowed('inside the container'),
  ulimits: allowed('limits'),
  use_api_socket: refused('mounts the Docker API socket (root on the host)', () => 'use_api_socket'),
  user: allowed('user inside the container'),
  userns_mode: checked('must stay unset; `host` needs `userns_mode:host`', namespace([''], 'user')),
  uts: checked('must stay unset; `host` needs `uts:host`', namespace([''], 'UTS')),
  volumes: checked(
    'bind sources inside the folder, run as their real paths; none below a read-write bind of the model or of an existing container of the project; the folder itself and its compose file and `.env` never read-write; named and anonymous volumes (no `subpath`), tmpfs; host paths, the runtime socket and shared propagation need an exception',
    checkVolumes,
  ),
  volumes_from: checked('services of the same project; `container:` needs an exception', checkVolumesFrom),
  working_dir: allowed('inside the container'),
};

// ---- top level ------------------------------------------------------------------------------------------------------

/**
 * A network or volume of the project may carry only the name compose derives for it (v2 writes it out, v1 leaves it
 * implicit): exactly `<project>_<key>`. Any other spelling could be another project's object.
 */
const checkOwnName = (scope: Scope, section: 'networks' | 'volumes', key: string, def: ModelNode): void => {
  const own = ownName(scope.input.project, key);
  scope.ownNames.push({ kind: section === 'networks' ? 'network' : 'volume', key, name: own });
  if (def.name === undefined || def.name === null) return;
  const name = String(def.name);
  if (name === own) return;
  scope.refuse(
    null,
    `${section}.${key}.name`,
    name,
    `${section}.name:${name}`,
    `a ${section === 'networks' ? 'network' : 'volume'} named '${name}' may belong to another project (its own name is '${own}')`,
  );
};

const checkNetworks = (value: unknown, scope: Scope): void => {
  if (!isMap(value)) return;
  for (const [key, def0] of Object.entries(value)) {
    const def = isMap(def0) ? def0 : {};
    const at = `networks.${key}`;
    for (const k of Object.keys(def)) {
      if (
        !['name', 'external', 'driver', 'driver_opts', 'ipam', 'internal', 'attachable', 'enable_ipv4', 'enable_ipv6', 'labels'].includes(k) &&
        !k.startsWith('x-')
      ) {
        scope.refuse(null, `${at}.${k}`, def[k], `key:${at}.${k}`, `network '${k}' is not classified by the policy`);
      }
    }
    const external = def.external === true || isMap(def.external);
    if (external) {
      const name = String((isMap(def.external) ? def.external.name : undefined) ?? def.name ?? key);
      scope.refuse(null, `${at}.external`, name, `networks.external:${name}`, `external network '${name}' belongs to something outside this project`);
      continue;
    }
    checkOwnName(scope, 'networks', key, def);
    if (def.driver !== undefined && def.driver !== null && def.driver !== 'bridge') {
      scope.refuse(
        null,
        `${at}.driver`,
        def.driver,
        `networks.driver:${def.driver}`,
        `network driver '${def.driver}' attaches containers beyond a private bridge`,
      );
    }
    if (isMap(def.driver_opts) && Object.keys(def.driver_opts).length) {
      scope.refuse(
        null,
        `${at}.driver_opts`,
        def.driver_opts,
        `networks.driver_opts:${key}`,
        'network driver options can attach the bridge to host interfaces',
      );
    }
    if (isMap(def.ipam)) {
      if (def.ipam.driver !== undefined && def.ipam.driver !== null && def.ipam.driver !== 'default') {
        scope.refuse(null, `${at}.ipam.driver`, def.ipam.driver, `networks.ipam:${key}`, `IPAM driver '${def.ipam.driver}' is not allowed`);
      }
      for (const cfg of asList(def.ipam.config)) {
        const subnet = isMap(cfg) ? cfg.subnet : undefined;
        if (subnet !== undefined && !PRIVATE_NETS.some((re) => re.test(String(subnet)))) {
          scope.refuse(
            null,
            `${at}.ipam.config.subnet`,
            subnet,
            `networks.ipam:${key}`,
            `subnet '${subnet}' is not a private range (it could shadow host routes)`,
          );
        }
      }
    }
    if (def.labels !== undefined) scope.labels(null, `${at}.labels`, def.labels);
  }
};

const checkTopVolumes = (value: unknown, scope: Scope): void => {
  if (!isMap(value)) return;
  for (const [key, def0] of Object.entries(value)) {
    const def = isMap(def0) ? def0 : {};
    const at = `volumes.${key}`;
    for (const k of Object.keys(def)) {
      if (!['name', 'external', 'driver', 'driver_opts', 'labels'].includes(k) && !k.startsWith('x-')) {
        scope.refuse(null, `${at}.${k}`, def[k], `key:${at}.${k}`, `volume '${k}' is not classified by the policy`);
      }
    }
    const external = def.external === true || isMap(def.external);
    if (external) {
      const name = String((isMap(def.external) ? def.external.name : undefined) ?? def.name ?? key);
      scope.refuse(null, `${at}.external`, name, `volumes.external:${name}`, `external volume '${name}' may hold another project's data`);
      continue;
    }
    checkOwnName(scope, 'volumes', key, def);
    if (def.driver !== undefined && def.driver !== null && def.driver !== 'local') {
      scope.refuse(null, `${at}.driver`, def.driver, `volumes.driver:${def.driver}`, `volume driver '${def.driver}' is not allowed`);
    }
    if (isMap(def.driver_opts) && Object.keys(def.driver_opts).length) {
      const device = def.driver_opts.device;
      scope.refuse(
        null,
        `${at}.driver_opts`,
        device ?? def.driver_opts,
        `volumes.driver_opts:${key}`,
        device !== undefined ? `volume driver options mount '${device}' from the host` : 'volume driver options can mount host paths or remote shares',
      );
    }
    if (def.labels !== undefined) scope.labels(null, `${at}.labels`, def.labels);
  }
};

/** `configs` and `secrets`: file sources are host paths (compose bind-mounts them); external ones are refused. */
const checkFileObjects =
  (section: 'configs' | 'secrets') =>
  (value: unknown, scope: Scope): void => {
    if (!isMap(value)) return;
    for (const [key, def0] of Object.entries(value)) {
      const def = isMap(def0) ? def0 : {};
      const at = `${section}.${key}`;
      for (const k of Object.keys(def)) {
        if (!['name', 'file', 'environment', 'content', 'external', 'labels', 'template_driver'].includes(k) && !k.startsWith('x-')) {
          scope.refuse(null, `${at}.${k}`, def[k], `key:${at}.${k}`, `'${k}' is not classified by the policy`);
        }
      }
      if (def.external === true || isMap(def.external))
        scope.refuse(null, `${at}.external`, key, `${section}.external:${key}`, `external ${section} are swarm objects outside this project`);
      if (typeof def.file === 'string') {
        const real = scope.hostPath(null, `${at}.file`, def.file, false, section);
        if (real && real !== def.file) scope.pin([section, key, 'file'], real);
      }
      if (def.labels !== undefined) scope.labels(null, `${at}.labels`, def.labels);
    }
  };

const TOP_LEVEL: Record<string, KeyRule & { checkTop?: (value: unknown, scope: Scope) => void }> = {
  version: allowed('informative'),
  name: checked('must be the project (deployment) name', (value, scope) => {
    if (String(value) !== scope.input.project) scope.refuse(null, 'name', value, `name:${value}`, `the project name must be '${scope.input.project}'`);
  }),
  services: checked('every service key is classified in the table below', () => undefined),
  networks: {
    ...checked(
      'own bridge networks named exactly `<project>_<key>` (private IPAM subnets); `external`, other drivers, `driver_opts` and other names need an exception',
      () => undefined,
    ),
    checkTop: checkNetworks,
  },
  volumes: {
    ...checked(
      'own local volumes named exactly `<project>_<key>`; `external`, other drivers, `driver_opts` (they can bind host paths) and other names need an exception',
      () => undefined,
    ),
    checkTop: checkTopVolumes,
  },
  configs: {
    ...checked('`file` inside the folder (as a bind mount), `content`, `environment`; `external` needs an exception', () => undefined),
    checkTop: checkFileObjects('configs'),
  },
  secrets: {
    ...checked('`file` inside the folder (as a bind mount), `content`, `environment`; `external` needs an exception', () => undefined),
    checkTop: checkFileObjects('secrets'),
  },
  include: refused('pulls in other files (refused before compose reads anything)', () => 'include'),
  models: refused('AI model runners outside the container model', () => 'models'),
};

/**
 * Checks a canonical model. Host paths are resolved against the real file system (symlinks followed, so a link out
 * of the folder is seen for what it is); a host path below a read-write bind mount of the project is refused too,
 * because a container could replace it with a symlink before the engine mounts it at the next (re)start.
 */
export function checkModel(model: ModelNode, input: PolicyInput): PolicyResult {
  const scope = new Scope(input, model);
  for (const [key, value] of Object.entries(model)) {
    if (key.startsWith('x-')) continue;
    const rule = TOP_LEVEL[key];
    if (!rule) {
      scope.refuse(null, key, value, `key:${key}`, `top-level key '${key}' is not classified by the policy`);
      continue;
    }
    rule.check?.(value, scope, null, key);
    rule.checkTop?.(value, scope);
  }
  let defaultNetwork = false;
  for (const [service, def] of Object.entries(isMap(model.services) ? model.services : {})) {
    if (!isMap(def)) continue;
    for (const [key, value] of Object.entries(def)) {
      if (key.startsWith('x-')) continue;
      const rule = SERVICE_KEYS[key];
      if (!rule) scope.refuse(service, key, value, `key:${key}`, `service key '${key}' is not classified by the policy`);
      else rule.check?.(value, scope, service, key);
    }
    checkImages(scope, service, def);
    if (def.networks === undefined && def.network_mode === undefined) defaultNetwork = true;
  }
  // Compose v1 creates `<project>_default` for services that name no network without writing it into the model.
  if (defaultNetwork && !(isMap(model.networks) && 'default' in model.networks))
    scope.ownNames.push({ kind: 'network', key: 'default', name: ownName(input.project, 'default') });
  // A writable bind is a folder the container can rearrange: nothing the engine mounts may sit below it.
  const writable = scope.hostPaths.filter((p) => p.writable);
  for (const p of scope.hostPaths) {
    const above = writable.find((w) => w.real !== p.real && inside(w.real, p.real));
    if (above) {
      scope.refuse(
        p.service,
        p.key,
        p.source,
        `volumes.nested:${p.real}`,
        `'${p.source}' lies below '${above.source}', which ${above.service ? `service '${above.service}'` : 'the project'} mounts read-write: a container could replace it with a symlink before the next start`,
      );
    }
  }
  return {
    violations: scope.violations,
    granted: [...scope.granted].sort(),
    hostPaths: scope.hostPaths,
    containerNames: scope.containerNames,
    pins: scope.pins,
    builtImages: scope.builtImages,
    images: scope.images,
    ownNames: scope.ownNames,
  };
}

/**
 * Re-checks the host paths of a model before a start: a path that now leads somewhere else (a symlink planted
 * since the check) is refused. Returns the violations.
 */
export function recheckHostPaths(paths: HostPath[], input: PolicyInput): Violation[] {
  const real = input.realpath ?? realish;
  const dir = real(input.dir);
  const out: Violation[] = [];
  for (const p of paths) {
    // The model that runs names the real path: no component of it may have become a link since.
    const now = real(p.real);
    if (now === p.real && inside(dir, now)) continue;
    if (input.exceptions.has(`volumes:${now}`)) continue;
    out.push({
      service: p.service,
      key: p.key,
      value: p.source,
      exception: `volumes:${now}`,
      why: `'${p.source}' now leads to '${now}' (it was '${p.real}' when checked): something replaced it with a symlink`,
    });
  }
  return out;
}

/** Whether the policy knows a key (anything else is not a compose key either, or one the policy refuses). */
export function isClassifiedKey(level: 'top' | 'service', key: string): boolean {
  return Object.prototype.hasOwnProperty.call(level === 'top' ? TOP_LEVEL : SERVICE_KEYS, key);
}

/** The classification of every key, for the README and for tests that keep the two in step. */
export function policyTable(): { section: string; key: string; status: KeyStatus; note: string }[] {
  return [
    ...Object.entries(TOP_LEVEL).map(([key, r]) => ({ section: 'top level', key, status: r.status, note: r.note })),
    ...Object.entries(SERVICE_KEYS).map(([key, r]) => ({ section: 'service', key, status: r.status, note: r.note })),
  ];
}

/** A container that exists on the engine, as the guard compares it with what is about to run. */
export interface ExistingContainer {
  id: string;
  name: string;
  project: string | null;
  service: string | null;
  state: string;
  image: string;
  labels: Record<string, string>;
  mounts: { type: string; source: string; rw: boolean }[];
}

/**
 * Containers that could rearrange what the project is about to mount: a read-write bind of theirs lies strictly
 * above a host path the model mounts (or reads to build), so they could swap a folder of that path for a symlink
 * while the engine mounts it. They are removed before anything of the model is created or started.
 */
export function containersAbove(paths: HostPath[], containers: ExistingContainer[], realpath: (p: string) => string = realish): ExistingContainer[] {
  return containers.filter((c) =>
    c.mounts.some((m) => {
      if (m.type !== 'bind' || !m.rw) return false;
      // Where it was mounted from (as written) and where that leads now: either may be what the container holds.
      const sources = new Set([resolve(m.source), realpath(m.source)]);
      return paths.some((p) => [...sources].some((s) => s !== p.real && inside(s, p.real)));
    }),
  );
}

/**
 * Containers with a bind mount strictly below a read-write bind the model mounts: the engine resolves their sources
 * again whenever they start (a restart policy restarts them without anyone asking), and by then a container of the
 * model may have replaced a folder on the way with a symlink. Older containers of the kind are removed before
 * anything of the model is created or started.
 */
export function containersBelow(paths: HostPath[], containers: ExistingContainer[], realpath: (p: string) => string = realish): ExistingContainer[] {
  const writable = paths.filter((p) => p.writable && p.mounted);
  return containers.filter((c) =>
    c.mounts.some((m) => {
      if (m.type !== 'bind') return false;
      const sources = new Set([resolve(m.source), realpath(m.source)]);
      return writable.some((w) => [...sources].some((s) => s !== w.real && inside(w.real, s)));
    }),
  );
}
