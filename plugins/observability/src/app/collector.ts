/**
 * The collector: every `sample_interval`, one list call for the running containers, then one-shot stats for each
 * (a bounded number in flight, no engine-side 1-second wait), plus the host from /proc. Rates come from the
 * difference with the previous sample of the same container. Readings are kept in memory (latest) and written to
 * the series store; requests never reach the engine.
 *
 * The engine is not trusted to answer whole: a container may stop or be removed between the list and its stats
 * call (it is then dropped from this round), a stats answer may lack parts (only the metrics it has are recorded,
 * and a rate only from two samples that both have its counter), and the engine may not answer at all (the round
 * records the host only and says so through `listFresh`, so that nobody acts on a container list of the past).
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

/** The counters of a container's last sample (undefined: that answer lacked the counter). */
interface Previous {
  at: number;
  cpu: number | undefined;
  rx: number | undefined;
  tx: number | undefined;
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

const finite = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** Memory in use as `docker stats` shows it: usage minus the inactive page cache. */
function memoryUsage(s: EngineStats): number | undefined {
  const m = s.memory_stats;
  const usage = finite(m?.usage);
  if (usage === undefined) return undefined;
  const st = m?.stats ?? {};
  const cache = finite(st.total_inactive_file) ?? finite(st.inactive_file) ?? 0;
  return Math.max(0, usage - (cache < usage ? cache : 0));
}

/** Bytes received and sent over every interface; undefined when the answer has no `networks`. */
function networkTotals(s: EngineStats): { rx: number; tx: number } | undefined {
  if (!s.networks || typeof s.networks !== 'object') return undefined;
  let rx = 0;
  let tx = 0;
  for (const n of Object.values(s.networks)) {
    rx += finite(n?.rx_bytes) ?? 0;
    tx += finite(n?.tx_bytes) ?? 0;
  }
  return { rx, tx };
}

/**
 * A rate from two readings of a counter. Both readings lack it: 0 (a container without a network interface has
 * no traffic, as before). Only one has it (a partial answer): no rate, rather than the whole counter as one step.
 * A counter that went down was reset (the container or the engine restarted): no rate either.
 */
function rate(now: number | undefined, before: number | undefined, seconds: number): number | undefined {
  if (now === undefined && before === undefined) return 0;
  if (now === undefined || before === undefined || now < before) return undefined;
  return (now - before) / seconds;
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
  /** Every running container in scope, from the last list call (less those found stopped since). */
  containers: ContainerInfo[] = [];
  /** Whether the last round (or event) got a container list from the engine; false: `containers` is of the past. */
  listFresh = false;
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

  /** Refreshes the container list only (after an engine event), without stats. Throws when the engine gives none. */
  async refreshContainers(): Promise<ContainerInfo[]> {
    const list = await this.docker.listRunning();
    this.containers = list.map(containerInfo).filter((c) => this.inScope(c.labels));
    this.listFresh = true;
    return this.containers;
  }

  /**
   * One collection round (false: skipped, another one is still running: a slow engine must not pile them up).
   * Never throws for the engine's sake: what it did not answer is missing from the round, and the state of the
   * engine is reported once by the client (see main.ts).
   */
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
        // The engine is away or gave no usable list: the round records the host only. `containers` keeps the last
        // list (alerts do not resolve for containers the engine merely did not list while it restarts), but it is
        // marked stale so that the health watcher does not restart anything on its word.
        this.listFresh = false;
      }
      const seen = new Set<string>();
      const gone = new Set<string>();
      await mapLimit(containers, this.options().concurrency, async (info) => {
        seen.add(info.name);
        let metrics: Record<string, number>;
        try {
          const answer = await this.docker.stats(info.id);
          if (answer.gone) {
            // Stopped or removed since the list call: not running any more, so no reading and no rate base.
            gone.add(info.id);
            return;
          }
          metrics = this.readingOf(info, answer.stats);
        } catch {
          // The engine did not answer for this container in time (or answered an error): the last reading stays
          // until a later round reads it again or the list no longer has it.
          return;
        }
        this.latest.set(info.name, { info, metrics, updated: Date.now() });
        for (const [metric, value] of Object.entries(metrics)) writes.push({ key: { container: info.name, deployment: info.deployment, metric }, value });
      });
      for (const [name, reading] of this.latest) if (!seen.has(name) || gone.has(reading.info.id)) this.latest.delete(name);
      const listed = new Set(containers.map((c) => c.id));
      for (const id of [...this.previous.keys()]) if (!listed.has(id) || gone.has(id)) this.previous.delete(id);
      if (gone.size > 0) this.containers = this.containers.filter((c) => !gone.has(c.id));
      this.store.write(ts, writes);
      return true;
    } finally {
      this.lastTickMs = Date.now() - started;
      this.running = false;
    }
  }

  private readingOf(info: ContainerInfo, s: EngineStats): Record<string, number> {
    const at = Date.parse(s.read) || Date.now();
    const cpu = finite(s.cpu_stats?.cpu_usage?.total_usage);
    const net = networkTotals(s);
    const out: Record<string, number> = {};
    const mem = memoryUsage(s);
    if (mem !== undefined) out['container.memory.usage'] = mem;
    const limit = finite(s.memory_stats?.limit);
    if (limit) out['container.memory.limit'] = limit;
    const prev = this.previous.get(info.id);
    if (prev && at > prev.at) {
      const seconds = (at - prev.at) / 1000;
      // total_usage is CPU nanoseconds: over wall-clock nanoseconds it gives CPUs in use.
      if (cpu !== undefined && prev.cpu !== undefined && cpu >= prev.cpu) out['container.cpu.usage'] = (cpu - prev.cpu) / 1e9 / seconds;
      const rx = rate(net?.rx, prev.rx, seconds);
      const tx = rate(net?.tx, prev.tx, seconds);
      if (rx !== undefined) out['container.network.io.rx'] = rx;
      if (tx !== undefined) out['container.network.io.tx'] = tx;
    }
    this.previous.set(info.id, { at, cpu, rx: net?.rx, tx: net?.tx });
    return out;
  }
}
