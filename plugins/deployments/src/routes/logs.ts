/** Logs of a deployment: read back (HTTP) and followed (websocket). */
import { join } from 'node:path';
import { mergeErrors, Type, type PluginContext } from '@agent/sdk';
import { ENGINE_ERRORS } from '@agent/plugin-docker/api';
import type { DeploymentManager } from '../manager.js';
import { NameParams } from '../schemas.js';
import { containerLogs, type ContainersOf, type DeploymentLogLine } from '../logs.js';
import { fileSource, sourceOpener, SOURCE_ID, type KindSources } from '../log-sources.js';
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

/** Returns the followers of the websocket streams (shared upstreams: stats for the doctor, closed when the plugin stops). */
export function logRoutes(ctx: PluginContext<any>, manager: DeploymentManager, kinds: KindSources, containersOf: ContainersOf): LogFollowers {
  const docker = manager.opts.docker;
  const followers = new LogFollowers(docker, ctx.log);

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
    // Container output from the engine; a file source outside the folder, or not there (yet).
    errors: mergeErrors(ENGINE_ERRORS, { 400: ['INVALID_PATH'], 404: ['LOG_FILE_MISSING'] }),
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      const tail = req.query.tail ?? 100;
      const file = fileSource(entry, kinds, req.query.source ?? 'stdout');
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
      const file = fileSource(entry, kinds, req.query.source ?? 'stdout');
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

  return followers;
}
