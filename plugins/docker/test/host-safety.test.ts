/**
 * The host-safety policy against the real compose CLI: escape attempts (each a different spelling or key) are
 * refused with the key named, ordinary compose files are accepted and run unchanged (compose's model of the
 * checked file is the model that was checked), and models in compose v2's canonical shape (no v2 binary exists on
 * Debian 12) are checked by the policy directly.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckedCompose, HostSafetyViolation } from '@agent/plugin-docker/api';
import { detectCompose, flavourOf, runCompose } from '../src/compose/cli.js';
import { ComposeGuard, serializeModel } from '../src/compose/guard.js';
import { realEngine } from './guard-engine.js';
import { pythonOf, WarmComposeConfig } from '../src/compose/warm-config.js';
import { checkModel, policyTable } from '../src/compose/policy.js';

const run = randomBytes(3).toString('hex');
const log = { debug() {}, info() {}, warn() {}, error() {} };

interface Attempt {
  what: string;
  content: string;
  env?: Record<string, string>;
  /** Prepares the deployment folder (symlinks a container could have planted, files it points at). */
  setup?: (dir: string) => void;
  /** The key the refusal must name (HOST_SAFETY `key`, or the key in compose's own refusal). */
  key: RegExp;
}

const svc = (body: string) => `services:\n  app:\n    image: agent-test/busybox:latest\n${body}`;
/** A service built from the folder, and a setup writing its Dockerfile. */
const build = 'services:\n  app:\n    build: .\n';
const dockerfile = (text: string) => (dir: string) => writeFileSync(join(dir, 'Dockerfile'), text);

/** Escape attempts: every one a different spelling, key or trick. */
const ATTEMPTS: Attempt[] = [
  // privileges
  { what: 'privileged: true', content: svc('    privileged: true\n'), key: /^privileged$/ },
  { what: 'privileged: yes (YAML 1.1 boolean)', content: svc('    privileged: yes\n'), key: /^privileged$/ },
  { what: 'privileged: on', content: svc('    privileged: on\n'), key: /^privileged$/ },
  { what: 'privileged: True', content: svc('    privileged: True\n'), key: /^privileged$/ },
  { what: 'privileged: !!bool "true"', content: svc('    privileged: !!bool "true"\n'), key: /^privileged$/ },
  { what: 'quoted key "privileged"', content: svc('    "privileged": true\n'), key: /^privileged$/ },
  { what: 'escaped key "privil\\u0065ged"', content: svc('    "privil\\u0065ged": true\n'), key: /^privileged$/ },
  {
    what: 'privileged from a merge key',
    content: `x-base: &base\n  privileged: true\nservices:\n  app:\n    <<: *base\n    image: agent-test/busybox:latest\n`,
    key: /^privileged$/,
  },
  { what: 'privileged in a flow mapping', content: '{services: {app: {image: "agent-test/busybox:latest", privileged: true}}}\n', key: /^privileged$/ },
  {
    what: 'privileged in an inactive profile',
    content: svc('  hidden:\n    image: agent-test/busybox:latest\n    profiles: [never]\n    privileged: true\n'),
    key: /^privileged$/,
  },
  {
    what: 'privileged through extends',
    content: 'services:\n  base:\n    image: agent-test/busybox:latest\n    privileged: true\n  app:\n    extends: base\n',
    key: /^privileged$/,
  },
  // capabilities
  { what: 'cap_add SYS_ADMIN', content: svc('    cap_add: [SYS_ADMIN]\n'), key: /^cap_add$/ },
  { what: 'cap_add lower case', content: svc('    cap_add: [sys_admin]\n'), key: /^cap_add$/ },
  { what: 'cap_add CAP_ prefix', content: svc('    cap_add: [CAP_SYS_PTRACE]\n'), key: /^cap_add$/ },
  { what: 'cap_add ALL', content: svc('    cap_add: [ALL]\n'), key: /^cap_add$/ },
  { what: 'cap_add from an env default', content: svc('    cap_add: ["${CAP:-SYS_MODULE}"]\n'), key: /^cap_add$/ },
  { what: 'cap_add from .env', content: svc('    cap_add: ["$CAP"]\n'), env: { CAP: 'DAC_READ_SEARCH' }, key: /^cap_add$/ },
  // namespaces
  { what: 'network_mode: host', content: svc('    network_mode: host\n'), key: /^network_mode$/ },
  { what: 'network_mode from a default', content: svc('    network_mode: "${NM:-host}"\n'), key: /^network_mode$/ },
  { what: 'network_mode: container:', content: svc('    network_mode: "container:some-other"\n'), key: /^network_mode$/ },
  { what: 'network_mode: a named network', content: svc('    network_mode: bridge2\n'), key: /^network_mode$/ },
  { what: 'pid: host', content: svc('    pid: host\n'), key: /^pid$/ },
  { what: 'pid: container:', content: svc('    pid: "container:other"\n'), key: /^pid$/ },
  { what: 'ipc: host', content: svc('    ipc: host\n'), key: /^ipc$/ },
  { what: 'ipc: container:', content: svc('    ipc: "container:other"\n'), key: /^ipc$/ },
  { what: 'uts: host', content: svc('    uts: host\n'), key: /^uts$/ },
  { what: 'userns_mode: host', content: svc('    userns_mode: host\n'), key: /^userns_mode$/ },
  { what: 'cgroup: host', content: svc('    cgroup: host\n'), key: /^cgroup$/ },
  // confinement
  { what: 'security_opt seccomp:unconfined', content: svc('    security_opt: ["seccomp:unconfined"]\n'), key: /^security_opt$/ },
  { what: 'security_opt seccomp=unconfined', content: svc('    security_opt: ["seccomp=unconfined"]\n'), key: /^security_opt$/ },
  { what: 'security_opt apparmor=unconfined', content: svc('    security_opt: ["apparmor=unconfined"]\n'), key: /^security_opt$/ },
  { what: 'security_opt label=disable', content: svc('    security_opt: ["label=disable"]\n'), key: /^security_opt$/ },
  { what: 'security_opt label type spc_t', content: svc('    security_opt: ["label=type:spc_t"]\n'), key: /^security_opt$/ },
  { what: 'security_opt systempaths=unconfined', content: svc('    security_opt: ["systempaths=unconfined"]\n'), key: /^security_opt$/ },
  { what: 'devices /dev/sda', content: svc('    devices: ["/dev/sda:/dev/sda"]\n'), key: /^devices$/ },
  { what: 'device_cgroup_rules', content: svc('    device_cgroup_rules: ["c *:* rmw"]\n'), key: /^device_cgroup_rules$/ },
  { what: 'sysctls kernel.core_pattern', content: svc('    sysctls: {kernel.core_pattern: "|/tmp/x"}\n'), key: /^sysctls$/ },
  { what: 'sysctls list form', content: svc('    sysctls: ["net.ipv4.ip_forward=1"]\n'), key: /^sysctls$/ },
  { what: 'cgroup_parent', content: svc('    cgroup_parent: /\n'), key: /^cgroup_parent$/ },
  { what: 'runtime', content: svc('    runtime: nvidia\n'), key: /^runtime$/ },
  { what: 'oom_kill_disable', content: svc('    oom_kill_disable: true\n'), key: /^oom_kill_disable$/ },
  { what: 'negative oom_score_adj', content: svc('    oom_score_adj: -1000\n'), key: /^oom_score_adj$/ },
  // host paths
  { what: 'bind of /', content: svc('    volumes: ["/:/host"]\n'), key: /^volumes$/ },
  { what: 'bind of //', content: svc('    volumes: ["//:/host"]\n'), key: /^volumes$/ },
  { what: 'bind of /etc read-only', content: svc('    volumes: ["/etc:/host-etc:ro"]\n'), key: /^volumes$/ },
  { what: 'bind of /proc', content: svc('    volumes: ["/proc:/hostproc"]\n'), key: /^volumes$/ },
  { what: 'relative bind climbing out', content: svc('    volumes: ["../../:/up"]\n'), key: /^volumes$/ },
  { what: 'relative bind ./../..', content: svc('    volumes: ["./../..:/up"]\n'), key: /^volumes$/ },
  {
    what: 'bind through a symlink a container planted',
    content: svc('    volumes: ["./data:/data"]\n'),
    setup: (d) => symlinkSync('/', join(d, 'data')),
    key: /^volumes$/,
  },
  { what: 'long-syntax bind of /', content: svc('    volumes:\n      - type: bind\n        source: /\n        target: /host\n'), key: /^volumes$/ },
  { what: 'bind from .env', content: svc('    volumes: ["${DIR}:/up"]\n'), env: { DIR: '/root' }, key: /^volumes$/ },
  { what: 'bind from a default', content: svc('    volumes: ["${DIR:-/}:/up"]\n'), key: /^volumes$/ },
  { what: "bind from the agent's HOME", content: svc('    volumes: ["${HOME}/.ssh:/keys"]\n'), key: /^volumes$/ },
  { what: 'bind of ~', content: svc('    volumes: ["~/.ssh:/keys"]\n'), key: /^volumes$/ },
  { what: 'docker socket', content: svc('    volumes: ["/var/run/docker.sock:/var/run/docker.sock"]\n'), key: /^volumes$/ },
  { what: 'docker socket under /run', content: svc('    volumes: ["/run/docker.sock:/s"]\n'), key: /^volumes$/ },
  { what: 'docker socket spelled with ..', content: svc('    volumes: ["/var/run/../run/docker.sock:/s"]\n'), key: /^volumes$/ },
  { what: 'containerd socket', content: svc('    volumes: ["/run/containerd/containerd.sock:/s"]\n'), key: /^volumes$/ },
  {
    what: 'socket through a planted symlink',
    content: svc('    volumes: ["./sock:/s"]\n'),
    setup: (d) => symlinkSync('/var/run/docker.sock', join(d, 'sock')),
    key: /^volumes$/,
  },
  { what: 'shared mount propagation', content: svc('    volumes: ["./data:/data:rshared"]\n'), key: /^volumes$/ },
  {
    what: 'long-syntax shared propagation',
    content: svc('    volumes:\n      - type: bind\n        source: ./data\n        target: /data\n        bind: {propagation: shared}\n'),
    key: /^volumes/,
  },
  { what: 'bind below a read-write bind of the folder', content: svc('    volumes: [".:/app", "./data:/data"]\n'), key: /^volumes$/ },
  { what: 'volumes_from a foreign container', content: svc('    volumes_from: ["container:other"]\n'), key: /^volumes_from$/ },
  {
    what: 'volume with a bind device',
    content: svc('    volumes: ["v:/v"]\nvolumes:\n  v:\n    driver_opts: {type: none, o: bind, device: /}\n'),
    key: /^volumes\.v\.driver_opts$/,
  },
  { what: 'volume with another driver', content: svc('    volumes: ["v:/v"]\nvolumes:\n  v:\n    driver: vieux/sshfs\n'), key: /^volumes\.v\.driver$/ },
  { what: 'external volume', content: svc('    volumes: ["v:/v"]\nvolumes:\n  v:\n    external: true\n'), key: /^volumes\.v\.external$/ },
  { what: "another project's volume by name", content: svc('    volumes: ["v:/v"]\nvolumes:\n  v:\n    name: otherproject_data\n'), key: /^volumes\.v\.name$/ },
  // networks and links
  { what: 'external network', content: svc('    networks: [n]\nnetworks:\n  n:\n    external: true\n'), key: /^networks\.n\.external$/ },
  {
    what: "another project's network by name",
    content: svc('    networks: [n]\nnetworks:\n  n:\n    name: otherproject_default\n'),
    key: /^networks\.n\.name$/,
  },
  { what: 'macvlan network', content: svc('    networks: [n]\nnetworks:\n  n:\n    driver: macvlan\n'), key: /^networks\.n\.driver$/ },
  {
    what: 'bridge on a host interface',
    content: svc('    networks: [n]\nnetworks:\n  n:\n    driver_opts: {com.docker.network.bridge.name: docker0}\n'),
    key: /^networks\.n\.driver_opts$/,
  },
  { what: 'public subnet', content: svc('    networks: [n]\nnetworks:\n  n:\n    ipam:\n      config: [{subnet: 8.8.8.0/24}]\n'), key: /^networks\.n\.ipam/ },
  { what: 'external_links', content: svc('    external_links: [other]\n'), key: /^external_links$/ },
  // labels and names
  { what: 'label claiming another project', content: svc('    labels: {com.docker.compose.project: other}\n'), key: /^labels$/ },
  { what: 'label list claiming another project', content: svc('    labels: ["com.docker.compose.project=other"]\n'), key: /^labels$/ },
  { what: 'label posing as infrastructure', content: svc('    labels: {agent.infrastructure: database}\n'), key: /^labels$/ },
  { what: 'container_name of a foreign container', content: svc(`    container_name: agent-test-hs-taken-${run}\n`), key: /^container_name$/ },
  { what: 'a foreign project name', content: 'name: other\n' + svc(''), key: /^name$/ },
  // files compose or the engine would read
  { what: 'env_file outside the folder', content: svc('    env_file: /etc/os-release\n'), key: /^env_file$/ },
  { what: 'env_file climbing out', content: svc('    env_file: ../../../etc/os-release\n'), key: /^env_file$/ },
  {
    what: 'env_file through a planted symlink',
    content: svc('    env_file: ./app.env\n'),
    setup: (d) => symlinkSync('/etc/os-release', join(d, 'app.env')),
    key: /^env_file$/,
  },
  { what: 'env_file from .env', content: svc('    env_file: ["${F}"]\n'), env: { F: '/etc/os-release' }, key: /^env_file$/ },
  {
    what: 'env_file in an x- block merged in',
    content: 'x-common: &common\n  env_file: /etc/os-release\nservices:\n  app:\n    <<: *common\n    image: agent-test/busybox:latest\n',
    key: /^env_file$/,
  },
  { what: 'env_file as an alias', content: 'x-files: &files [/etc/os-release]\n' + svc('    env_file: *files\n'), key: /^env_file$/ },
  { what: 'extends another file', content: 'services:\n  app:\n    extends: {file: /etc/compose.yml, service: x}\n', key: /^extends\.file$/ },
  { what: 'include', content: 'include: [/etc/compose.yml]\n' + svc(''), key: /^include$/ },
  { what: 'secret from a host file', content: svc('    secrets: [s]\nsecrets:\n  s:\n    file: /etc/shadow\n'), key: /^secrets\.s\.file$/ },
  { what: 'config from a host file', content: svc('    configs: [c]\nconfigs:\n  c:\n    file: /etc/passwd\n'), key: /^configs\.c\.file$/ },
  {
    what: 'secret through a planted symlink',
    content: svc('    secrets: [s]\nsecrets:\n  s:\n    file: ./secret.txt\n'),
    setup: (d) => symlinkSync('/etc/shadow', join(d, 'secret.txt')),
    key: /^secrets\.s\.file$/,
  },
  { what: 'build context /', content: 'services:\n  app:\n    build: /\n', key: /^build/ },
  { what: 'build context climbing out', content: 'services:\n  app:\n    build: ../../\n', key: /^build/ },
  {
    what: 'dockerfile outside the context',
    content: 'services:\n  app:\n    build: {context: ., dockerfile: ../../etc/Dockerfile}\n',
    setup: (d) => writeFileSync(join(d, 'Dockerfile'), 'FROM scratch\n'),
    key: /^build/,
  },
  { what: 'remote build context', content: 'services:\n  app:\n    build: "https://example.com/repo.git"\n', key: /^build/ },
  {
    what: 'build on the host network',
    content: 'services:\n  app:\n    build: {context: ., network: host}\n',
    setup: (d) => writeFileSync(join(d, 'Dockerfile'), 'FROM scratch\n'),
    key: /^build/,
  },
  // the folder root and the agent's own files are never writable by a container
  { what: 'the folder itself read-write', content: svc('    volumes: [".:/app"]\n'), key: /^volumes$/ },
  {
    what: 'the folder itself read-write, long syntax',
    content: svc('    volumes:\n      - type: bind\n        source: .\n        target: /app\n'),
    key: /^volumes$/,
  },
  { what: 'the folder as ./ read-write', content: svc('    volumes: ["./:/app:rw"]\n'), key: /^volumes$/ },
  {
    what: 'the compose file read-write',
    content: svc('    volumes: ["./docker-compose.yml:/c.yml"]\n'),
    setup: (d) => writeFileSync(join(d, 'docker-compose.yml'), 'services: {}\n'),
    key: /^volumes$/,
  },
  { what: 'the .env read-write', content: svc('    volumes: ["./.env:/app/.env"]\n'), setup: (d) => writeFileSync(join(d, '.env'), 'A=1\n'), key: /^volumes$/ },
  {
    what: 'the folder reached through a link inside it',
    content: svc('    volumes: ["./self:/app"]\n'),
    setup: (d) => symlinkSync('.', join(d, 'self')),
    key: /^volumes$/,
  },
  // names of other projects and of the agent
  {
    what: "the shared database's volume by name",
    content: svc('    volumes: ["v:/v"]\nvolumes:\n  v:\n    name: agent-infra-database_data\n'),
    key: /^volumes\.v\.name$/,
  },
  { what: 'the proxy network by name', content: svc('    networks: [n]\nnetworks:\n  n:\n    name: agent-infra-proxy\n'), key: /^networks\.n\.name$/ },
  { what: 'a volume name in the dash spelling', content: svc('    volumes: ["v:/v"]\nvolumes:\n  v:\n    name: other-v\n'), key: /^volumes\.v\.name$/ },
  { what: "running another deployment's built image", content: 'services:\n  app:\n    image: otherproject_web:latest\n', key: /^image$/ },
  // builds
  {
    what: "a build tagging another deployment's image",
    content: 'services:\n  app:\n    build: .\n    image: otherproject_web\n',
    setup: dockerfile('FROM scratch\n'),
    key: /^build$/,
  },
  {
    what: "a build tagging the agent's image",
    content: 'services:\n  app:\n    build: .\n    image: agent/objstore:0.1.0\n',
    setup: dockerfile('FROM scratch\n'),
    key: /^build$/,
  },
  {
    what: "a build's extra tag in another namespace",
    content: 'services:\n  app:\n    build: {context: ., tags: ["otherproject_api:1"]}\n',
    setup: dockerfile('FROM scratch\n'),
    key: /^build$/,
  },
  {
    what: "a build on another project's network",
    content: 'services:\n  app:\n    build: {context: ., network: otherproject_default}\n',
    setup: dockerfile('FROM scratch\n'),
    key: /^build\.network$/,
  },
  {
    what: "a build in another container's network",
    content: 'services:\n  app:\n    build: {context: ., network: "container:agent-infra-database-1"}\n',
    setup: dockerfile('FROM scratch\n'),
    key: /^build\.network$/,
  },
  { what: 'ADD of a loopback URL', content: build, setup: dockerfile('FROM scratch\nADD http://127.0.0.1:8090/api/health /x\n'), key: /^build\.dockerfile$/ },
  {
    what: 'ADD of a metadata address, JSON form',
    content: build,
    setup: dockerfile('FROM scratch\nADD ["http://169.254.169.254/latest/meta-data/", "/m"]\n'),
    key: /^build\.dockerfile$/,
  },
  {
    what: 'ADD over a line continuation',
    content: build,
    setup: dockerfile('FROM scratch\nADD \\\n  https://10.0.0.1/secret \\\n  /s\n'),
    key: /^build\.dockerfile$/,
  },
  {
    what: 'ADD with the escape directive',
    content: build,
    setup: dockerfile('# escape=`\nFROM scratch\nADD `\n  http://192.168.1.1/ /r\n'),
    key: /^build\.dockerfile$/,
  },
  {
    what: 'ADD of a URL from an ARG default',
    content: build,
    setup: dockerfile('ARG U=http://127.0.0.1:2375\nFROM scratch\nADD ${U}/info /i\n'),
    key: /^build\.dockerfile$/,
  },
  {
    what: 'ADD of a URL from a build arg',
    content: 'services:\n  app:\n    build: {context: ., args: {U: "http://10.1.1.1"}}\n',
    setup: dockerfile('FROM scratch\nARG U\nADD $U/x /x\n'),
    key: /^build\.dockerfile$/,
  },
  { what: 'ADD of a git repository', content: build, setup: dockerfile('FROM scratch\nADD git@github.com:org/repo.git /src\n'), key: /^build\.dockerfile$/ },
  { what: 'ADD written in lower case', content: build, setup: dockerfile('FROM scratch\nadd HTTP://127.0.0.1/ /x\n'), key: /^build\.dockerfile$/ },
  { what: 'ONBUILD trigger', content: build, setup: dockerfile('FROM scratch\nONBUILD ADD http://127.0.0.1/ /x\n'), key: /^build\.dockerfile$/ },
  {
    what: 'ADD of a URL in dockerfile_inline',
    content: 'services:\n  app:\n    build:\n      context: .\n      dockerfile_inline: |\n        FROM scratch\n        ADD http://127.0.0.1:8090/ /x\n',
    key: /^build/,
  },
  { what: "FROM another deployment's image", content: build, setup: dockerfile('FROM otherproject_web\n'), key: /^build\.dockerfile$/ },
  {
    what: "COPY --from another deployment's image",
    content: build,
    setup: dockerfile('FROM scratch\nCOPY --from=otherproject_web /app /app\n'),
    key: /^build\.dockerfile$/,
  },
  {
    what: 'a dockerfile that is a link out of the context',
    content: 'services:\n  app:\n    build: {context: ., dockerfile: Dockerfile.link}\n',
    setup: (d) => symlinkSync('/etc/hostname', join(d, 'Dockerfile.link')),
    key: /^build/,
  },
  {
    what: 'build context through a planted symlink',
    content: 'services:\n  app:\n    build: ./ctx\n',
    setup: (d) => symlinkSync('/etc', join(d, 'ctx')),
    key: /^build/,
  },
  {
    what: 'an additional context outside the folder',
    content: 'services:\n  app:\n    build: {context: ., additional_contexts: {root: /}}\n',
    setup: dockerfile('FROM scratch\n'),
    key: /^build/,
  },
  // logging
  { what: 'syslog to a remote address', content: svc('    logging: {driver: syslog, options: {syslog-address: "tcp://192.0.2.1:514"}}\n'), key: /^logging/ },
  { what: 'fluentd logging', content: svc('    logging: {driver: fluentd}\n'), key: /^logging/ },
  // unknown keys
  { what: 'a key the policy does not know', content: svc('    privilegedd: true\n'), key: /^privilegedd$/ },
  { what: 'an unknown top-level key', content: 'services2: {}\n' + svc(''), key: /^services2$/ },
];

interface Ordinary {
  what: string;
  content: string;
  env?: Record<string, string>;
  setup?: (dir: string) => void;
}

/** Ordinary files of the kinds people deploy: all accepted, all run exactly as compose reads them. */
const ORDINARY: Ordinary[] = [
  { what: 'one image', content: svc('') },
  {
    what: 'web and database',
    content:
      'services:\n  web:\n    image: nginx:1.27\n    ports: ["127.0.0.1:8080:80"]\n    depends_on: [db]\n  db:\n    image: postgres:16\n    environment: {POSTGRES_PASSWORD: "${DB_PASSWORD}"}\n    volumes: [dbdata:/var/lib/postgresql/data]\nvolumes:\n  dbdata: {}\n',
    env: { DB_PASSWORD: 's3cret$with$dollars' },
  },
  { what: 'worker with restart policy', content: svc('    command: ["sh", "-c", "while true; do echo tick; sleep 5; done"]\n    restart: unless-stopped\n') },
  {
    what: 'healthcheck',
    content: svc(
      '    healthcheck:\n      test: ["CMD-SHELL", "wget -qO- http://localhost/ || exit 1"]\n      interval: 30s\n      timeout: 5s\n      retries: 3\n      start_period: 10s\n',
    ),
  },
  { what: 'relative bind mounts', content: svc('    volumes: ["./data:/data", "./config/app.conf:/etc/app.conf:ro"]\n') },
  { what: 'code read-only, data read-write', content: svc('    volumes: [".:/app:ro", "./data:/app/data"]\n') },
  { what: 'named and anonymous volumes', content: svc('    volumes: [cache:/cache, /tmp/scratch]\nvolumes:\n  cache: {}\n') },
  {
    what: 'long-syntax volumes',
    content: svc(
      '    volumes:\n      - type: bind\n        source: ./data\n        target: /data\n        read_only: true\n      - type: volume\n        source: v\n        target: /v\n      - type: tmpfs\n        target: /run\nvolumes:\n  v: {}\n',
    ),
  },
  { what: 'profiles', content: svc('  debug:\n    image: agent-test/busybox:latest\n    profiles: [debug]\n') },
  {
    what: 'x- extensions and anchors',
    content:
      'x-logging: &logging\n  driver: json-file\n  options: {max-size: 10m, max-file: "3"}\nx-env: &env\n  TZ: UTC\nservices:\n  a:\n    image: agent-test/busybox:latest\n    logging: *logging\n    environment: *env\n  b:\n    image: agent-test/busybox:latest\n    logging: *logging\n    environment:\n      <<: *env\n      ROLE: b\n',
  },
  {
    what: 'env_file inside the folder',
    content: svc('    env_file: [./app.env]\n'),
    setup: (d) => writeFileSync(join(d, 'app.env'), 'A=1\nB="two words"\n# comment\n'),
  },
  {
    what: 'interpolation with defaults',
    content: svc('    ports: ["${BIND:-127.0.0.1}:${PORT:-8081}:80"]\n    environment:\n      - MODE=${MODE:-prod}\n      - LEVEL=${LEVEL-info}\n'),
    env: { PORT: '9090' },
  },
  { what: 'escaped dollars', content: svc('    command: ["sh", "-c", "echo $$HOME $${PATH} and $$$$"]\n    environment: {PRICE: "$$5"}\n') },
  {
    what: 'depends_on with conditions',
    content:
      'services:\n  app:\n    image: agent-test/busybox:latest\n    depends_on:\n      db: {condition: service_healthy}\n  db:\n    image: agent-test/busybox:latest\n    healthcheck: {test: ["CMD", "true"]}\n',
  },
  { what: 'logging options', content: svc('    logging: {driver: json-file, options: {max-size: 50m}}\n') },
  {
    what: 'deploy resources',
    content: svc(
      '    deploy:\n      resources:\n        limits: {cpus: "0.5", memory: 256M}\n        reservations: {memory: 64M}\n      restart_policy: {condition: on-failure}\n',
    ),
  },
  {
    what: 'limits in service keys',
    content: svc('    mem_limit: 512m\n    cpus: 1.5\n    pids_limit: 200\n    shm_size: 64m\n    ulimits: {nofile: {soft: 1024, hard: 2048}}\n'),
  },
  {
    what: 'hardening',
    content: svc(
      '    read_only: true\n    user: "1000:1000"\n    cap_drop: [ALL]\n    cap_add: [NET_BIND_SERVICE, CHOWN]\n    security_opt: ["no-new-privileges:true"]\n    tmpfs: [/tmp]\n',
    ),
  },
  { what: 'safe sysctls', content: svc('    sysctls: {net.core.somaxconn: 1024, net.ipv4.tcp_syncookies: 0}\n') },
  {
    what: 'own networks',
    content:
      'services:\n  a:\n    image: agent-test/busybox:latest\n    networks: [front, back]\n  b:\n    image: agent-test/busybox:latest\n    networks:\n      back: {aliases: [db]}\nnetworks:\n  front: {}\n  back: {internal: true}\n',
  },
  {
    what: 'private IPAM subnet',
    content: svc('    networks:\n      n: {ipv4_address: 172.28.5.10}\nnetworks:\n  n:\n    ipam:\n      config: [{subnet: 172.28.0.0/16}]\n'),
  },
  { what: 'dns and hosts', content: svc('    dns: [1.1.1.1]\n    dns_search: [example.org]\n    extra_hosts: ["db.local:10.0.0.5"]\n    hostname: app\n') },
  { what: 'init and stop', content: svc('    init: true\n    stop_signal: SIGINT\n    stop_grace_period: 20s\n') },
  {
    what: 'build from the folder',
    content: 'services:\n  app:\n    build:\n      context: ./app\n      dockerfile: Dockerfile.prod\n      args: {VERSION: "1.2"}\n    image: local/app:1.2\n',
    setup: (d) => {
      mkdirSync(join(d, 'app'));
      writeFileSync(join(d, 'app', 'Dockerfile.prod'), 'FROM scratch\n');
    },
  },
  {
    what: 'secrets and configs from the folder',
    content: svc(
      '    secrets: [db_pass]\n    configs: [conf]\nsecrets:\n  db_pass:\n    file: ./secrets/db_pass.txt\nconfigs:\n  conf:\n    file: ./conf/app.ini\n',
    ),
    setup: (d) => {
      mkdirSync(join(d, 'secrets'));
      writeFileSync(join(d, 'secrets', 'db_pass.txt'), 'x');
      mkdirSync(join(d, 'conf'));
      writeFileSync(join(d, 'conf', 'app.ini'), '[a]\n');
    },
  },
  {
    what: 'labels of a reverse proxy',
    content: svc('    labels:\n      traefik.enable: "true"\n      traefik.http.routers.app.rule: "Host(`app.example.org`)"\n'),
  },
  {
    what: 'same-project links and volumes_from',
    content:
      'services:\n  a:\n    image: agent-test/busybox:latest\n    volumes: [shared:/s]\n  b:\n    image: agent-test/busybox:latest\n    links: [a]\n    volumes_from: [a]\nvolumes:\n  shared: {}\n',
  },
  {
    what: 'network_mode of a service of the project',
    content: 'services:\n  vpn:\n    image: agent-test/busybox:latest\n  app:\n    image: agent-test/busybox:latest\n    network_mode: "service:vpn"\n',
  },
  { what: 'ipc shareable', content: svc('    ipc: shareable\n') },
  {
    what: 'version field and entrypoint',
    content:
      'version: "3.8"\nservices:\n  app:\n    image: agent-test/busybox:latest\n    entrypoint: ["/bin/sh", "-c"]\n    command: ["echo hi"]\n    working_dir: /tmp\n',
  },
  {
    what: 'build from the folder root beside a read-write data folder',
    content: 'services:\n  app:\n    build: .\n    volumes: ["./data:/data"]\n',
    setup: dockerfile('FROM agent-test/busybox:latest\nCOPY . /src\n'),
  },
  {
    what: 'build tagged in its own namespace',
    content: 'services:\n  api:\n    build: ./api\n    image: PROJECT_api:1.0\n  worker:\n    image: PROJECT_api:1.0\n    command: ["worker"]\n',
    setup: (d) => {
      mkdirSync(join(d, 'api'));
      writeFileSync(join(d, 'api', 'Dockerfile'), 'FROM scratch\n');
    },
  },
  {
    what: 'multi-stage build with ARG, local ADD and COPY --from a stage',
    content: 'services:\n  app:\n    build: {context: ., args: {BASE: "agent-test/busybox:latest"}}\n',
    setup: dockerfile('ARG BASE=scratch\nFROM ${BASE} AS builder\nADD ./src.tar /src\nRUN true\nFROM scratch\nCOPY --from=builder /src /src\n'),
  },
  { what: 'own project name', content: 'name: PROJECT\n' + svc('') },
  {
    what: 'unicode and YAML 1.1 values',
    content: svc('    environment:\n      GREETING: "héllo 😀"\n      MODE: 0755\n      FLAG: "yes"\n      OCTAL_STRING: "0755"\n'),
  },
];

describe('host-safety policy with the real compose CLI', () => {
  let guard: ComposeGuard;
  let root: string;
  let command: string[];
  const dirs: string[] = [];
  const taken = `agent-test-hs-taken-${run}`;

  beforeAll(async () => {
    const detected = await detectCompose('auto');
    if (!detected) throw new Error('compose is needed for this test');
    command = detected;
    root = mkdtempSync(join(tmpdir(), 'agent-hs-'));
    guard = new ComposeGuard({ root: join(root, 'private'), dockerHost: null, command: async () => command, engine: realEngine(), log });
    await execa('docker', ['create', '--name', taken, '--label', 'agent.test=1', 'agent-test/busybox:latest', 'true']);
  });
  afterAll(async () => {
    await execa('docker', ['rm', '-f', taken], { reject: false });
    rmSync(root, { recursive: true, force: true });
  });

  const folder = (i: number, setup?: (dir: string) => void) => {
    const dir = join(root, `d${i}`);
    mkdirSync(dir, { recursive: true });
    dirs.push(dir);
    setup?.(dir);
    return dir;
  };

  /** Runs `fn` over `items`, a few at a time (each check is a compose process). */
  async function inBatches<T, R>(items: T[], fn: (item: T, i: number) => Promise<R>, size = 4): Promise<R[]> {
    const out: R[] = [];
    for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map((item, j) => fn(item, i + j)))));
    return out;
  }

  it(`refuses ${ATTEMPTS.length} escape attempts, each with the key named`, async () => {
    expect(ATTEMPTS.length).toBeGreaterThanOrEqual(60);
    const outcomes = await inBatches(ATTEMPTS, async (a, i) => {
      const dir = folder(i, a.setup);
      try {
        await guard.check({ project: `hs${run}-e${i}`, dir, content: a.content, env: a.env });
        return { a, code: 'ACCEPTED', key: '', message: '' };
      } catch (err) {
        const e = err as { code?: string; extra?: { key?: string }; message: string };
        return { a, code: e.code ?? 'ERROR', key: e.extra?.key ?? '', message: e.message };
      }
    });
    const wrong = outcomes.filter(({ a, code, key, message }) => {
      if (code === 'HOST_SAFETY') return !a.key.test(key);
      // Compose itself refusing a key it does not know (v1 predates some) is a refusal too, if it names the key.
      if (code === 'INVALID_COMPOSE') {
        const name = a.key.source
          .replace(/^\^|\$$/g, '')
          .split('\\.')[0]!
          .replace(/[()]/g, '');
        return !message.includes(name) && !a.key.test(key);
      }
      return true;
    });
    expect(wrong.map((w) => `${w.a.what}: ${w.code} ${w.key} ${w.message.slice(0, 160)}`)).toEqual([]);
    // Most are refused by the policy itself, naming the exception an admin could grant.
    expect(outcomes.filter((o) => o.code === 'HOST_SAFETY').length).toBeGreaterThanOrEqual(60);
  }, 300_000);

  it(`accepts ${ORDINARY.length} ordinary files, and compose reads the checked file back as the same model`, async () => {
    expect(ORDINARY.length).toBeGreaterThanOrEqual(30);
    const results = await inBatches(ORDINARY, async (o, i) => {
      const project = `hs${run}-o${i}`;
      const dir = folder(100 + i, o.setup);
      let checked: CheckedCompose;
      try {
        checked = await guard.check({ project, dir, content: o.content.replace('PROJECT', project), env: o.env });
      } catch (err) {
        return `${o.what}: refused: ${(err as Error).message}`;
      }
      // What runs is the checked file: compose's model of it must be the checked model, value for value.
      const file = join(root, `${project}.json`);
      writeFileSync(file, serializeModel(checked.model as Record<string, unknown>));
      writeFileSync(join(root, 'empty.env'), '');
      const r = await runCompose(
        command,
        null,
        root,
        ['--env-file', join(root, 'empty.env'), '-f', file, '--project-directory', dir, '-p', project, 'config'],
        { env: { LANG: 'C.UTF-8' }, stdout: true },
      );
      if (r.exit_code !== 0) return `${o.what}: compose refused the checked file: ${r.output}`;
      const back = unescape(parse(r.stdout, { version: flavourOf(command) === 'v1' ? '1.1' : '1.2', merge: true }), flavourOf(command) === 'v1');
      return JSON.stringify(back) === JSON.stringify(checked.model)
        ? null
        : `${o.what}: model changed:\n${JSON.stringify(checked.model)}\n${JSON.stringify(back)}`;
    });
    expect(results.filter(Boolean)).toEqual([]);
  }, 300_000);

  it('the warm parser answers every file of the corpus exactly as compose itself does', async () => {
    // The test environment's compose is Debian's docker-compose (v1), a Python console script: the guard's parser is
    // warm there, and its answers must be compose's own.
    const python = flavourOf(command) === 'v1' ? pythonOf(command[0]!) : null;
    if (!python) throw new Error(`this test needs compose v1 installed as a Python console script, not ${command.join(' ')}`);
    const warm = new WarmComposeConfig(python, command[0]!, log);
    try {
      const codes: number[] = [];
      const inputs = [...ATTEMPTS, ...ORDINARY].map((a, i) => ({ what: a.what, content: a.content, env: a.env, setup: a.setup, i }));
      const differences = await inBatches(inputs, async ({ what, content, env, setup, i }) => {
        const dir = folder(800 + i, setup);
        const project = `hs${run}-w${i}`;
        writeFileSync(join(dir, '.compose.yml'), content.replace('PROJECT', project));
        writeFileSync(
          join(dir, '.compose.env'),
          Object.entries(env ?? {})
            .map(([k, v]) => `${k}=${v}\n`)
            .join(''),
        );
        const args = ['--env-file', join(dir, '.compose.env'), '-f', join(dir, '.compose.yml'), '--project-directory', dir, '-p', project, 'config'];
        const env_ = { LANG: 'C.UTF-8' };
        const cold = await runCompose(command, null, dir, args, { env: env_, stdout: true });
        const hot = await warm.run(dir, args, env_);
        const lastLine = (s: string) => s.trim().split('\n').slice(-1)[0];
        const same = cold.exit_code === hot.exit_code && cold.stdout === hot.stdout && lastLine(cold.output) === lastLine(hot.output);
        codes.push(hot.exit_code);
        return same ? null : `${what}: cold ${cold.exit_code} ${lastLine(cold.output)} / warm ${hot.exit_code} ${lastLine(hot.output)}`;
      });
      expect(differences.filter(Boolean)).toEqual([]);
      // Compose's own refusals are among them (keys v1 does not know): the comparison covers its errors too.
      expect(codes.filter((c) => c === 0).length).toBeGreaterThanOrEqual(90);
      expect(codes.filter((c) => c !== 0).length).toBeGreaterThanOrEqual(5);
    } finally {
      warm.close();
    }
  }, 300_000);

  it('keeps a checked model by content: the same input costs no compose call, a change is checked again', async () => {
    const dir = folder(500);
    const content = svc('    command: ["true"]\n');
    const first = await guard.check({ project: `hs${run}-cache`, dir, content });
    const started = process.hrtime.bigint();
    const second = await guard.check({ project: `hs${run}-cache`, dir, content });
    expect(second).toBe(first);
    // A compose process takes hundreds of milliseconds; a kept model is a lookup.
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(100);
    const changed = await guard.check({ project: `hs${run}-cache`, dir, content: svc('    command: ["false"]\n') });
    expect(changed.hash).not.toBe(first.hash);
    // A new guard (an agent restart) finds the kept model on disk.
    const again = new ComposeGuard({ root: join(root, 'private'), dockerHost: null, command: async () => command, engine: realEngine(), log });
    expect((await again.check({ project: `hs${run}-cache`, dir, content })).hash).toBe(first.hash);
    expect(readdirSync(join(root, 'private', `hs${run}-cache`)).filter((f) => f.endsWith('.meta.json')).length).toBe(2);
  });

  it('lets exactly a granted exception through', async () => {
    const dir = folder(600);
    const content = svc('    cap_add: [NET_ADMIN]\n    volumes: ["/var/run/docker.sock:/var/run/docker.sock:ro"]\n');
    const refused = await guard.check({ project: `hs${run}-ex`, dir, content }).catch((e) => e);
    expect(refused.extra.violations.map((v: HostSafetyViolation) => v.exception).sort()).toEqual(['cap_add:NET_ADMIN', 'volumes:/var/run/docker.sock']);
    const partly = await guard.check({ project: `hs${run}-ex`, dir, content, exceptions: ['cap_add:NET_ADMIN'] }).catch((e) => e);
    expect(partly.extra.violations.map((v: HostSafetyViolation) => v.exception)).toEqual(['volumes:/var/run/docker.sock']);
    const granted = await guard.check({ project: `hs${run}-ex`, dir, content, exceptions: ['cap_add:NET_ADMIN', 'volumes:/var/run/docker.sock'] });
    expect([...granted.granted]).toEqual(['cap_add:NET_ADMIN', 'volumes:/var/run/docker.sock']);
    // An exception names one value: NET_ADMIN does not open SYS_ADMIN.
    const other = await guard
      .check({ project: `hs${run}-ex`, dir, content: svc('    cap_add: [SYS_ADMIN]\n'), exceptions: ['cap_add:NET_ADMIN'] })
      .catch((e) => e);
    expect(other.code).toBe('HOST_SAFETY');
  });

  it('interpolates only the project variables: nothing of the agent environment reaches the model', async () => {
    process.env.AGENT_SECRET_FOR_TEST = 'leaked';
    const dir = folder(700);
    const checked = await guard.check({
      project: `hs${run}-env`,
      dir,
      content: svc(
        '    environment:\n      - A=${AGENT_SECRET_FOR_TEST}\n      - H=${HOME}\n      - P=${PATH}\n      - D=${DOCKER_HOST}\n      - OWN=${OWN}\n',
      ),
      env: { OWN: 'mine' },
    });
    const env = (checked.model.services as any).app.environment;
    expect(env).toEqual({ A: '', H: '', P: '', D: '', OWN: 'mine' });
    delete process.env.AGENT_SECRET_FOR_TEST;
  });
});

describe('host-safety policy on compose v2 canonical models', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-hs2-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const check = (services: Record<string, unknown>, top: Record<string, unknown> = {}, exceptions: string[] = []) =>
    checkModel({ name: 'p', services, ...top }, { project: 'p', dir, exceptions: new Set(exceptions) }).violations;
  const app = (extra: Record<string, unknown>) => ({ app: { image: 'x', ...extra } });

  it('refuses what v2 writes in its long forms and keys v1 does not know', () => {
    const cases: [string, HostSafetyViolation[], RegExp][] = [
      [
        'long bind with create_host_path',
        check(app({ volumes: [{ type: 'bind', source: '/', target: '/host', bind: { create_host_path: true } }] })),
        /^volumes$/,
      ],
      ['use_api_socket', check(app({ use_api_socket: true })), /^use_api_socket$/],
      ['gpus', check(app({ gpus: 'all' })), /^gpus$/],
      ['device reservation', check(app({ deploy: { resources: { reservations: { devices: [{ capabilities: ['gpu'] }] } } } })), /^deploy\.resources/],
      ['privileged post_start hook', check(app({ post_start: [{ command: 'x', privileged: true }] })), /^post_start/],
      ['label_file', check(app({ label_file: '/etc/labels' })), /^label_file$/],
      ['provider service', check({ app: { provider: { type: 'x' } } }), /^provider$/],
      ['models', check(app({}), { models: { m: { model: 'x' } } }), /^models$/],
      ['include', check(app({}), { include: ['/etc/x.yml'] }), /^include$/],
      ['v2 device long form', check(app({ devices: [{ source: '/dev/kvm', target: '/dev/kvm', permissions: 'rwm' }] })), /^devices$/],
      ['v2 network with its explicit foreign name', check(app({}), { networks: { default: { name: 'other_default' } } }), /^networks\.default\.name$/],
      [
        'endpoint driver_opts',
        check(app({ networks: { default: { driver_opts: { 'com.docker.network.endpoint.sysctls': 'x' } } } })),
        /^networks\.default\.driver_opts$/,
      ],
      ['image mount', check(app({ volumes: [{ type: 'image', source: 'x', target: '/x' }] })), /^volumes$/],
      ['build additional_contexts', check({ app: { build: { context: dir, additional_contexts: { root: '/' } } } }), /^build\.additional_contexts$/],
      ['build entitlements', check({ app: { build: { context: dir, entitlements: ['security.insecure'] } } }), /^build\.entitlements$/],
      ['build ssh', check({ app: { build: { context: dir, ssh: ['default'] } } }), /^build\.ssh$/],
      ['nested default resolved to /', check(app({ volumes: [{ type: 'bind', source: '/', target: '/x' }] })), /^volumes$/],
      ['volume subpath', check(app({ volumes: [{ type: 'volume', source: 'data', target: '/d', volume: { subpath: 'x' } }] })), /^volumes\.volume\.subpath$/],
      ['a volume named in the dash spelling', check(app({}), { volumes: { data: { name: 'p-data' } } }), /^volumes\.data\.name$/],
      ['a network named like a longer project', check(app({}), { networks: { default: { name: 'p_x_default' } } }), /^networks\.default\.name$/],
      ['the folder read-write', check(app({ volumes: [{ type: 'bind', source: dir, target: '/app' }] })), /^volumes$/],
      [
        'additional context from an image',
        check({ app: { build: { context: dir, additional_contexts: { x: 'docker-image://otherproject_web' } } } }),
        /^build\.additional_contexts$/,
      ],
    ];
    for (const [what, violations, key] of cases) {
      expect(violations.length, what).toBeGreaterThan(0);
      expect(
        violations.some((v) => key.test(v.key)),
        `${what}: ${JSON.stringify(violations)}`,
      ).toBe(true);
    }
  });

  it("accepts v2's own defaults: the project name, default network and volume names", () => {
    expect(
      check(app({ volumes: [{ type: 'volume', source: 'data', target: '/d', volume: {} }], networks: { default: null } }), {
        networks: { default: { name: 'p_default' } },
        volumes: { data: { name: 'p_data' } },
      }),
    ).toEqual([]);
  });

  it('accepts additional build contexts inside the folder and of the same project', () => {
    expect(
      check({ app: { build: { context: dir, additional_contexts: { shared: join(dir, 'shared'), base: 'service:base' } } }, base: { image: 'x' } }),
    ).toEqual([]);
  });

  it('classifies every key in the README table of the docker plugin', () => {
    const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8');
    for (const row of policyTable()) {
      expect(readme, `${row.section} ${row.key}`).toContain(`| ${row.section} | \`${row.key}\` | ${row.status} | ${row.note} |`);
    }
  });
});

/** Compose v1 writes `$` doubled in its output. */
function unescape(value: unknown, escaped: boolean): unknown {
  if (typeof value === 'string') return escaped ? value.replace(/\$\$/g, '$') : value;
  if (Array.isArray(value)) return value.map((v) => unescape(v, escaped));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unescape(v, escaped)]));
  return value;
}
