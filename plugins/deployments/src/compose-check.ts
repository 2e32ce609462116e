/**
 * Compose file checks before anything is written: YAML syntax (400 with line and column), compose structure
 * (known keys, services with an image or build), and the host-safety policy.
 */
import { LineCounter, parseDocument, isMap, isScalar, type Document } from 'yaml';
import { errors } from '@agent/sdk';

const TOP_LEVEL = new Set(['version', 'name', 'services', 'volumes', 'networks', 'configs', 'secrets', 'include']);
const SERVICE_KEYS = new Set([
  'annotations', 'attach', 'blkio_config', 'build', 'cap_add', 'cap_drop', 'cgroup', 'cgroup_parent', 'command', 'configs',
  'container_name', 'cpu_count', 'cpu_percent', 'cpu_period', 'cpu_quota', 'cpu_rt_period', 'cpu_rt_runtime', 'cpu_shares',
  'cpus', 'cpuset', 'credential_spec', 'depends_on', 'deploy', 'develop', 'device_cgroup_rules', 'devices', 'dns', 'dns_opt',
  'dns_search', 'domainname', 'entrypoint', 'env_file', 'environment', 'expose', 'extends', 'external_links', 'extra_hosts',
  'group_add', 'healthcheck', 'hostname', 'image', 'init', 'ipc', 'isolation', 'labels', 'links', 'logging', 'mac_address',
  'mem_limit', 'mem_reservation', 'mem_swappiness', 'memswap_limit', 'network_mode', 'networks', 'oom_kill_disable',
  'oom_score_adj', 'pid', 'pids_limit', 'platform', 'ports', 'privileged', 'profiles', 'pull_policy', 'read_only', 'restart',
  'runtime', 'scale', 'secrets', 'security_opt', 'shm_size', 'stdin_open', 'stop_grace_period', 'stop_signal', 'storage_opt',
  'sysctls', 'tmpfs', 'tty', 'ulimits', 'user', 'userns_mode', 'uts', 'volumes', 'volumes_from', 'working_dir',
]);
const SERVICE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;

export interface ParsedCompose {
  parsed: Record<string, any>;
  services: string[];
}

/** Where a key path sits in the text (the key itself, or the nearest parent found), as ` (line L, column C)`. */
function position(doc: Document, counter: LineCounter, path: (string | number)[]): string {
  for (let i = path.length; i > 0; i--) {
    const parent = i === 1 ? doc.contents : doc.getIn(path.slice(0, i - 1), true);
    if (!isMap(parent)) continue;
    const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === path[i - 1]);
    const range = (pair?.key as { range?: [number, number, number] } | undefined)?.range;
    if (range) {
      const { line, col } = counter.linePos(range[0]);
      return ` (line ${line}, column ${col})`;
    }
  }
  return '';
}

const invalid = (message: string, extra: Record<string, unknown> = {}) =>
  errors.badRequest(message, 'INVALID_COMPOSE', { field: 'compose_content', ...extra });

/** Parses and checks the structure; throws 400 INVALID_YAML / INVALID_COMPOSE. */
export function parseCompose(text: string, deployment?: string): ParsedCompose {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, prettyErrors: true, uniqueKeys: true, merge: true });
  if (doc.errors.length) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    const first = e.message.split('\n')[0];
    throw errors.badRequest(`compose_content: invalid YAML${pos ? ` at line ${pos.line}, column ${pos.col}` : ''}: ${first}`, 'INVALID_YAML', {
      field: 'compose_content', line: pos?.line ?? null, column: pos?.col ?? null,
    });
  }
  if (!isMap(doc.contents)) throw invalid('compose_content: the file must be a mapping with a `services` key');
  const parsed = doc.toJS({ maxAliasCount: 100 }) as Record<string, any>;
  const at = (path: (string | number)[]) => position(doc, counter, path);
  for (const key of Object.keys(parsed)) {
    if (!TOP_LEVEL.has(key) && !key.startsWith('x-')) throw invalid(`compose_content: unknown top-level key '${key}'${at([key])}`, { key });
  }
  if (parsed.name !== undefined && parsed.name !== deployment) {
    throw invalid(`compose_content: 'name' must be the deployment name ('${deployment ?? ''}') or absent${at(['name'])}`, { key: 'name' });
  }
  if (parsed.include !== undefined) throw invalid(`compose_content: 'include' is not supported${at(['include'])}`, { key: 'include' });
  const services = parsed.services;
  if (services === undefined || services === null || typeof services !== 'object' || Array.isArray(services) || Object.keys(services).length === 0) {
    throw invalid(`compose_content: 'services' must be a mapping with at least one service${at(['services'])}`, { key: 'services' });
  }
  for (const [name, svc] of Object.entries(services as Record<string, any>)) {
    if (!SERVICE_NAME.test(name)) throw invalid(`compose_content: invalid service name '${name}'${at(['services', name])}`, { service: name });
    if (!svc || typeof svc !== 'object' || Array.isArray(svc)) throw invalid(`compose_content: service '${name}' must be a mapping${at(['services', name])}`, { service: name });
    for (const key of Object.keys(svc)) {
      if (!SERVICE_KEYS.has(key) && !key.startsWith('x-')) throw invalid(`compose_content: service '${name}': unknown key '${key}'${at(['services', name, key])}`, { service: name, key });
    }
    if (svc.image === undefined && svc.build === undefined && svc.extends === undefined) {
      throw invalid(`compose_content: service '${name}' needs an 'image' or a 'build'${at(['services', name])}`, { service: name, key: 'image' });
    }
    if (svc.image !== undefined && (typeof svc.image !== 'string' || !svc.image.trim())) {
      throw invalid(`compose_content: service '${name}': 'image' must be a non-empty string${at(['services', name, 'image'])}`, { service: name, key: 'image' });
    }
    for (const listKey of ['ports', 'volumes', 'cap_add', 'security_opt', 'devices', 'expose']) {
      if (svc[listKey] !== undefined && !Array.isArray(svc[listKey])) {
        throw invalid(`compose_content: service '${name}': '${listKey}' must be a list${at(['services', name, listKey])}`, { service: name, key: listKey });
      }
    }
  }
  for (const section of ['volumes', 'networks', 'configs', 'secrets']) {
    const value = parsed[section];
    if (value !== undefined && value !== null && (typeof value !== 'object' || Array.isArray(value))) {
      throw invalid(`compose_content: '${section}' must be a mapping${at([section])}`, { key: section });
    }
  }
  return { parsed, services: Object.keys(services) };
}
