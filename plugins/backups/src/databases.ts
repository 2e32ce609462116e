/**
 * Database services of a deployment and how to dump and load them: the dump and client programs of the
 * service's own image run INSIDE its container (docker exec with argv arrays; passwords go through the
 * environment, never argv), and their output is streamed.
 */
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import type { DockerService } from '@agent/plugin-docker/api';
import type { DatabaseEngine, DumpSource } from './archive/backup-archive.js';

export interface DatabaseService {
  service: string;
  engine: DatabaseEngine;
  container_id: string;
  user: string;
  /** Environment for the programs (MYSQL_PWD / PGPASSWORD). */
  env: string[];
  /** The database that exists from the start (postgres: where the client connects first). */
  default_db: string | null;
}

const SAFE_DB = /^[A-Za-z0-9_][A-Za-z0-9_$-]{0,63}$/;
const MYSQL_SYSTEM = new Set(['information_schema', 'performance_schema', 'mysql', 'sys']);

/** The engine of a compose service: label `agent.backup.engine` (mysql|postgres|none), else from the image name. */
export function engineOf(definition: unknown): DatabaseEngine | null {
  const service: { labels?: unknown; image?: unknown } = typeof definition === 'object' && definition !== null ? definition : {};
  const labels = service.labels;
  let label: string | undefined;
  if (Array.isArray(labels))
    label = labels
      .map(String)
      .find((l) => l.startsWith('agent.backup.engine='))
      ?.split('=')[1];
  else if (labels && typeof labels === 'object') {
    const value = (labels as Record<string, unknown>)['agent.backup.engine'];
    label = typeof value === 'string' ? value : undefined;
  }
  if (label === 'none') return null;
  if (label === 'mysql' || label === 'mariadb') return 'mysql';
  if (label === 'postgres' || label === 'postgresql') return 'postgres';
  const image = String(service.image ?? '')
    .toLowerCase()
    .split('@')[0]!;
  const repo = image.split(':')[0]!.split('/').pop() ?? '';
  if (/mariadb|mysql|percona/.test(repo)) return 'mysql';
  if (/postgres|postgis|timescale/.test(repo)) return 'postgres';
  return null;
}

const envMap = (env: string[]): Record<string, string> => Object.fromEntries(env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));

export class DatabaseTools {
  constructor(
    private readonly docker: DockerService,
    private readonly deployments: DeploymentsService,
  ) {}

  /** Compose services of a deployment that are databases (whether or not they run). */
  async declared(name: string): Promise<{ service: string; engine: DatabaseEngine }[]> {
    const { parsed } = await this.deployments.compose(name);
    const out: { service: string; engine: DatabaseEngine }[] = [];
    for (const [service, def] of Object.entries((parsed.services ?? {}) as Record<string, unknown>)) {
      const engine = engineOf(def);
      if (engine) out.push({ service, engine });
    }
    return out;
  }

  /** A running database service with the credentials its container was started with. */
  async resolve(name: string, service: string, engine: DatabaseEngine): Promise<DatabaseService | null> {
    const summary = await this.deployments.serviceContainer(name, service);
    if (!summary || summary.state !== 'running') return null;
    const details = await this.docker.inspectContainer(summary.id);
    const env = envMap(details.env);
    if (engine === 'mysql') {
      const rootPw = env.MARIADB_ROOT_PASSWORD ?? env.MYSQL_ROOT_PASSWORD;
      const user = rootPw !== undefined ? 'root' : (env.MARIADB_USER ?? env.MYSQL_USER ?? 'root');
      const pw = rootPw ?? env.MARIADB_PASSWORD ?? env.MYSQL_PASSWORD ?? '';
      return {
        service,
        engine,
        container_id: summary.id,
        user,
        env: pw ? [`MYSQL_PWD=${pw}`] : [],
        default_db: env.MARIADB_DATABASE ?? env.MYSQL_DATABASE ?? null,
      };
    }
    const user = env.POSTGRES_USER ?? 'postgres';
    return {
      service,
      engine,
      container_id: summary.id,
      user,
      env: env.POSTGRES_PASSWORD ? [`PGPASSWORD=${env.POSTGRES_PASSWORD}`] : [],
      default_db: env.POSTGRES_DB ?? user,
    };
  }

  /** mariadb-* programs on current MariaDB images, mysql* elsewhere. */
  private async mysqlProgram(db: DatabaseService, kind: 'client' | 'dump'): Promise<string> {
    const candidates = kind === 'dump' ? ['mariadb-dump', 'mysqldump'] : ['mariadb', 'mysql'];
    for (const program of candidates) {
      const r = await this.docker.exec(db.container_id, [program, '--version'], { timeoutMs: 15_000 }).catch(() => null);
      if (r && r.exit_code === 0) return program;
    }
    throw new Error(`no ${candidates.join(' or ')} in the container of service '${db.service}'`);
  }

  /** Whether the server answers a trivial query. */
  async ready(db: DatabaseService): Promise<boolean> {
    const argv =
      db.engine === 'mysql'
        ? [await this.mysqlProgram(db, 'client').catch(() => 'mysql'), '-u', db.user, '-e', 'SELECT 1']
        : ['psql', '-U', db.user, '-d', db.default_db ?? 'postgres', '-At', '-c', 'SELECT 1'];
    const r = await this.docker.exec(db.container_id, argv, { env: db.env, timeoutMs: 15_000 }).catch(() => null);
    return !!r && r.exit_code === 0;
  }

  async waitReady(db: DatabaseService, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!(await this.ready(db))) {
      signal?.throwIfAborted();
      if (Date.now() > until) throw new Error(`database service '${db.service}' did not become ready in ${Math.round(timeoutMs / 1000)} s`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** The user databases of the server (system schemas left out). */
  async databases(db: DatabaseService): Promise<string[]> {
    const argv =
      db.engine === 'mysql'
        ? [await this.mysqlProgram(db, 'client'), '-u', db.user, '-N', '-B', '-e', 'SHOW DATABASES']
        : [
            'psql',
            '-U',
            db.user,
            '-d',
            db.default_db ?? 'postgres',
            '-At',
            '-c',
            "SELECT datname FROM pg_database WHERE NOT datistemplate AND datname <> 'postgres' ORDER BY datname",
          ];
    const r = await this.docker.exec(db.container_id, argv, { env: db.env, timeoutMs: 60_000 });
    if (r.exit_code !== 0) throw new Error(`listing databases of '${db.service}' failed: ${r.stderr.trim().slice(0, 500)}`);
    return r.stdout
      .split('\n')
      .map((s) => s.trim())
      .filter((s) => s && SAFE_DB.test(s) && !(db.engine === 'mysql' && MYSQL_SYSTEM.has(s)));
  }

  /** A dump of the given databases, streamed from the container. */
  dumpSource(db: DatabaseService, databases: string[], signal?: AbortSignal): DumpSource {
    return {
      service: db.service,
      engine: db.engine,
      databases,
      open: async () => (db.engine === 'mysql' ? this.openMysqlDump(db, databases, signal) : this.openPostgresDump(db, databases, signal)),
    };
  }

  private async openMysqlDump(db: DatabaseService, databases: string[], signal?: AbortSignal) {
    if (databases.length === 0) return { stdout: (async function* () {})(), finish: async () => undefined };
    const program = await this.mysqlProgram(db, 'dump');
    const run = await this.docker.execStream(
      db.container_id,
      [program, '-u', db.user, '--single-transaction', '--quick', '--routines', '--events', '--triggers', '--add-drop-table', '--databases', ...databases],
      { env: db.env, signal },
    );
    return {
      stdout: run.stdout as AsyncIterable<Buffer>,
      finish: async () => {
        const code = await run.wait();
        if (code !== 0) throw new Error(`${program} of '${db.service}' exited with ${code}: ${run.stderr().trim().slice(0, 500)}`);
      },
    };
  }

  private async openPostgresDump(db: DatabaseService, databases: string[], signal?: AbortSignal) {
    const docker = this.docker;
    const failures: string[] = [];
    // One pg_dump per database, joined into one script for psql: create the database when missing, connect, load.
    const stdout = (async function* () {
      for (const name of databases) {
        yield Buffer.from(
          `SELECT 'CREATE DATABASE "${name}"' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '${name}')\\gexec\n\\connect "${name}"\n`,
        );
        const run = await docker.execStream(db.container_id, ['pg_dump', '-U', db.user, '--clean', '--if-exists', '--no-owner', '-d', name], {
          env: db.env,
          signal,
        });
        yield* run.stdout as AsyncIterable<Buffer>;
        const code = await run.wait();
        if (code !== 0) failures.push(`pg_dump of '${name}' in '${db.service}' exited with ${code}: ${run.stderr().trim().slice(0, 500)}`);
        if (failures.length) throw new Error(failures[0]);
      }
    })();
    return {
      stdout,
      finish: async () => {
        if (failures.length) throw new Error(failures[0]);
      },
    };
  }

  /** Loads a dump (a stream of SQL) into the server through its client, reading from stdin. */
  async load(db: DatabaseService, dump: AsyncIterable<Buffer>, signal?: AbortSignal): Promise<void> {
    const argv =
      db.engine === 'mysql'
        ? [await this.mysqlProgram(db, 'client'), '-u', db.user]
        : ['psql', '-U', db.user, '-d', db.default_db ?? 'postgres', '-v', 'ON_ERROR_STOP=1', '-q'];
    const run = await this.docker.execStream(db.container_id, argv, { env: db.env, stdin: true, signal });
    // The client's output is not needed but must be drained so it never blocks.
    const drained = (async () => {
      for await (const _ of run.stdout as AsyncIterable<Buffer>) void _;
    })();
    let feedError: unknown = null;
    try {
      await pipeline(Readable.from(dump), run.stdin!, { end: true });
    } catch (err) {
      feedError = err;
      run.stdin?.destroy();
    }
    await drained.catch(() => undefined);
    const code = await run.wait();
    if (feedError) throw feedError;
    if (code !== 0) throw new Error(`loading the dump into '${db.service}' failed (exit ${code}): ${run.stderr().trim().slice(0, 500)}`);
  }

  /** Loads a dump kept in a file (the safety copy taken before a restore). */
  async loadFile(db: DatabaseService, path: string, signal?: AbortSignal): Promise<void> {
    await this.load(db, createReadStream(path) as AsyncIterable<Buffer>, signal);
  }
}

export { SAFE_DB };
