// `npm run install-service`: runs the agent as a systemd service, without agentctl.
//   npm run install-service [-- --data-dir /var/lib/host-agent --config-dir /etc/host-agent --listen 127.0.0.1:8090 --proxy-dir /etc/nginx/agent]
//   npm run install-service -- --uninstall [--purge]
// Install (also the upgrade: run it again after `git pull`): builds, creates the data folder (0700) and the
// config folder with agent.yaml (0640, with proxy.mode: system; kept when present, adding proxy.mode: system when it
// has no mode, as it was written before the agent ran an nginx of its own) and, before the first start, agent.env (0600) with a
// generated admin password printed once; writes /etc/systemd/system/host-agent.service, enables it so the agent
// starts on boot, and (re)starts it when systemd runs. The unit is sandboxed (scripts/service/host-agent.service.in
// says what each setting allows and why): the agent writes only its data folder, its config folder and the folder
// it renders nginx's configuration into (`--proxy-dir`, proxy.config_dir: /etc/nginx/agent), which this creates.
// Uninstall disables and removes the unit; --purge also removes the config and data folders. `--root DIR` writes
// below DIR instead of / (tests, image builds); `--no-build` and `--no-start` skip those steps.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { AGENT_ENV, NODE_FLAGS, ROOT, build, ensureDeps } from './lib.mjs';

const UNIT = 'host-agent.service';
/** proxy.config_dir's default (plugins/edge). */
const PROXY_DIR = '/etc/nginx/agent';

const { values: opts } = parseArgs({
  options: {
    root: { type: 'string', default: '/' },
    'data-dir': { type: 'string', default: '/var/lib/host-agent' },
    'config-dir': { type: 'string', default: '/etc/host-agent' },
    // proxy.config_dir of agent.yaml: the one folder outside its own the agent writes (the sandbox allows it).
    'proxy-dir': { type: 'string', default: PROXY_DIR },
    listen: { type: 'string', default: '127.0.0.1:8090' },
    uninstall: { type: 'boolean', default: false },
    purge: { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    'no-start': { type: 'boolean', default: false },
  },
});

/** A path on the target system, below --root. */
const target = (path) => join(opts.root, path);
const offline = opts.root !== '/';
const unitPath = '/etc/systemd/system/' + UNIT;
const wantsLink = '/etc/systemd/system/multi-user.target.wants/' + UNIT;
const has = (cmd) => spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status === 0;
/** systemd runs this machine (a container or a chroot often has systemctl without it). */
const systemdRunning = !offline && existsSync('/run/systemd/system');

function systemctl(args) {
  const argv = offline ? [`--root=${opts.root}`, ...args] : args;
  const r = spawnSync('systemctl', argv, { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`systemctl ${argv.join(' ')} failed (exit ${r.status})`);
}

function enable() {
  if (has('systemctl') && (offline || systemdRunning)) return systemctl(['enable', UNIT]);
  // Without systemctl (or without a running systemd to ask), do what `systemctl enable` does for WantedBy=.
  mkdirSync(target('/etc/systemd/system/multi-user.target.wants'), { recursive: true });
  if (!existsSync(target(wantsLink))) symlinkSync(unitPath, target(wantsLink));
}

/**
 * The folders the sandboxed agent may write: the data folder (a StateDirectory= when it is below /var/lib, so
 * systemd creates it 0700), the configuration folder (a ConfigurationDirectory= below /etc) and the folder it
 * renders nginx's configuration into. Anywhere else they are ReadWritePaths=.
 */
function writable() {
  const below = (dir, base) => (dir.startsWith(`${base}/`) && dir.length > base.length + 1 ? dir.slice(base.length + 1) : null);
  const lines = [];
  const state = below(opts['data-dir'], '/var/lib');
  if (state) lines.push(`StateDirectory=${state}`, 'StateDirectoryMode=0700');
  else lines.push(`ReadWritePaths=${opts['data-dir']}`);
  const config = below(opts['config-dir'], '/etc');
  if (config) lines.push(`ConfigurationDirectory=${config}`, 'ConfigurationDirectoryMode=0755');
  else lines.push(`ReadWritePaths=${opts['config-dir']}`);
  // '-': a missing folder does not stop the start (the proxy then reports what fails); the installer creates it.
  lines.push(`ReadWritePaths=-${opts['proxy-dir']}`);
  return lines.join('\n');
}

/**
 * An agent.yaml written before proxy.mode existed ran the host's nginx, which an agent without the key no longer
 * does (it runs its own on 8080/8443): the upgrade writes the mode it had, keeping the rest of the file as it is.
 */
async function keepProxyMode(config) {
  // Loaded here: ensureDeps() has installed it by now (a first install may start without node_modules).
  const { isMap, parseDocument } = await import('yaml');
  const src = readFileSync(config, 'utf8');
  const doc = parseDocument(src);
  if (doc.errors.length || doc.getIn(['proxy', 'mode']) !== undefined) return;
  // The line goes into the text as it is (comments, spacing and order are the operator's), at the end or as the
  // first key of an existing proxy section; any other shape is written out again by the YAML library.
  const proxy = doc.get('proxy', true);
  let text = null;
  if (proxy === undefined) text = `${src}${src && !src.endsWith('\n') ? '\n' : ''}proxy:\n  mode: system\n`;
  else if (isMap(proxy) && !proxy.flow && proxy.items.length) {
    const at = proxy.items[0].key.range[0];
    const lineStart = src.lastIndexOf('\n', at - 1) + 1;
    const indent = src.slice(lineStart, at);
    if (/^ +$/.test(indent)) text = `${src.slice(0, lineStart)}${indent}mode: system\n${src.slice(lineStart)}`;
  }
  if (text === null) {
    doc.setIn(['proxy', 'mode'], 'system');
    text = doc.toString();
  }
  writeFileSync(config, text, { mode: 0o640 });
  console.log(`added proxy.mode: system to ${config} (the host's nginx, as before; proxy.mode: own runs an nginx of the agent's own)`);
}

async function install() {
  if (!opts['no-build']) {
    ensureDeps();
    build();
  }
  const dataDir = target(opts['data-dir']);
  const configDir = target(opts['config-dir']);
  const firstInstall = !existsSync(join(dataDir, 'secrets'));
  mkdirSync(dirname(dataDir), { recursive: true });
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  chmodSync(dataDir, 0o700);
  mkdirSync(configDir, { recursive: true, mode: 0o755 });
  // The sandbox lets the agent write there but not create it (the rest of /etc is read-only to it).
  mkdirSync(target(opts['proxy-dir']), { recursive: true, mode: 0o755 });

  const config = join(configDir, 'agent.yaml');
  if (!existsSync(config)) {
    writeFileSync(
      config,
      [
        '# Configuration of the host agent (every key: README.md, "Configuration"). Kept by upgrades.',
        `listen: ${opts.listen}`,
        `data_dir: ${opts['data-dir']}`,
        'log:',
        '  level: info',
        '  format: json   # the journal keeps JSON lines: journalctl -u host-agent -o cat | jq',
        // A service is the host's proxy: the host's nginx on 80/443 with the agent's files in the proxy folder
        // (without a mode the agent runs an nginx of its own on 8080/8443, the quick start's).
        'proxy:',
        "  mode: system   # the host's nginx (80/443, reloaded with nginx -s reload); own: an nginx of the agent's own",
        // The unit lets the agent write this folder; the default needs no line.
        ...(opts['proxy-dir'] !== PROXY_DIR ? [`  config_dir: ${opts['proxy-dir']}   # also --proxy-dir of install-service`] : []),
        '',
      ].join('\n'),
      { mode: 0o640 },
    );
    console.log(`wrote ${config}`);
  } else {
    console.log(`kept ${config}`);
    await keepProxyMode(config);
  }
  chmodSync(config, 0o640);

  const env = join(configDir, 'agent.env');
  if (firstInstall && !existsSync(env)) {
    const password = randomBytes(18).toString('base64url');
    writeFileSync(
      env,
      `# Used at the first start only, to create the user admin. Delete this file once you changed the password.\nAGENT_ADMIN_PASSWORD=${password}\n`,
      { mode: 0o600 },
    );
    console.log(`admin password for the first login: ${password}\n  (also in ${env}, mode 0600: delete it after changing the password)`);
  }
  if (existsSync(env)) chmodSync(env, 0o600);

  const agentEnv = Object.entries(AGENT_ENV)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  const unit = readFileSync(join(ROOT, 'scripts', 'service', `${UNIT}.in`), 'utf8')
    .replaceAll('@NODE@', process.execPath)
    .replaceAll('@NODE_FLAGS@', NODE_FLAGS.join(' '))
    .replaceAll('@AGENT_ENV@', agentEnv)
    .replaceAll('@REPO@', ROOT)
    .replaceAll('@CONFIG_DIR@', opts['config-dir'])
    .replaceAll('@DATA_DIR@', opts['data-dir'])
    .replaceAll('@WRITABLE@', writable());
  mkdirSync(target('/etc/systemd/system'), { recursive: true });
  writeFileSync(target(unitPath), unit, { mode: 0o644 });
  chmodSync(target(unitPath), 0o644);
  console.log(`wrote ${target(unitPath)}`);
  enable();
  console.log(`enabled ${UNIT}: the agent starts on boot`);

  if (systemdRunning && !opts['no-start']) {
    systemctl(['daemon-reload']);
    systemctl(['restart', UNIT]);
    console.log(`started ${UNIT}: systemctl status host-agent; journalctl -u host-agent -f`);
  } else if (!offline && !opts['no-start']) {
    console.log('systemd does not run on this machine: the agent starts at the next boot under systemd');
  }
}

function uninstall() {
  const wasEnabled =
    existsSync(target(unitPath)) ||
    (() => {
      try {
        return lstatSync(target(wantsLink)).isSymbolicLink();
      } catch {
        return false;
      }
    })();
  if (wasEnabled && has('systemctl') && (offline || systemdRunning)) systemctl(['disable', ...(systemdRunning ? ['--now'] : []), UNIT]);
  for (const path of [wantsLink, unitPath]) {
    try {
      unlinkSync(target(path));
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
  }
  if (systemdRunning) systemctl(['daemon-reload']);
  console.log(`removed ${UNIT}`);
  const dirs = [target(opts['config-dir']), target(opts['data-dir'])];
  if (opts.purge) {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    console.log(`removed ${dirs.join(' and ')}`);
  } else {
    console.log(`kept ${dirs.filter((d) => existsSync(d) && readdirSync(d).length).join(' and ') || 'nothing else'} (--purge removes them)`);
  }
}

try {
  if (opts.uninstall) uninstall();
  else await install();
} catch (err) {
  console.error(`install-service: ${err.message}`);
  process.exit(1);
}
