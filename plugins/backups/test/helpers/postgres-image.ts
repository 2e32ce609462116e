/**
 * A PostgreSQL image built on this machine without any registry: the host's PostgreSQL 15 binaries (Debian
 * package `postgresql-15`, see test/env/packages.d/backups.txt) with their shared libraries, on top of
 * busybox-static, imported with `docker import`. Cached by tag. Its entrypoint follows the official image's
 * conventions (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB) so the agent treats it like one.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, cpSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const POSTGRES_IMAGE = 'agent-test/postgres-backups:15';
const PG_BIN = '/usr/lib/postgresql/15/bin';
const PROGRAMS = ['postgres', 'initdb', 'pg_ctl', 'psql', 'pg_dump', 'pg_isready'];
const UID = 999;

const ENTRYPOINT = `#!/bin/sh
set -e
export PATH=/usr/local/bin:/bin
PGDATA=/var/lib/postgresql/data
USER_NAME="\${POSTGRES_USER:-postgres}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s' "\${POSTGRES_PASSWORD:-postgres}" > /tmp/pwfile
  initdb -D "$PGDATA" -U "$USER_NAME" --pwfile=/tmp/pwfile --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C >/tmp/initdb.log
  rm -f /tmp/pwfile
  echo "listen_addresses='*'" >> "$PGDATA/postgresql.conf"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ -n "$POSTGRES_DB" ] && [ "$POSTGRES_DB" != "$USER_NAME" ]; then
    # Initialisation happens on a private socket, so nobody mistakes this temporary server for the real one.
    mkdir -p /tmp/init
    postgres -D "$PGDATA" -c listen_addresses= -c unix_socket_directories=/tmp/init &
    pid=$!
    until pg_isready -h /tmp/init -U "$USER_NAME" -q; do sleep 0.2; done
    psql -h /tmp/init -U "$USER_NAME" -d postgres -v ON_ERROR_STOP=1 -q -c "CREATE DATABASE \\"$POSTGRES_DB\\""
    kill "$pid"; wait "$pid" || true
  fi
fi
exec postgres -D "$PGDATA"
`;

function libraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  return [...out.matchAll(/=>\s+(\/\S+)/g), ...out.matchAll(/^\s*(\/lib\S*ld-linux\S+)/gm)].map((m) => m[1]!);
}

function copyInto(root: string, file: string, dest = file): void {
  const target = join(root, dest);
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(realpathSync(file), target);
  chmodSync(target, 0o755);
}

export function ensurePostgresImage(): string {
  if (spawnSync('docker', ['image', 'inspect', POSTGRES_IMAGE], { stdio: 'ignore' }).status === 0) return POSTGRES_IMAGE;
  if (!existsSync(join(PG_BIN, 'postgres'))) throw new Error(`${PG_BIN}/postgres missing: install postgresql-15 (bash test/env/up.sh)`);
  const root = mkdtempSync(join(tmpdir(), 'pg-rootfs-'));
  try {
    for (const dir of ['bin', 'tmp', 'etc', 'usr/local/bin', 'var/run/postgresql', 'var/lib/postgresql/data']) mkdirSync(join(root, dir), { recursive: true });
    copyInto(root, '/bin/busybox', '/bin/busybox');
    for (const applet of execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean)) {
      if (applet !== 'busybox') symlinkSync('busybox', join(root, 'bin', applet));
    }
    const libs = new Set<string>();
    for (const p of PROGRAMS) {
      // Debian's binaries find their share folder relative to /usr/lib/postgresql/15/bin.
      copyInto(root, join(PG_BIN, p));
      symlinkSync(join(PG_BIN, p), join(root, 'usr/local/bin', p));
      for (const lib of libraries(join(PG_BIN, p))) libs.add(lib);
    }
    // $libdir: server modules (text search dictionaries, procedural languages) and their libraries.
    cpSync('/usr/lib/postgresql/15/lib', join(root, 'usr/lib/postgresql/15/lib'), { recursive: true, dereference: true });
    for (const mod of ['plpgsql.so', 'dict_snowball.so']) for (const lib of libraries(join('/usr/lib/postgresql/15/lib', mod))) libs.add(lib);
    for (const lib of libs) copyInto(root, lib);
    cpSync('/usr/share/postgresql/15', join(root, 'usr/share/postgresql/15'), { recursive: true, dereference: true });
    cpSync('/usr/share/zoneinfo', join(root, 'usr/share/zoneinfo'), { recursive: true, dereference: true });
    writeFileSync(join(root, 'etc/passwd'), `root:x:0:0:root:/root:/bin/sh\npostgres:x:${UID}:${UID}:postgres:/var/lib/postgresql:/bin/sh\n`);
    writeFileSync(join(root, 'etc/group'), `root:x:0:\npostgres:x:${UID}:\n`);
    writeFileSync(join(root, 'usr/local/bin/docker-entrypoint.sh'), ENTRYPOINT, { mode: 0o755 });
    for (const dir of ['var/run/postgresql', 'var/lib/postgresql', 'var/lib/postgresql/data']) chownSync(join(root, dir), UID, UID);
    chmodSync(join(root, 'var/lib/postgresql/data'), 0o700);
    chmodSync(join(root, 'tmp'), 0o1777);
    const tar = spawnSync('tar', ['-C', root, '-c', '.'], { maxBuffer: 1024 * 1024 * 1024 });
    if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
    const imp = spawnSync(
      'docker',
      [
        'import',
        '-c',
        'USER postgres',
        '-c',
        'ENV PATH=/usr/local/bin:/bin',
        '-c',
        'VOLUME /var/lib/postgresql/data',
        '-c',
        'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]',
        '-',
        POSTGRES_IMAGE,
      ],
      { input: tar.stdout, maxBuffer: 16 * 1024 * 1024 },
    );
    if (imp.status !== 0) throw new Error(`docker import failed: ${imp.stderr}`);
    return POSTGRES_IMAGE;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
