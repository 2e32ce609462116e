/**
 * A MariaDB image built on this machine without any registry: the host's MariaDB binaries (Debian package
 * `mariadb-server`, see test/env/packages.d/backups.txt) with their shared libraries, on busybox-static,
 * imported with `docker import`, cached by tag. Its entrypoint follows the official image's conventions
 * (MARIADB_ROOT_PASSWORD, MARIADB_DATABASE) so the agent treats it like one.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const MARIADB_IMAGE = 'agent-test/mariadb-backups:10.11';
const PROGRAMS = [
  '/usr/sbin/mariadbd',
  '/usr/bin/mariadb',
  '/usr/bin/mariadb-dump',
  '/usr/bin/mariadb-install-db',
  '/usr/bin/my_print_defaults',
  '/usr/bin/mariadb-admin',
];
const UID = 999;

const ENTRYPOINT = `#!/bin/sh
set -e
export PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin
DATADIR=/var/lib/mysql
if [ ! -d "$DATADIR/mysql" ]; then
  mariadb-install-db --datadir="$DATADIR" --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve --force >/tmp/install.log 2>&1
  # Initialisation on a private socket without networking, so nobody mistakes this server for the real one.
  mariadbd --datadir="$DATADIR" --skip-networking --socket=/tmp/init.sock &
  pid=$!
  until mariadb-admin --socket=/tmp/init.sock ping >/dev/null 2>&1; do sleep 0.2; done
  {
    echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '\${MARIADB_ROOT_PASSWORD}';"
    if [ -n "\${MARIADB_DATABASE}" ]; then echo "CREATE DATABASE IF NOT EXISTS \\\`\${MARIADB_DATABASE}\\\`;"; fi
    echo "FLUSH PRIVILEGES;"
  } | mariadb --socket=/tmp/init.sock -u root
  mariadb-admin --socket=/tmp/init.sock -u root -p"\${MARIADB_ROOT_PASSWORD}" shutdown
  wait "$pid" || true
fi
exec mariadbd --datadir="$DATADIR" --bind-address=0.0.0.0
`;

function libraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  return [...out.matchAll(/=>\s+(\/\S+)/g), ...out.matchAll(/^\s*(\/lib\S*ld-linux\S+)/gm)].map((m) => m[1]!);
}

function copyInto(root: string, file: string): void {
  const target = join(root, file);
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(realpathSync(file), target);
  chmodSync(target, 0o755);
}

export function ensureMariadbImage(): string {
  if (spawnSync('docker', ['image', 'inspect', MARIADB_IMAGE], { stdio: 'ignore' }).status === 0) return MARIADB_IMAGE;
  for (const p of PROGRAMS) if (!existsSync(p)) throw new Error(`${p} missing: install mariadb-server (bash test/env/up.sh)`);
  const root = mkdtempSync(join(tmpdir(), 'mariadb-rootfs-'));
  try {
    for (const dir of ['bin', 'tmp', 'etc/mysql', 'usr/local/bin', 'run/mysqld', 'var/lib/mysql']) mkdirSync(join(root, dir), { recursive: true });
    copyInto(root, '/bin/busybox');
    for (const applet of execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean)) {
      if (applet !== 'busybox') symlinkSync('busybox', join(root, 'bin', applet));
    }
    const libs = new Set<string>();
    for (const p of PROGRAMS) {
      copyInto(root, p);
      if (p !== '/usr/bin/mariadb-install-db') for (const lib of libraries(p)) libs.add(lib);
    }
    for (const lib of libs) copyInto(root, lib);
    // Names the official image (and the agent) look for.
    for (const [link, target] of [
      ['/usr/bin/mysql', 'mariadb'],
      ['/usr/bin/mysqldump', 'mariadb-dump'],
    ])
      symlinkSync(target, join(root, link));
    cpSync('/usr/share/mysql', join(root, 'usr/share/mysql'), { recursive: true, dereference: true });
    if (existsSync('/usr/share/mariadb')) cpSync('/usr/share/mariadb', join(root, 'usr/share/mariadb'), { recursive: true, dereference: true });
    writeFileSync(join(root, 'etc/mysql/my.cnf'), '[mysqld]\nuser=mysql\nsocket=/run/mysqld/mysqld.sock\n[client]\nsocket=/run/mysqld/mysqld.sock\n');
    writeFileSync(join(root, 'etc/passwd'), `root:x:0:0:root:/root:/bin/sh\nmysql:x:${UID}:${UID}:mysql:/var/lib/mysql:/bin/sh\n`);
    writeFileSync(join(root, 'etc/group'), `root:x:0:\nmysql:x:${UID}:\n`);
    writeFileSync(join(root, 'usr/local/bin/docker-entrypoint.sh'), ENTRYPOINT, { mode: 0o755 });
    for (const dir of ['run/mysqld', 'var/lib/mysql']) chownSync(join(root, dir), UID, UID);
    chmodSync(join(root, 'tmp'), 0o1777);
    const tar = spawnSync('tar', ['-C', root, '-c', '.'], { maxBuffer: 1024 * 1024 * 1024 });
    if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
    const imp = spawnSync(
      'docker',
      [
        'import',
        '-c',
        'USER mysql',
        '-c',
        'ENV PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin',
        '-c',
        'VOLUME /var/lib/mysql',
        '-c',
        'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]',
        '-',
        MARIADB_IMAGE,
      ],
      { input: tar.stdout, maxBuffer: 16 * 1024 * 1024 },
    );
    if (imp.status !== 0) throw new Error(`docker import failed: ${imp.stderr}`);
    return MARIADB_IMAGE;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
