/**
 * The figures of `GET /api/stats`: host, deployments, Docker objects and the agent process. The deployment and
 * Docker parts come from the optional `deployments` and `docker` services and are null when those are absent.
 * Filtered: everyone counts the deployments (and their containers) it can access; containers of no deployment and
 * the image count (global objects) only for principals with global scope. Host and agent figures are for everyone.
 */
import { isHttpError, Nullable, Type, type Principal, type Static } from '@agent/sdk';
import { type DeploymentsService } from '@agent/plugin-deployments/api';
import { type DockerService } from '@agent/plugin-docker/api';
import { type CpuSampler, hostMetrics } from './host-metrics.js';

export interface StatsServices {
  docker(): DockerService | undefined;
  deployments(): DeploymentsService | undefined;
}

const Num = Type.Number();
const Int = Type.Integer({ minimum: 0 });

export const StatsView = Type.Object({
  host: Type.Object({
    hostname: Type.String(),
    platform: Type.String(),
    arch: Type.String(),
    kernel: Type.String(),
    uptime_seconds: Int,
    load: Type.Object({ '1m': Num, '5m': Num, '15m': Num }),
    cpu: Type.Object({ count: Int, model: Type.String(), usage_percent: Num }),
    memory: Type.Object({ total_bytes: Int, available_bytes: Int, used_bytes: Int, usage_percent: Num }),
    disk: Type.Object({ path: Type.String(), total_bytes: Int, free_bytes: Int, used_bytes: Int, usage_percent: Num }),
  }),
  deployments: Nullable(Type.Object({ total: Int, by_status: Type.Record(Type.String(), Int) }, { description: 'null without the deployments plugin' })),
  docker: Nullable(
    Type.Object(
      {
        available: Type.Boolean(),
        version: Nullable(Type.String()),
        containers: Nullable(Type.Object({ total: Int, running: Int, stopped: Int })),
        images: Nullable(Type.Integer({ minimum: 0, description: 'null for a principal limited to its deployments (images are global)' })),
        volumes: Nullable(
          Type.Integer({ minimum: 0, description: 'null when the docker service does not report it, and for a principal limited to its deployments' }),
        ),
      },
      { description: 'null without the docker plugin' },
    ),
  ),
  agent: Type.Object({
    version: Type.String(),
    pid: Int,
    node_version: Type.String(),
    uptime_seconds: Int,
    rss_bytes: Int,
    heap_used_bytes: Int,
  }),
});

async function dockerFigures(docker: DockerService, principal: Principal) {
  if (!docker.available()) return { available: false, version: null, containers: null, images: null, volumes: null };
  try {
    const [info, containers] = await Promise.all([docker.info(), docker.listContainers({ all: true })]);
    // Containers outside deployments are global: only global principals count them; everyone counts its deployments'.
    const visible = containers.filter((c) => (c.deployment === null ? principal.isGlobal : principal.canAccessDeployment(c.deployment)));
    const running = visible.filter((c) => c.state === 'running').length;
    const volumes = (info as { volumes?: unknown }).volumes;
    return {
      available: true,
      version: info.version,
      containers: { total: visible.length, running, stopped: visible.length - running },
      images: principal.isGlobal ? info.images : null,
      volumes: principal.isGlobal && typeof volumes === 'number' ? volumes : null,
    };
  } catch (err) {
    if (isHttpError(err) && err.status === 503) return { available: false, version: null, containers: null, images: null, volumes: null };
    throw err;
  }
}

/** The figures of `GET /api/stats` as the principal may see them. */
export async function systemStats(
  dataDir: string,
  version: string,
  sampler: CpuSampler,
  services: StatsServices,
  principal: Principal,
): Promise<Static<typeof StatsView>> {
  const deployments = services.deployments();
  const docker = services.docker();
  let deploymentCounts: { total: number; by_status: Record<string, number> } | null = null;
  if (deployments) {
    const list = deployments.list().filter((d) => principal.canAccessDeployment(d.name));
    const byStatus: Record<string, number> = {};
    for (const d of list) byStatus[d.status] = (byStatus[d.status] ?? 0) + 1;
    deploymentCounts = { total: list.length, by_status: byStatus };
  }
  const mem = process.memoryUsage();
  return {
    host: await hostMetrics(sampler, dataDir),
    deployments: deploymentCounts,
    docker: docker ? await dockerFigures(docker, principal) : null,
    agent: {
      version,
      pid: process.pid,
      node_version: process.version,
      uptime_seconds: Math.round(process.uptime()),
      rss_bytes: mem.rss,
      heap_used_bytes: mem.heapUsed,
    },
  };
}
