/** Logs (HTTP and websocket follow), log sources and resource statistics of a deployment. */
import { join } from 'node:path';
import { errors, Type, type PluginContext } from '@agent/sdk';
import { type ContainerSummary } from '@agent/plugin-docker/api';
import type { DeploymentManager, Entry } from '../manager.js';
import { NameParams } from '../schemas.js';
import type { LogSourceSpec } from '../files.js';
import { assertService, containerLogs, pickContainers, type DeploymentLogLine } from '../logs.js';
import { CONTAINER_SOURCE, sourceOpener, SOURCE_ID, validateCustomSources, type LogSourceView } from '../log-sources.js';
import { readLastLines } from '../file-tail.js';
import { LogFollowers, WS_HISTORY_MAX_LINES } from '../log-follow.js';
import { SLOW_FOLLOWER_CLOSE } from '../log-follower.js';

const LogQuery = {
  tail: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, default: 100, description: 'number of lines; 0 = all' })),
  service: Type.Optional(Type.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$', description: 'one compose service; all when omitted' })),
  source: Type.Optional(Type.String({ pattern: SOURCE_ID, default: 'stdout', description: '`stdout` for container output, or the id of a file source' })),
  filter: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'keep only lines containing this text' })),
};

const LogLineSchema = Type.Object({
  service: Type.Union([Type.String(), Type.Null()]),
  container: Type.Union([Type.String(), Type.Null()]),
  stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('file')]),
  time: Type.Union([Type.String(), Type.Null()]),
  text: Type.String(),
});

const SourceSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: Type.Union([Type.Literal('container'), Type.Literal('file')]),
  path: Type.Union([Type.String(), Type.Null()]),
  format: Type.Union([Type.String(), Type.Null()]),
  builtin: Type.Boolean(),
});

export interface KindSources {
  /** Built-in file sources of the deployment's kind. */
  builtin(entry: Entry): LogSourceSpec[];
}

/** Returns the followers of the websocket streams (shared upstreams: stats for the doctor, closed when the plugin stops). */
export function logRoutes(ctx: PluginContext<any>, manager: DeploymentManager, kinds: KindSources): LogFollowers {
  const docker = manager.opts.docker;
  const followers = new LogFollowers(docker, ctx.log);

  const sources = (entry: Entry): LogSourceView[] => [
    CONTAINER_SOURCE,
    ...kinds.builtin(entry).map((s) => ({ id: s.id, name: s.name, type: 'file' as const, path: s.path, format: s.format ?? null, builtin: true })),
    ...entry.record.log_sources.map((s) => ({ id: s.id, name: s.name, type: 'file' as const, path: s.path, format: s.format ?? null, builtin: false })),
  ];
  const fileSource = (entry: Entry, id: string): LogSourceView | null => {
    if (id === 'stdout') return null;
    const found = sources(entry).find((s) => s.id === id);
    if (!found) throw errors.notFound(`log source '${id}' not found (see GET /api/deployments/${entry.name}/log-sources)`);
    return found;
  };
  // Followers joining at once (a console reopened by many people, a reconnect storm) share one engine listing: a
  // caller that arrives while one is in flight takes its answer instead of asking the engine again.
  const listings = new Map<string, Promise<ContainerSummary[]>>();
  const listContainers = (deployment: string): Promise<ContainerSummary[]> => {
    let listing = listings.get(deployment);
    if (!listing) {
      listing = docker.listContainers({ all: true, deployment }).finally(() => listings.delete(deployment));
      listings.set(deployment, listing);
    }
    return listing;
  };
  const containersOf = async (entry: Entry, service: string | undefined, running: boolean): Promise<ContainerSummary[]> => {
    docker.assertAvailable();
    const all = await listContainers(entry.name);
    assertService(entry.services, all, service);
    return pickContainers(all, service, running);
  };

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/logs',
    permission: 'deployments:read',
    operationId: 'deployments.logs',
    tag: 'deployments',
    summary: 'Logs of a deployment',
    description:
      'Container output of every service (merged by time) or of one `service`, or a file `source`. The last `tail` lines (default 100, 0 = all) that contain `filter`.',
    params: NameParams,
    deployment: 'name',
    query: Type.Object(LogQuery),
    response: Type.Array(LogLineSchema),
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      const tail = req.query.tail ?? 100;
      const file = fileSource(entry, req.query.source ?? 'stdout');
      if (file) {
        const lines = await readLastLines(await sourceOpener(entry.dir, file.path!), tail, req.query.filter);
        return lines.map((text): DeploymentLogLine => ({ service: null, container: null, stream: 'file', time: null, text }));
      }
      const containers = await containersOf(entry, req.query.service, false);
      return containerLogs(docker, containers, tail, req.query.filter);
    },
  });

  ctx.websocket({
    path: '/deployments/:name/logs/stream',
    permission: 'deployments:read',
    operationId: 'deployments.logsStream',
    tag: 'deployments',
    summary: 'Follow the logs of a deployment (websocket)',
    description:
      'Send the token as the first message; the server answers `{"type":"ready"}`, then the last `tail` lines and every new line as `{"type":"line", service, container, stream, time, text}`. ' +
      `The history is capped at ${WS_HISTORY_MAX_LINES} lines (also for \`tail=0\`); use GET /logs for more. ` +
      'Container streams end with `{"type":"end"}` and a normal close when the containers stop; file sources are followed until the client leaves. ' +
      `A client that reads too slowly (more than 1 MiB of lines waiting for it) is closed with code ${SLOW_FOLLOWER_CLOSE}.`,
    params: NameParams,
    deployment: 'name',
    query: Type.Object(LogQuery),
    handler: async (conn, req) => {
      const entry = manager.require(req.params.name);
      const tail = req.query.tail ?? 100;
      const filter = req.query.filter;
      const file = fileSource(entry, req.query.source ?? 'stdout');
      // The permission and deployment checks ran before this handler; what a follower gets from a shared upstream is
      // that deployment's lines, narrowed by its own filter only.
      if (file) {
        const open = await sourceOpener(entry.dir, file.path!);
        await followers.followFile(conn, join(entry.dir, file.path!), open, tail, filter);
        return;
      }
      const containers = await containersOf(entry, req.query.service, true);
      if (containers.length === 0) {
        await conn.send({ type: 'end', reason: 'no running container' });
        conn.close(1000, 'end of logs');
        return;
      }
      await followers.followContainers(conn, entry.name, containers, tail, filter);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/log-sources',
    permission: 'deployments:read',
    operationId: 'deployments.logSources',
    tag: 'deployments',
    summary: 'Log sources: container output, built-in file sources of the deployment kind, custom ones',
    params: NameParams,
    deployment: 'name',
    response: Type.Array(SourceSchema),
    handler: (req) => sources(manager.require(req.params.name)),
  });

  ctx.route({
    method: 'PUT',
    path: '/deployments/:name/log-sources',
    permission: 'deployments:write',
    operationId: 'deployments.setLogSources',
    tag: 'deployments',
    summary: 'Replace the custom file log sources',
    description: 'Paths are relative to the deployment folder; absolute paths and `..` are refused (400 `INVALID_PATH`). The files need not exist yet.',
    params: NameParams,
    deployment: 'name',
    body: Type.Object({
      sources: Type.Array(
        Type.Object({
          id: Type.String({ pattern: SOURCE_ID }),
          name: Type.String({ minLength: 1, maxLength: 100 }),
          path: Type.String({ minLength: 1, maxLength: 1024, description: 'file path relative to the deployment folder' }),
          format: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,31}$', description: 'e.g. text, json, nginx' })),
        }),
        { maxItems: 50 },
      ),
    }),
    response: Type.Array(SourceSchema),
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      const custom = req.body.sources.map((s) => ({ id: s.id, name: s.name, path: s.path, ...(s.format ? { format: s.format } : {}) }));
      validateCustomSources(custom, new Set(kinds.builtin(entry).map((s) => s.id)));
      await manager.saveRecord(entry, { log_sources: custom });
      return sources(entry);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/stats',
    permission: 'deployments:read',
    operationId: 'deployments.stats',
    tag: 'deployments',
    summary: 'Resource usage of every running container of the deployment',
    description: 'One-shot engine statistics, fetched in parallel: CPU %, memory usage/limit/%, network rx/tx bytes, block I/O bytes, pids.',
    params: NameParams,
    deployment: 'name',
    response: Type.Array(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        deployment: Type.Union([Type.String(), Type.Null()]),
        service: Type.Union([Type.String(), Type.Null()]),
        cpu_percent: Type.Number(),
        memory_usage: Type.Integer(),
        memory_limit: Type.Integer(),
        memory_percent: Type.Number(),
        network_rx: Type.Integer(),
        network_tx: Type.Integer(),
        block_read: Type.Integer(),
        block_write: Type.Integer(),
        pids: Type.Integer(),
        read_at: Type.String(),
      }),
    ),
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      const running = await containersOf(entry, undefined, true);
      const stats = await Promise.all(
        running.map((c) =>
          docker.stats(c.id).catch((err) => {
            // A container that stopped meanwhile has no statistics: leave it out.
            if ((err as { status?: number }).status === 404 || (err as { status?: number }).status === 409) return null;
            throw err;
          }),
        ),
      );
      return stats.filter((s) => s !== null);
    },
  });
  return followers;
}
