/**
 * Managed object stores: an S3-compatible server (server/objstore.mjs, run by the agent's own Node binary) in an
 * image built on this host, deployed as a compose deployment through the deployments service. Also attaching
 * stores to deployments (env vars + network access).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm, writeFile, chmod } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { errors, type Logger, type Principal } from '@agent/sdk';
import { type DeploymentsService } from '@agent/plugin-deployments/api';
import { type DockerService } from '@agent/plugin-docker/api';
import { ObjectStoreClient } from './client.js';
import type { StoreRecord, StoreRegistry } from './stores.js';

const run = promisify(execFile);
export const OBJSTORE_IMAGE = 'agent/objstore:0.1.0';

export interface ManagedDeps {
  stores: StoreRegistry;
  deployments(): DeploymentsService;
  docker(): DockerService;
  packageDir: string;
  workDir: string;
  log: Logger;
  /** Extra container labels (tests mark their containers). */
  labels: Record<string, string>;
}

/** Shared libraries a binary needs, from ldd (argv, no shell). */
async function sharedLibraries(binary: string): Promise<string[]> {
  const { stdout } = await run('ldd', [binary]);
  const libs: string[] = [];
  for (const line of stdout.split('\n')) {
    const m = /=>\s+(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m) libs.push(m[1]!);
  }
  return libs;
}

export class ManagedStores {
  constructor(private readonly deps: ManagedDeps) {}

  /** Builds the store image from the agent's Node binary and the bundled server (cached by the engine). */
  async buildImage(): Promise<void> {
    const docker = this.deps.docker();
    const dir = await mkdtemp(join(this.deps.workDir, 'objstore-build-'));
    try {
      const root = join(dir, 'rootfs');
      const node = process.execPath;
      for (const file of [node, ...(await sharedLibraries(node))]) {
        const dest = join(root, file === node ? '/usr/local/bin/node' : file);
        await mkdir(dirname(dest), { recursive: true });
        await copyFile(file, dest);
        await chmod(dest, 0o755);
      }
      await mkdir(join(root, 'app'), { recursive: true });
      await copyFile(join(this.deps.packageDir, 'server', 'objstore.mjs'), join(root, 'app', 'objstore.mjs'));
      await mkdir(join(root, 'etc'), { recursive: true });
      await writeFile(join(root, 'etc', 'passwd'), 'root:x:0:0:root:/:/bin/false\nobjstore:x:1000:1000::/data:/bin/false\n');
      await writeFile(join(root, 'etc', 'group'), 'root:x:0:\nobjstore:x:1000:\n');
      await mkdir(join(dir, 'data'), { recursive: true });
      await writeFile(join(dir, 'data', '.keep'), '');
      await writeFile(
        join(dir, 'Dockerfile'),
        [
          'FROM scratch',
          'COPY rootfs/ /',
          'COPY --chown=1000:1000 data/ /data/',
          'USER 1000:1000',
          'ENV S3_DATA=/data S3_PORT=9000',
          'EXPOSE 9000',
          'ENTRYPOINT ["/usr/local/bin/node", "/app/objstore.mjs"]',
          '',
        ].join('\n'),
      );
      const project = `agent-objstore-build-${randomBytes(3).toString('hex')}`;
      // The agent's own build goes through the same guarded compose path as any deployment.
      const checked = await docker.compose.check({ project, dir, content: `services:\n  objstore:\n    build: .\n    image: ${OBJSTORE_IMAGE}\n` });
      try {
        const r = await docker.compose.run(checked, { command: 'build' });
        if (r.exit_code !== 0) throw errors.internal(`building the object store image failed: ${r.output.slice(-800)}`, 'IMAGE_BUILD_FAILED');
      } finally {
        await docker.compose.forget(project);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  async provision(input: { name: string; port: number; bucket: string }, principal: Principal): Promise<StoreRecord> {
    const { stores } = this.deps;
    const deployments = this.deps.deployments();
    const deployment = `objstore-${input.name}`;
    if (stores.find(input.name)) throw errors.conflict(`object store '${input.name}' already exists`, 'OBJECT_STORE_EXISTS');
    if (deployments.get(deployment)) throw errors.conflict(`deployment '${deployment}' already exists`, 'DEPLOYMENT_EXISTS');
    await this.buildImage();

    const accessKey = `AK${randomBytes(9).toString('hex').toUpperCase()}`;
    const secretKey = randomBytes(30).toString('base64url');
    const network = `agent-objstore-${input.name}`;
    const alias = `objstore-${input.name}`;
    const compose = [
      'services:',
      '  s3:',
      `    image: ${OBJSTORE_IMAGE}`,
      '    restart: unless-stopped',
      '    environment:',
      '      S3_ACCESS_KEY: ${S3_ACCESS_KEY}',
      '      S3_SECRET_KEY: ${S3_SECRET_KEY}',
      '    ports:',
      `      - "127.0.0.1:${input.port === 0 ? '' : input.port}:9000"`,
      '    volumes:',
      '      - data:/data',
      ...(Object.keys(this.deps.labels).length
        ? ['    labels:', ...Object.entries(this.deps.labels).map(([k, v]) => `      ${JSON.stringify(k)}: ${JSON.stringify(v)}`)]
        : []),
      '    networks:',
      '      default: {}',
      '      store:',
      `        aliases: [${alias}]`,
      'networks:',
      '  store:',
      `    name: ${network}`,
      'volumes:',
      '  data: {}',
      '',
    ].join('\n');
    await deployments.create(
      {
        name: deployment,
        compose_content: compose,
        auto_start: true,
        env_vars: [
          { key: 'S3_ACCESS_KEY', value: accessKey },
          { key: 'S3_SECRET_KEY', value: secretKey },
        ],
        // Its network has a name of its own so that attached deployments can join it.
        exceptions: [`networks.name:${network}`],
      },
      principal,
    );
    try {
      const container = await deployments.serviceContainer(deployment, 's3');
      const port = container?.ports.find((p) => p.private === 9000 && p.public)?.public;
      if (!port) throw new Error('the store container publishes no port');
      const record: StoreRecord = {
        name: input.name,
        endpoint: `http://127.0.0.1:${port}`,
        region: 'us-east-1',
        access_key_id: accessKey,
        secret_access_key: secretKey,
        path_style: true,
        bucket: input.bucket,
        prefix: '',
        managed: { deployment, service: 's3', internal_endpoint: `http://${alias}:9000`, network, alias },
        attachments: [],
        created_at: new Date().toISOString(),
      };
      const client = new ObjectStoreClient(record);
      try {
        const until = Date.now() + 60_000;
        for (;;) {
          try {
            await client.listBuckets();
            break;
          } catch (err) {
            if (Date.now() > until) throw err;
            await new Promise((r) => setTimeout(r, 500));
          }
        }
        if (!(await client.bucketExists(input.bucket))) await client.createBucket(input.bucket);
      } finally {
        client.destroy();
      }
      await stores.add(record);
      return record;
    } catch (err) {
      await deployments.remove(deployment, { remove_files: true }).catch(() => undefined);
      throw err;
    }
  }

  async remove(record: StoreRecord): Promise<void> {
    if (!record.managed) return;
    const deployments = this.deps.deployments();
    if (deployments.get(record.managed.deployment)) await deployments.remove(record.managed.deployment, { remove_files: true });
  }

  /** Environment a deployment gets for a store. */
  private envFor(record: StoreRecord, bucket: string, prefix: string): Record<string, string> {
    const endpoint = record.managed?.internal_endpoint ?? record.endpoint;
    return {
      S3_ENDPOINT: endpoint,
      S3_REGION: record.region,
      S3_BUCKET: bucket,
      S3_PREFIX: prefix,
      S3_FORCE_PATH_STYLE: String(record.path_style),
      S3_ACCESS_KEY_ID: record.access_key_id,
      S3_SECRET_ACCESS_KEY: record.secret_access_key,
      AWS_ACCESS_KEY_ID: record.access_key_id,
      AWS_SECRET_ACCESS_KEY: record.secret_access_key,
      AWS_REGION: record.region,
      AWS_ENDPOINT_URL_S3: endpoint,
    };
  }

  async attach(record: StoreRecord, deployment: string, bucket: string | undefined, prefix: string) {
    const target = bucket ?? record.bucket;
    const client = new ObjectStoreClient(record);
    try {
      if (!(await client.bucketExists(target))) await client.createBucket(target);
    } finally {
      client.destroy();
    }
    const env = this.envFor(record, target, prefix);
    await this.deps.deployments().setEnv(deployment, env, { recreate: true });
    if (record.managed) await this.connect(record, deployment);
    await this.deps.stores.update(record.name, (s) => {
      s.attachments = s.attachments.filter((a) => a.deployment !== deployment);
      s.attachments.push({ deployment, bucket: target, prefix, attached_at: new Date().toISOString() });
    });
    return { deployment, store: record.name, endpoint: env.S3_ENDPOINT!, bucket: target, env: Object.keys(env) };
  }

  /** Puts every container of a deployment on the managed store's network (again after a recreate). */
  async connect(record: StoreRecord, deployment: string): Promise<void> {
    if (!record.managed) return;
    const docker = this.deps.docker();
    const containers = await docker.listContainers({ all: false, deployment });
    for (const c of containers) {
      if (c.networks[record.managed.network]) continue;
      try {
        await docker.networks.connect(record.managed.network, c.id);
      } catch (err) {
        this.deps.log.warn('could not connect a container to the store network', {
          container: c.name,
          network: record.managed.network,
          error: (err as Error).message,
        });
      }
    }
  }

  /** After a deployment (re)starts, reconnects it to the managed stores it is attached to. */
  async reconnect(deployment: string): Promise<void> {
    for (const s of this.deps.stores.list()) {
      if (s.managed && s.attachments.some((a) => a.deployment === deployment)) await this.connect(s, deployment);
    }
  }
}
