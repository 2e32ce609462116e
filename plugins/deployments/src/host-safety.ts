/**
 * The host-safety policy (on by default; an admin can relax it in the settings): a deployment must not silently
 * mean root on the host. Refused: privileged containers, host namespaces, root-equivalent capabilities,
 * unconfined security profiles, the Docker socket, and any host path (bind mount, build context, env file, …)
 * outside the deployment folder. Checked after `${VAR}` interpolation with the deployment's `.env`.
 */
import { existsSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, resolve, sep } from 'node:path';
import { errors } from '@agent/sdk';
import { interpolate } from './interpolate.js';

const HOST_NAMESPACES = ['network_mode', 'pid', 'ipc', 'uts', 'userns_mode', 'cgroup'];
const ROOT_CAPS = new Set(['ALL', 'SYS_ADMIN', 'SYS_MODULE', 'SYS_RAWIO', 'SYS_PTRACE', 'DAC_READ_SEARCH']);

const refuse = (service: string | null, key: string, why: string) =>
  errors.badRequest(`${service ? `service '${service}': ` : ''}${key}: ${why} (refused by the host-safety policy)`, 'HOST_SAFETY', { service, key });

/** The real path of `p`, resolving symlinks of the part that exists. */
function realish(p: string): string {
  let existing = p;
  const rest: string[] = [];
  while (!existsSync(existing) && dirname(existing) !== existing) {
    rest.unshift(existing.slice(dirname(existing).length + 1));
    existing = dirname(existing);
  }
  try {
    return resolve(realpathSync(existing), ...rest);
  } catch {
    return p;
  }
}

function inside(folder: string, hostPath: string): boolean {
  if (hostPath.startsWith('~')) return false;
  const base = realish(folder);
  const target = realish(isAbsolute(hostPath) ? resolve(hostPath) : resolve(folder, hostPath));
  return target === base || target.startsWith(base + sep);
}

const looksLikePath = (s: string) => s.startsWith('/') || s.startsWith('.') || s.startsWith('~');
const mentionsSocket = (s: unknown) => typeof s === 'string' && /docker\.sock|containerd\.sock|podman\.sock/.test(s);

/** Throws 400 HOST_SAFETY naming the service and key of the first violation. */
export function checkHostSafety(parsed: Record<string, any>, folder: string, env: Record<string, string>): void {
  const compose = interpolate(parsed, env);
  const hostPath = (service: string | null, key: string, path: unknown) => {
    if (typeof path !== 'string' || !path) return;
    if (mentionsSocket(path)) throw refuse(service, key, `the container runtime socket (${path}) is not allowed`);
    if (!inside(folder, path)) throw refuse(service, key, `host path '${path}' is outside the deployment folder`);
  };

  for (const [name, svc] of Object.entries((compose.services ?? {}) as Record<string, any>)) {
    if (!svc || typeof svc !== 'object') continue;
    if (svc.privileged === true || svc.privileged === 'true') throw refuse(name, 'privileged', 'privileged containers are not allowed');
    for (const key of HOST_NAMESPACES) {
      if (svc[key] === 'host') throw refuse(name, key, `the host ${key === 'network_mode' ? 'network' : key.replace('_mode', '')} namespace is not allowed`);
    }
    for (const cap of Array.isArray(svc.cap_add) ? svc.cap_add : []) {
      const c = String(cap).toUpperCase().replace(/^CAP_/, '');
      if (ROOT_CAPS.has(c)) throw refuse(name, 'cap_add', `capability ${c} is not allowed`);
    }
    for (const opt of Array.isArray(svc.security_opt) ? svc.security_opt : []) {
      if (/unconfined/i.test(String(opt))) throw refuse(name, 'security_opt', `'${opt}' is not allowed`);
    }
    for (const dev of Array.isArray(svc.devices) ? svc.devices : []) {
      const source = typeof dev === 'string' ? dev.split(':')[0] : dev?.source;
      throw refuse(name, 'devices', `host device '${source}' is not allowed`);
    }
    for (const vol of Array.isArray(svc.volumes) ? svc.volumes : []) {
      if (typeof vol === 'string') {
        const source = vol.split(':')[0]!;
        if (mentionsSocket(vol)) throw refuse(name, 'volumes', `the container runtime socket (${vol}) is not allowed`);
        if (vol.includes(':') && looksLikePath(source)) hostPath(name, 'volumes', source);
      } else if (vol && typeof vol === 'object') {
        if (mentionsSocket(vol.source) || mentionsSocket(vol.target)) throw refuse(name, 'volumes', 'the container runtime socket is not allowed');
        if (vol.type === 'bind' || (vol.type === undefined && typeof vol.source === 'string' && looksLikePath(vol.source))) hostPath(name, 'volumes', vol.source);
      }
    }
    const build = svc.build;
    if (typeof build === 'string') hostPath(name, 'build', build);
    else if (build && typeof build === 'object') {
      hostPath(name, 'build.context', build.context ?? '.');
      if (typeof build.dockerfile === 'string' && isAbsolute(build.dockerfile)) hostPath(name, 'build.dockerfile', build.dockerfile);
    }
    const envFiles = typeof svc.env_file === 'string' ? [svc.env_file] : Array.isArray(svc.env_file) ? svc.env_file : [];
    for (const f of envFiles) hostPath(name, 'env_file', typeof f === 'string' ? f : f?.path);
    if (svc.extends && typeof svc.extends === 'object' && svc.extends.file) hostPath(name, 'extends.file', svc.extends.file);
  }
  for (const [vname, vol] of Object.entries((compose.volumes ?? {}) as Record<string, any>)) {
    const opts = vol?.driver_opts;
    if (opts && typeof opts === 'object' && (opts.device !== undefined || /bind/.test(String(opts.o ?? '')))) {
      hostPath(null, `volumes.${vname}.driver_opts.device`, String(opts.device ?? ''));
    }
  }
  for (const section of ['configs', 'secrets']) {
    for (const [cname, item] of Object.entries((compose[section] ?? {}) as Record<string, any>)) {
      if (item && typeof item === 'object' && typeof item.file === 'string') hostPath(null, `${section}.${cname}.file`, item.file);
    }
  }
}
