/**
 * A PowerDNS image made on this machine, no registry: Debian's pdns_server, pdns_control, the gsqlite3 backend and
 * sqlite3 with the shared libraries they load, on busybox-static, imported with `docker import` (cached by tag).
 * Its start script follows the official pdns-auth image: sqlite database in /var/lib/powerdns, DNS on 53, the
 * HTTP API on 8081 with the key from PDNS_AUTH_API_KEY, control socket for `pdns_control rping`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const PDNS_IMAGE = 'agent-test/pdns:4.7';

const MODULE_DIR = '/usr/lib/x86_64-linux-gnu/pdns';
const SCHEMA = '/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql';
const PROGRAMS = ['/usr/sbin/pdns_server', '/usr/bin/pdns_control', '/usr/bin/sqlite3'];

const START = `#!/bin/sh
set -e
db=/var/lib/powerdns/pdns.sqlite3
mkdir -p /var/lib/powerdns /var/run/pdns
[ -s "$db" ] || sqlite3 "$db" < /usr/share/pdns/schema.sqlite3.sql
exec pdns_server --no-config --guardian=no --daemon=no --disable-syslog --write-pid=no \\
  --launch=gsqlite3 --gsqlite3-database="$db" --local-address=0.0.0.0 --local-port=53 \\
  --api=yes --api-key="$PDNS_AUTH_API_KEY" --webserver=yes --webserver-address=0.0.0.0 --webserver-port=8081 \\
  --webserver-allow-from=0.0.0.0/0,::/0 --socket-dir=/var/run/pdns --security-poll-suffix= "$@"
`;

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

export function ensurePdnsImage(): string {
  if (spawnSync('docker', ['image', 'inspect', PDNS_IMAGE], { stdio: 'ignore' }).status === 0) return PDNS_IMAGE;
  for (const file of [...PROGRAMS, SCHEMA, join(MODULE_DIR, 'libgsqlite3backend.so')]) {
    if (!existsSync(file)) throw new Error(`${file} is missing: install pdns-server, pdns-backend-sqlite3 and sqlite3 (bash test/env/up.sh)`);
  }
  const root = mkdtempSync(join(tmpdir(), 'pdns-rootfs-'));
  try {
    for (const dir of ['bin', 'tmp', 'etc', 'var/lib/powerdns', 'var/run/pdns', 'usr/share/pdns']) mkdirSync(join(root, dir), { recursive: true });
    copy(root, '/bin/busybox');
    for (const applet of execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean)) {
      if (applet !== 'busybox') symlinkSync('busybox', join(root, 'bin', applet));
    }
    const libs = new Set<string>();
    const binaries = [...PROGRAMS, join(MODULE_DIR, 'libgsqlite3backend.so')];
    for (const bin of binaries) {
      copy(root, bin);
      for (const lib of libraries(bin)) libs.add(lib);
    }
    for (const lib of libs) copy(root, lib);
    copyFileSync(SCHEMA, join(root, 'usr/share/pdns/schema.sqlite3.sql'));
    writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    writeFileSync(join(root, 'etc/group'), 'root:x:0:\n');
    writeFileSync(join(root, 'start.sh'), START, { mode: 0o755 });
    chmodSync(join(root, 'tmp'), 0o1777);
    const tar = spawnSync('tar', ['-C', root, '-c', '.'], { maxBuffer: 512 * 1024 * 1024 });
    if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
    const imported = spawnSync('docker', [
      'import', '-c', 'ENV PATH=/usr/sbin:/usr/bin:/bin', '-c', 'VOLUME /var/lib/powerdns', '-c', 'EXPOSE 53/udp 53/tcp 8081/tcp',
      '-c', 'LABEL agent.test=1', '-c', 'ENTRYPOINT ["/bin/sh", "/start.sh"]', '-', PDNS_IMAGE,
    ], { input: tar.stdout, maxBuffer: 16 * 1024 * 1024 });
    if (imported.status !== 0) throw new Error(`docker import failed: ${imported.stderr}`);
    return PDNS_IMAGE;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
