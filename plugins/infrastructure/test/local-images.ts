/**
 * Images of real servers made on this machine, without any registry: Debian's binaries with the shared libraries
 * they load, on busybox-static, imported with `docker import` and cached by tag. Each follows the conventions of
 * the official image the template expects, so the template runs unchanged.
 *  - agent-test/pdns: pdns_server + gsqlite3 backend; sqlite database in /var/lib/powerdns, DNS on 53, HTTP API on
 *    8081 with the key from PDNS_AUTH_API_KEY, `pdns_control rping` for the health check.
 *  - agent-test/redis: redis-server and redis-cli in PATH, data in /data.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const PDNS_IMAGE = 'agent-test/pdns:4.7';
export const REDIS_IMAGE = 'agent-test/redis:7';

export interface ImageSpec {
  tag: string;
  /** Executables and modules copied at the same path, with their libraries. */
  binaries: string[];
  /** Plain files: source → path in the image. */
  files?: Record<string, string>;
  dirs?: string[];
  /** Folders copied whole at the same path (data files a server reads at run time). */
  trees?: string[];
  /** Last step before the image is packed, with the root folder (e.g. to initialise a data folder). */
  prepare?(root: string): void;
  /** Script written to /start.sh and used as entrypoint. */
  start?: string;
  /** `docker import -c` changes (ENV, VOLUME, CMD, …). */
  changes: string[];
}

/** Shared libraries a binary loads (resolved paths, the dynamic loader included). */
function libraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  return [...out.matchAll(/=>\s+(\/\S+)/g), ...out.matchAll(/^\s*(\/\S*ld-linux\S*)\s/gm)].map((m) => m[1]!);
}

function copy(root: string, file: string, dest = file): void {
  const target = join(root, dest);
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(realpathSync(file), target);
  chmodSync(target, 0o755);
}

/** Builds the image unless an image with that tag exists. */
export function ensureImage(spec: ImageSpec): string {
  if (spawnSync('docker', ['image', 'inspect', spec.tag], { stdio: 'ignore' }).status === 0) return spec.tag;
  for (const file of [...spec.binaries, ...Object.keys(spec.files ?? {}), ...(spec.trees ?? [])]) {
    if (!existsSync(file)) throw new Error(`${file} is missing for ${spec.tag}: run bash test/env/up.sh (test/env/packages.d/infrastructure.txt)`);
  }
  const root = mkdtempSync(join(tmpdir(), 'image-rootfs-'));
  try {
    for (const dir of ['bin', 'tmp', 'etc', ...(spec.dirs ?? [])]) mkdirSync(join(root, dir), { recursive: true });
    copy(root, '/bin/busybox');
    for (const applet of execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean)) {
      if (applet !== 'busybox') symlinkSync('busybox', join(root, 'bin', applet));
    }
    const libs = new Set<string>();
    for (const bin of spec.binaries) {
      // Copied under its own name: some programs (redis-server) pick their role from argv[0].
      copy(root, bin);
      for (const lib of libraries(bin)) libs.add(lib);
    }
    for (const lib of libs) copy(root, lib);
    for (const [src, dest] of Object.entries(spec.files ?? {})) {
      mkdirSync(dirname(join(root, dest)), { recursive: true });
      copyFileSync(src, join(root, dest));
    }
    for (const tree of spec.trees ?? []) cpSync(tree, join(root, tree), { recursive: true, dereference: true });
    writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    writeFileSync(join(root, 'etc/group'), 'root:x:0:\n');
    if (spec.start) writeFileSync(join(root, 'start.sh'), spec.start, { mode: 0o755 });
    chmodSync(join(root, 'tmp'), 0o1777);
    spec.prepare?.(root);
    const tar = spawnSync('tar', ['-C', root, '-c', '.'], { maxBuffer: 512 * 1024 * 1024 });
    if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
    const changes = [...spec.changes, 'LABEL agent.test=1'].flatMap((c) => ['-c', c]);
    const imported = spawnSync('docker', ['import', ...changes, '-', spec.tag], { input: tar.stdout, maxBuffer: 16 * 1024 * 1024 });
    if (imported.status !== 0) throw new Error(`docker import of ${spec.tag} failed: ${imported.stderr}`);
    return spec.tag;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const PDNS_START = `#!/bin/sh
set -e
db=/var/lib/powerdns/pdns.sqlite3
mkdir -p /var/lib/powerdns /var/run/pdns
[ -s "$db" ] || sqlite3 "$db" < /usr/share/pdns/schema.sqlite3.sql
exec pdns_server --no-config --guardian=no --daemon=no --disable-syslog --write-pid=no \\
  --launch=gsqlite3 --gsqlite3-database="$db" --local-address=0.0.0.0 --local-port=53 \\
  --api=yes --api-key="$PDNS_AUTH_API_KEY" --webserver=yes --webserver-address=0.0.0.0 --webserver-port=8081 \\
  --webserver-allow-from=0.0.0.0/0,::/0 --socket-dir=/var/run/pdns --security-poll-suffix= "$@"
`;

export function ensurePdnsImage(): string {
  return ensureImage({
    tag: PDNS_IMAGE,
    binaries: ['/usr/sbin/pdns_server', '/usr/bin/pdns_control', '/usr/bin/sqlite3', '/usr/lib/x86_64-linux-gnu/pdns/libgsqlite3backend.so'],
    files: { '/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql': 'usr/share/pdns/schema.sqlite3.sql' },
    dirs: ['var/lib/powerdns', 'var/run/pdns'],
    start: PDNS_START,
    changes: ['ENV PATH=/usr/sbin:/usr/bin:/bin', 'VOLUME /var/lib/powerdns', 'EXPOSE 53/udp 53/tcp 8081/tcp', 'ENTRYPOINT ["/bin/sh", "/start.sh"]'],
  });
}

export function ensureRedisImage(): string {
  return ensureImage({
    tag: REDIS_IMAGE,
    binaries: ['/usr/bin/redis-server', '/usr/bin/redis-cli'],
    dirs: ['data'],
    changes: ['ENV PATH=/usr/bin:/bin', 'WORKDIR /data', 'VOLUME /data', 'EXPOSE 6379/tcp', 'CMD ["redis-server", "--protected-mode", "no"]'],
  });
}
