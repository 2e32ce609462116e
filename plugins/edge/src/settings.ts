/**
 * Which nginx the edge drives, and where its files are: the `proxy` section of agent.yaml resolved for one mode.
 *
 * - `own` (the default): the agent runs an nginx of its own. Its main configuration, the agent's folder, logs, pid
 *   file and temporary files are below the plugin's data folder, it listens on unprivileged ports (8080/8443), and
 *   it is started and stopped with the agent (nginx/own.ts). A quick try changes nothing of the host, and agents
 *   with different data folders each run their own.
 * - `system`: the host's nginx, as before own mode existed: the agent writes `/etc/nginx/agent` (which the host's
 *   nginx.conf includes), tests with `nginx -t` and reloads with `nginx -s reload`; ports 80/443. What the service
 *   installer writes into agent.yaml.
 *
 * Without `proxy.mode`, a configuration that names the host's nginx (`config_dir`, `test_command` or
 * `reload_command`) means system mode: it was written for it (before this option existed, or for an nginx run
 * elsewhere, as the tests do).
 */
import { isAbsolute, join, resolve } from 'node:path';
import type { EdgeConfig } from './config.js';

export type ProxyMode = 'own' | 'system';

/** The files of the agent's own nginx, all below `prefix`. */
export interface OwnPaths {
  /** nginx's prefix (`-p`): `<data>/plugins/edge/nginx`. */
  prefix: string;
  /** The main configuration the agent writes at every start (`-c`). */
  conf: string;
  pidFile: string;
  tempDir: string;
  logsDir: string;
  /** `proxy.nginx` as configured: a name looked up when the instance starts, or a path. */
  program: string;
}

export interface ProxySettings {
  mode: ProxyMode;
  /** Why this mode, for people (doctor, logs): a phrase. */
  reason: string;
  configDir: string;
  webroot: string;
  accessLog: string;
  errorLog: string;
  httpPort: number;
  httpsPort: number;
  listenAddress: string;
  defaultServer: boolean;
  /** system mode: the configured commands; own mode: null (own.ts builds them for its instance). */
  testCommand: string[] | null;
  reloadCommand: string[] | null;
  own: OwnPaths | null;
}

/** Keys that say where the host's nginx reads the agent's files and how it is driven: they belong to system mode. */
const SYSTEM_KEYS = ['config_dir', 'test_command', 'reload_command'] as const;

/** A configuration nginx cannot take as written (a conflict of keys, a path it cannot quote). */
export class ProxyConfigError extends Error {}

export function resolveProxy(proxy: EdgeConfig['proxy'], pluginDataDir: string): ProxySettings {
  const systemKeys = SYSTEM_KEYS.filter((k) => proxy[k] !== undefined);
  let mode: ProxyMode;
  let reason: string;
  if (proxy.mode) {
    mode = proxy.mode;
    reason = 'set in the configuration';
    if (mode === 'own' && systemKeys.length)
      throw new ProxyConfigError(
        `config proxy: ${systemKeys.map((k) => `proxy.${k}`).join(', ')} ${systemKeys.length > 1 ? 'apply' : 'applies'} to proxy.mode: system only ` +
          '(the own instance keeps its files under the data folder and is driven by the agent): remove it, or set proxy.mode: system',
      );
  } else if (systemKeys.length) {
    mode = 'system';
    reason = `implied by proxy.${systemKeys[0]}, which names the host's nginx`;
  } else {
    mode = 'own';
    reason = "the default: no proxy.mode and no setting naming the host's nginx";
  }

  if (mode === 'system') {
    const configDir = proxy.config_dir ?? '/etc/nginx/agent';
    return {
      mode,
      reason,
      configDir,
      webroot: proxy.webroot || join(configDir, 'acme-webroot'),
      accessLog: proxy.access_log ?? '/var/log/nginx/agent-access.log',
      errorLog: proxy.error_log ?? '/var/log/nginx/error.log',
      httpPort: proxy.http_port ?? 80,
      httpsPort: proxy.https_port ?? 443,
      listenAddress: proxy.listen_address,
      defaultServer: proxy.default_server,
      testCommand: proxy.test_command ?? ['nginx', '-t'],
      reloadCommand: proxy.reload_command ?? ['nginx', '-s', 'reload'],
      own: null,
    };
  }

  const prefix = resolve(pluginDataDir, 'nginx');
  const logsDir = join(prefix, 'logs');
  const settings: ProxySettings = {
    mode,
    reason,
    configDir: join(prefix, 'agent'),
    webroot: proxy.webroot || join(prefix, 'agent', 'acme-webroot'),
    accessLog: proxy.access_log ?? join(logsDir, 'access.log'),
    errorLog: proxy.error_log ?? join(logsDir, 'error.log'),
    httpPort: proxy.http_port ?? 8080,
    httpsPort: proxy.https_port ?? 8443,
    listenAddress: proxy.listen_address,
    defaultServer: proxy.default_server,
    testCommand: null,
    reloadCommand: null,
    own: { prefix, conf: join(prefix, 'nginx.conf'), pidFile: join(prefix, 'nginx.pid'), tempDir: join(prefix, 'tmp'), logsDir, program: proxy.nginx },
  };
  if (settings.httpPort === settings.httpsPort)
    throw new ProxyConfigError(`config proxy: proxy.http_port and proxy.https_port are both ${settings.httpPort}: the own instance needs two ports`);
  // The paths are written into nginx.conf between double quotes, where nginx gives `"`, `\` and `$` a meaning.
  for (const [key, path] of [
    ['data_dir', prefix],
    ['proxy.access_log', settings.accessLog],
    ['proxy.error_log', settings.errorLog],
    ['proxy.webroot', settings.webroot],
  ] as const) {
    if (!isAbsolute(path) || /["\\$\n\r;{}]/.test(path))
      throw new ProxyConfigError(
        `config ${key}: '${path}' cannot be written into the own nginx's configuration (an absolute path without " \\ $ ; { } or line breaks)`,
      );
  }
  return settings;
}
