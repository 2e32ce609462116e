/**
 * The collector: every `sample_interval`, one list call for the running containers, then one-shot stats for each
 * (a bounded number in flight, no engine-side 1-second wait), plus the host from /proc. Rates come from the
 * difference with the previous sample of the same container. Readings are kept in memory (latest) and written to
 * the series store; requests never reach the engine.
 */
import type { Logger } from './log.js';
import { DockerClient, healthFromStatus, type EngineContainer, type EngineStats } from './docker.js';
import type { HostSampler } from './host-metrics.js';
import type { SeriesStore } from './series-store.js';

export type Health = 'healthy' | 'unhealthy' | 'starting' | 'none';

export interface ContainerInfo {
  id: string;
  name: string;
  deployment: string | null;
  service: string | null;
  state: string;
  health: Health;
  labels: Record<string, string>;
}

export interface ContainerReading {
  info: ContainerInfo;
  metrics: Record<string, number>;
  updated: number;
}

interface Previous {
  at: number;
  cpu: number;
  rx: number;
  tx: number;
}

const PROJECT_LABEL = 'com.docker.compose.project';
const SERVICE_LABEL = 'com.docker.compose.service';

export function containerInfo(c: EngineContainer): ContainerInfo {
  const labels = c.Labels ?? {};
  return {
    id: c.Id,
    name: (c.Names[0] ?? c.Id.slice(0, 12)).replace(/^\//, ''),
    deployment: labels[PROJECT_LABEL] ?? null,
    service: labels[SERVICE_LABEL] ?? null,
    state: c.State,
    health: healthFromStatus(c.Status),
    labels,
  };
}

/** Memory in use as `docker stats` shows it: usage minus the inactive page cache. */
function memoryUsage(s: EngineStats): number | undefined {
  const m = s.memory_stats;
  if (!m || m.usage === undefined) return undefined;
  const st = m.stats ?? {};
  const cache = st.total_inactive_file ?? st.inactive_file ?? 0;
  return Math.max(0, m.usage - (cache < m.usage ? cache : 0));
}

async function mapLimit<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  });
  await Promise.all(workers);
}

export class Collector {
  /** Latest reading per container name (running containers only). */
  readonly latest = new Map<string, ContainerReading>();
  /** Every running container in scope, from the last list call. */
  containers: ContainerInfo[] = [];
  host: { metrics: Record<string, number>; updated: number } = { metrics: {}, updated: 0 };
  private readonly previous = new Map<string, Previous>();
  private running = false;
  lastTickMs = 0;

  constructor(
    private readonly docker: DockerClient,
    private readonly hostSampler: HostSampler,
    private readonly store: SeriesStore,
    private readonly options: () => { labels: Record<string, string>; concurrency: number },
    private readonly log: Logger,
  ) {}

  inScope(labels: Record<string, string>): boolean {
    return Object.entries(this.options().labels).every(([k, v]) => labels[k] === v);
  }

  /** Refreshes the container list only (after an engine event), without stats. */
  async refreshContainers(): Promise<ContainerInfo[]> {
    const list = await this.docker.listRunning();
    this.containers = list.map(containerInfo).filter((c) => this.inScope(c.labels));
    return this.containers;
  }

  /** One collection round. Overlapping rounds are skipped (a slow engine must not pile them up). */
  async tick(): Promise<boolean> {
    if (this.running) return false;
    this.running = true;
    const started = Date.now();
    try {
      const ts = Math.floor(started / 1000);
      const writes: { key: { container: string | null; deployment: string | null; metric: string }; value: number }[] = [];
      try {
        const host = await this.hostSampler.sample();
        this.host = { metrics: host, updated: started };
        for (const [metric, value] of Object.entries(host)) writes.push({ key: { container: null, deployment: null, metric }, value });
      } catch (err) {
        this.log.warn('host sample failed', { error: String(err) });
      }
      let containers: ContainerInfo[] = [];
      try {
        containers = await this.refreshContainers();
      } catch {
        // The engine is away: the round records the host only (the client reports the outage once, see main.ts).
      }
      const seen = new Set<string>();
      await mapLimit(containers, this.options().concurrency, async (info) => {
        seen.add(info.name);
        let s: EngineStats;
        try {
          s = await this.docker.stats(info.id);
        } catch {
          return; // stopped between the list and the stats call
        }
        const metrics = this.readingOf(info, s);
        this.latest.set(info.name, { info, metrics, updated: Date.now() });
        for (const [metric, value] of Object.entries(metrics)) writes.push({ key: { container: info.name, deployment: info.deployment, metric }, value });
      });
      for (const name of [...this.latest.keys()]) if (!seen.has(name)) this.latest.delete(name);
      for (const id of [...this.previous.keys()]) if (!containers.some((c) => c.id === id)) this.previous.delete(id);
      this.store.write(ts, writes);
      return true;
    } finally {
      this.lastTickMs = Date.now() - started;
      this.running = false;
    }
  }

  private readingOf(info: ContainerInfo, s: EngineStats): Record<string, number> {
    const at = Date.parse(s.read) || Date.now();
    const cpu = s.cpu_stats?.cpu_usage?.total_usage ?? 0;
    let rx = 0;
    let tx = 0;
    for (const n of Object.values(s.networks ?? {})) {
      rx += n.rx_bytes;
      tx += n.tx_bytes;
    }
    const out: Record<string, number> = {};
    const mem = memoryUsage(s);
    if (mem !== undefined) out['container.memory.usage'] = mem;
    if (s.memory_stats?.limit) out['container.memory.limit'] = s.memory_stats.limit;
    const prev = this.previous.get(info.id);
    if (prev && at > prev.at) {
      const seconds = (at - prev.at) / 1000;
      // total_usage is CPU nanoseconds: over wall-clock nanoseconds it gives CPUs in use.
      if (cpu >= prev.cpu) out['container.cpu.usage'] = (cpu - prev.cpu) / 1e9 / seconds;
      if (rx >= prev.rx) out['container.network.io.rx'] = (rx - prev.rx) / seconds;
      if (tx >= prev.tx) out['container.network.io.tx'] = (tx - prev.tx) / seconds;
    }
    this.previous.set(info.id, { at, cpu, rx, tx });
    return out;
  }
}
