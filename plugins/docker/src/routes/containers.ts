/**
 * 4.4 containers: list, start/stop/restart, delete (stopped only), logs. Tenancy: a container of a deployment is
 * reached with access to that deployment (read for logs, write for changes); a container of no deployment only by a
 * global principal; the list shows each principal only what it reaches.
 */
import { canReach, deploymentName, errors, reply, Type, type PluginContext, compareText } from '@agent/sdk';
import { type LogLine as LogLineType } from '../api.js';
import type { DockerEngine } from '../engine.js';
import { ContainerSummary, LogLine } from '../schemas.js';
import { assertCanReach } from '../access.js';

export const CONTAINER_ID = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$', description: 'container id (full or short) or name' });
const IdParams = Type.Object({ id: CONTAINER_ID });
const RUNNING_STATES = new Set(['running', 'restarting', 'paused']);

export function containerRoutes(ctx: PluginContext<any>, engine: DockerEngine): void {
  /** Inspects the container and checks the caller may act on it (another deployment's: the same 404 as unknown). */
  const target = async (id: string, principal: Parameters<typeof assertCanReach>[0], level: 'read' | 'write') => {
    const details = await engine.inspectContainer(id);
    assertCanReach(principal, details.deployment, `container '${id}'`, level);
    return details;
  };
  const summaryOf = async (id: string) => (await engine.listContainers({ all: true })).find((c) => c.id === id) ?? null;

  ctx.route({
    method: 'GET',
    path: '/containers',
    permission: 'containers:read',
    operationId: 'containers.list',
    tag: 'containers',
    summary: 'List containers',
    description:
      'Containers of the deployments the caller can access; those of no deployment only for a principal with global scope. ' +
      "With `deployment`, only that deployment's (404 when the caller has no access to it).",
    tenancy: 'filtered',
    deployment: (req) => req.query.deployment,
    query: Type.Object({
      all: Type.Optional(Type.Boolean({ default: true, description: 'include stopped containers' })),
      deployment: Type.Optional(deploymentName({ description: 'only this deployment' })),
    }),
    response: Type.Array(ContainerSummary),
    handler: async (req) => {
      const list = await engine.listContainers({ all: req.query.all ?? true, ...(req.query.deployment ? { deployment: req.query.deployment } : {}) });
      return list.filter((c) => canReach(req.principal, c.deployment)).sort((a, b) => compareText(a.name, b.name));
    },
  });

  for (const action of ['start', 'stop', 'restart'] as const) {
    ctx.route({
      method: 'POST',
      path: `/containers/:id/${action}`,
      permission: 'containers:write',
      operationId: `containers.${action}`,
      tag: 'containers',
      summary: `${action[0]!.toUpperCase()}${action.slice(1)} a container`,
      description: "Needs write access to the container's deployment; a container of no deployment needs global scope.",
      tenancy: 'filtered',
      params: IdParams,
      query:
        action === 'start'
          ? undefined
          : Type.Object({ timeout: Type.Optional(Type.Integer({ minimum: 0, maximum: 600, default: 10, description: 'seconds before SIGKILL' })) }),
      response: ContainerSummary,
      // A container of a deployment starts only as its deployment's checked model says (the compose guard).
      ...(action === 'stop' ? {} : { errors: { 400: ['HOST_SAFETY'], 409: ['CONTAINER_STALE'] } }),
      handler: async (req) => {
        const details = await target(req.params.id, req.principal, 'write');
        const timeout = (req.query as { timeout?: number }).timeout;
        if (action === 'start') await engine.startContainer(details.id);
        else if (action === 'stop') await engine.stopContainer(details.id, { timeout });
        else await engine.restartContainer(details.id, { timeout });
        const summary = await summaryOf(details.id);
        if (!summary) throw errors.notFound(`container '${req.params.id}' not found`);
        return reply.ok(summary, `container ${summary.name} ${action === 'stop' ? 'stopped' : `${action}ed`}`);
      },
    });
  }

  ctx.route({
    method: 'DELETE',
    path: '/containers/:id',
    permission: 'containers:write',
    operationId: 'containers.delete',
    tag: 'containers',
    summary: 'Remove a stopped container',
    description:
      "Refused with 409 `CONTAINER_RUNNING` while the container runs (stop it first). Needs write access to the container's deployment; a container of no deployment needs global scope.",
    tenancy: 'filtered',
    params: IdParams,
    query: Type.Object({ volumes: Type.Optional(Type.Boolean({ default: false, description: 'also remove its anonymous volumes' })) }),
    response: Type.Object({ id: Type.String(), name: Type.String(), deployment: Type.Union([Type.String(), Type.Null()]) }),
    errors: { 409: ['CONTAINER_RUNNING'] },
    handler: async (req) => {
      const details = await target(req.params.id, req.principal, 'write');
      if (RUNNING_STATES.has(details.state)) throw errors.conflict(`container '${details.name}' is ${details.state}: stop it first`, 'CONTAINER_RUNNING');
      await engine.removeContainer(details.id, { volumes: req.query.volumes ?? false });
      return reply.ok({ id: details.id, name: details.name, deployment: details.deployment }, `container ${details.name} removed`);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/containers/:id/logs',
    permission: 'containers:read',
    operationId: 'containers.logs',
    tag: 'containers',
    summary: 'Logs of a container',
    description: "Needs read access to the container's deployment; a container of no deployment needs global scope.",
    tenancy: 'filtered',
    params: IdParams,
    query: Type.Object({
      tail: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, default: 100, description: 'last lines; 0 = all' })),
      filter: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'keep only lines containing this text' })),
      timestamps: Type.Optional(Type.Boolean({ default: true })),
    }),
    response: Type.Array(LogLine),
    handler: async (req) => {
      const details = await target(req.params.id, req.principal, 'read');
      const tail = req.query.tail ?? 100;
      const filter = req.query.filter;
      const lines: LogLineType[] = [];
      // The engine cannot filter: with a filter every line is read (streamed), keeping only the last `tail` matches.
      for await (const line of engine.containerLogs(details.id, { tail: filter ? 0 : tail, timestamps: req.query.timestamps ?? true, signal: req.signal })) {
        if (filter && !line.text.includes(filter)) continue;
        lines.push(line);
        if (tail > 0 && lines.length > tail * 2) lines.splice(0, lines.length - tail);
      }
      return tail > 0 && lines.length > tail ? lines.slice(-tail) : lines;
    },
  });
}
