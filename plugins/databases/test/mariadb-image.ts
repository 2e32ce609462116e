/**
 * A MariaDB image made on this machine, no registry: Debian's mariadbd with its libraries and data files, a data
 * folder initialised by mariadb-install-db at build time, and a start script that follows the official image's
 * conventions (MARIADB_ROOT_PASSWORD → root@'%', MARIADB_DATABASE created). Cached by tag.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ensureImage } from '../../infrastructure/test/local-images.js';

export const MARIADB_IMAGE = 'agent-test/mariadb:10.11';

const START = `#!/bin/sh
set -e
mkdir -p /run/mysqld
init=/tmp/init.sql
: > "$init"
if [ -n "$MARIADB_ROOT_PASSWORD" ]; then
  printf "ALTER USER 'root'@'localhost' IDENTIFIED BY '%s';\\nCREATE USER IF NOT EXISTS 'root'@'%%' IDENTIFIED BY '%s';\\nGRANT ALL PRIVILEGES ON *.* TO 'root'@'%%' WITH GRANT OPTION;\\n" "$MARIADB_ROOT_PASSWORD" "$MARIADB_ROOT_PASSWORD" >> "$init"
fi
if [ -n "$MARIADB_DATABASE" ]; then printf 'CREATE DATABASE IF NOT EXISTS \`%s\`;\\n' "$MARIADB_DATABASE" >> "$init"; fi
exec mariadbd --no-defaults --user=root --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock --port=3306 \\
  --bind-address=0.0.0.0 --skip-name-resolve --skip-log-bin --innodb-buffer-pool-size=32M --init-file="$init"
`;

export function ensureMariaDbImage(): string {
  return ensureImage({
    tag: MARIADB_IMAGE,
    binaries: ['/usr/sbin/mariadbd'],
    trees: ['/usr/share/mysql'],
    dirs: ['run/mysqld', 'var/lib/mysql'],
    start: START,
    // The system tables are created at build time; the container only applies its environment at start.
    prepare: (root) => {
      execFileSync(
        'mariadb-install-db',
        [
          '--no-defaults',
          `--datadir=${join(root, 'var/lib/mysql')}`,
          '--user=root',
          '--auth-root-authentication-method=normal',
          '--skip-test-db',
          '--skip-name-resolve',
        ],
        { stdio: 'ignore' },
      );
    },
    changes: ['ENV PATH=/usr/sbin:/usr/bin:/bin', 'VOLUME /var/lib/mysql', 'EXPOSE 3306/tcp', 'ENTRYPOINT ["/bin/sh", "/start.sh"]'],
  });
}
