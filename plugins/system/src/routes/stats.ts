/** `GET /api/stats` (a read, filtered: each principal counts what it reaches). */
import type { PluginContext } from '@agent/sdk';
import { CpuSampler } from '../host-metrics.js';
import { StatsView, systemStats, type StatsServices } from '../stats.js';

export function statsRoutes(ctx: PluginContext, services: StatsServices): void {
  const sampler = new CpuSampler();
  ctx.route({
    method: 'GET',
    path: '/stats',
    permission: 'stats:read',
    tag: 'system',
    operationId: 'system.stats',
    tenancy: 'filtered',
    summary: 'System statistics: host CPU, memory, disk, load, uptime; deployments by status; containers, images, volumes; agent version and memory',
    response: StatsView,
    handler: (req) => systemStats(ctx.agent.dataDir, ctx.agent.version, sampler, services, req.principal),
  });
}
