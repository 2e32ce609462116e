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
  /** With symlinks resolved (the part that exists). */
  real: string;
  /** A container can write below it. */
  writable: boolean;
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
}

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
const RESERVED_LABEL = /^(com\.docker\.compose\.|com\.docker\.stack\.|com\.docker\.swarm\.|agent\.infrastructure)/;

const PRIVATE_NETS = [/^10\./, /^172\.(1[6-9]|2\d|3[01])\./, /^192\.168\./, /^f[cd][0-9a-f]{2}:/i];

// ---- the walk ---------------------------------------------------------------------------------------------------

class Scope {
  readonly violations: Violation[] = [];
  readonly granted = new Set<string>();
  readonly hostPaths: HostPath[] = [];
  readonly containerNames: { service: string; name: string }[] = [];
  readonly services: Set<string>;
  readonly dir: string;

  constructor(
    readonly input: PolicyInput,
    readonly model: Record<string, any>,
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

  /** A host path a container gets: inside the folder, or outside with an exception naming it. */
  hostPath(service: string | null, key: string, source: string, writable: boolean, kind: 'volumes' | 'build' | 'secrets' | 'configs'): void {
    const abs = isAbsolute(source) ? resolve(source) : resolve(this.input.dir, source);
    const real = this.real(abs);
    const socket = RUNTIME_SOCKET.test(abs) || RUNTIME_SOCKET.test(real);
    if (!socket && inside(this.dir, real)) {
      this.hostPaths.push({ service, key, source: abs, real, writable });
      return;
    }
    const exception = `${kind}:${abs}`;
    // The exception may name the path as written or where it really leads (/var/run is often a link to /run).
    if (real !== abs && this.input.exceptions.has(`${kind}:${real}`)) {
      this.granted.add(`${kind}:${real}`);
      return;
    }
    const why = socket
      ? `'${abs}' is the container runtime socket: whoever holds it is root on the host`
      : real === abs
        ? `host path '${abs}' is outside the deployment folder`
        : `host path '${abs}' leads to '${real}', outside the deployment folder`;
    this.refuse(service, key, abs, exception, why);
  }

  labels(service: string | null, key: string, value: unknown): void {
    for (const name of Object.keys(toMap(value))) {
      if (RESERVED_LABEL.test(name))
        this.refuse(service, key, name, `labels:${name}`, `label '${name}' belongs to compose or the agent (it would claim another project)`);
    }
  }
}

const isMap = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);
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

type Check = (value: any, scope: Scope, service: string | null, key: string) => void;

interface KeyRule {
  status: KeyStatus;
  /** Why this key is classified so (shown in the README table). */
  note: string;
  check?: Check;
}

const allowed = (note: string): KeyRule => ({ status: 'allowed', note });
const checked = (note: string, check: Check): KeyRule => ({ status: 'checked', note, check });
/** Refused unless an admin granted `exception(value)` for exactly this value. */
const refused = (note: string, exception: (value: any) => string | string[]): KeyRule => ({
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
  for (const item of asList(value)) {
    if (typeof item === 'string') {
      const parts = item.split(':');
      if (parts.length === 1) continue; // anonymous volume
      const [source, , mode = 'rw'] = parts as [string, string, string?];
      const modes = mode.split(',');
      for (const m of modes) {
        if (PROPAGATION_SHARED.has(m))
          scope.refuse(service, key, item, `volumes.propagation:${m}`, `mount propagation '${m}' lets mounts cross between the host and the container`);
        else if (!VOLUME_MODES.has(m)) scope.refuse(service, key, item, `volumes.mode:${m}`, `volume mode '${m}' is not known to the policy`);
      }
      if (source.startsWith('/') || source.startsWith('.') || source.startsWith('~')) scope.hostPath(service, key, source, !modes.includes('ro'), 'volumes');
      continue;
    }
    if (!isMap(item)) {
      scope.refuse(service, key, item, `volumes:${show(item)}`, 'volume entry not understood');
      continue;
    }
    for (const k of Object.keys(item)) {
      if (!['type', 'source', 'target', 'read_only', 'bind', 'volume', 'tmpfs', 'consistency'].includes(k) && !k.startsWith('x-')) {
        scope.refuse(service, `${key}.${k}`, item[k], `key:${key}.${k}`, `'${k}' in a volume entry is not classified by the policy`);
      }
    }
    const type = String(item.type ?? (typeof item.source === 'string' && /^[./~]/.test(item.source) ? 'bind' : 'volume'));
    if (type === 'bind') {
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
      else scope.hostPath(service, key, item.source, item.read_only !== true, 'volumes');
    } else if (type === 'volume' || type === 'tmpfs') {
      // Named volumes are declared (and checked) at the top level; anonymous ones and tmpfs live in the engine.
    } else {
      scope.refuse(service, key, item, `volumes.type:${type}`, `mount type '${type}' is not allowed`);
    }
  }
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
    const source = typeof dev === 'string' ? dev.split(':')[0]! : String((dev as any)?.source ?? (dev as any)?.path_on_host ?? show(dev));
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
  additional_contexts: 'refused',
  ssh: 'refused',
  secrets: 'refused',
  privileged: 'refused',
  entitlements: 'refused',
  cache_to: 'refused',
};

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
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(context) || context.startsWith('git@')) {
    scope.refuse(service, `${key}.context`, context, `build.context:${context}`, 'remote build contexts are not allowed');
  } else {
    scope.hostPath(service, `${key}.context`, context, false, 'build');
    if (typeof build.dockerfile === 'string') {
      const ctx = isAbsolute(context) ? context : resolve(scope.input.dir, context);
      const file = resolve(ctx, build.dockerfile);
      if (!inside(resolve(ctx), file))
        scope.refuse(service, `${key}.dockerfile`, build.dockerfile, `build:${file}`, 'the dockerfile must be inside the build context');
    }
  }
  if (build.network === 'host') scope.refuse(service, `${key}.network`, 'host', 'build.network:host', "building on the host's network is not allowed");
  for (const from of asList(build.cache_from)) {
    if (/(^|,)type=(local|tar)/.test(String(from)))
      scope.refuse(service, `${key}.cache_from`, from, `build.cache_from:${from}`, 'a build cache from host files is not allowed');
  }
  if (build.labels !== undefined) scope.labels(service, `${key}.labels`, build.labels);
};

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
    'context (and dockerfile) inside the folder; refused: `additional_contexts`, `ssh`, `secrets`, `privileged`, `entitlements`, `cache_to`, host network, remote contexts, host-file caches',
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
  image: allowed('any image'),
  init: allowed('an init process inside the container'),
  ipc: checked(
    'own, `shareable`, `none` or `service:<same project>`; `host` and `container:` need an exception',
    namespace(['', 'private', 'shareable', 'none'], 'IPC'),
  ),
  isolation: allowed('Windows isolation technology; no effect on Linux'),
  label_file: refused('reads labels from a host file', () => 'label_file'),
  labels: checked('compose, swarm and agent label namespaces are refused (they would claim another project)', (value, scope, service, key) =>
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
    'bind sources inside the folder (symlinks resolved; none below a read-write bind of the same project); named and anonymous volumes, tmpfs; host paths, the runtime socket and shared propagation need an exception',
    checkVolumes,
  ),
  volumes_from: checked('services of the same project; `container:` needs an exception', checkVolumesFrom),
  working_dir: allowed('inside the container'),
};

// ---- top level ------------------------------------------------------------------------------------------------------

/** Compose's default name of a network or volume of the project (v2 writes it out, v1 leaves it implicit). */
const defaultName = (project: string, key: string) => [`${project}_${key}`, `${project}-${key}`];

const checkOwnName = (scope: Scope, section: string, key: string, def: Record<string, any>): void => {
  if (def.name === undefined || def.name === null) return;
  const name = String(def.name);
  if (defaultName(scope.input.project, key).includes(name)) return;
  scope.refuse(
    null,
    `${section}.${key}.name`,
    name,
    `${section}.name:${name}`,
    `a ${section === 'networks' ? 'network' : 'volume'} named '${name}' may belong to another project`,
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
      if (typeof def.file === 'string') scope.hostPath(null, `${at}.file`, def.file, false, section);
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
    ...checked('own bridge networks (private IPAM subnets); `external`, other drivers, `driver_opts` and foreign names need an exception', () => undefined),
    checkTop: checkNetworks,
  },
  volumes: {
    ...checked('own local volumes; `external`, other drivers, `driver_opts` (they can bind host paths) and foreign names need an exception', () => undefined),
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
export function checkModel(model: Record<string, any>, input: PolicyInput): PolicyResult {
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
  for (const [service, def] of Object.entries(isMap(model.services) ? model.services : {})) {
    if (!isMap(def)) continue;
    for (const [key, value] of Object.entries(def)) {
      if (key.startsWith('x-')) continue;
      const rule = SERVICE_KEYS[key];
      if (!rule) scope.refuse(service, key, value, `key:${key}`, `service key '${key}' is not classified by the policy`);
      else rule.check?.(value, scope, service, key);
    }
  }
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
  return { violations: scope.violations, granted: [...scope.granted].sort(), hostPaths: scope.hostPaths, containerNames: scope.containerNames };
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
    const now = real(p.source);
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
