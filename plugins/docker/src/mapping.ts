/** Engine payloads → the shapes of the `docker` service contract. */
import type { ContainerDetails, ContainerHealth, ContainerPort, ContainerStats, ContainerSummary } from './api.js';
import type Docker from 'dockerode';

export const PROJECT_LABEL = 'com.docker.compose.project';
export const SERVICE_LABEL = 'com.docker.compose.service';

const isoOrNull = (value: string | undefined | null): string | null => (!value || value.startsWith('0001-01-01') ? null : value);

export function healthFromStatus(status: string): ContainerHealth {
  if (status.includes('(unhealthy)')) return 'unhealthy';
  if (status.includes('(healthy)')) return 'healthy';
  if (status.includes('health: starting')) return 'starting';
  return 'none';
}

const healthFromState = (status: string | undefined): ContainerHealth =>
  status === 'healthy' || status === 'unhealthy' || status === 'starting' ? status : 'none';

export function summaryFromList(c: Docker.ContainerInfo): ContainerSummary {
  const labels = c.Labels ?? {};
  const networks: Record<string, string> = {};
  for (const [name, net] of Object.entries(c.NetworkSettings?.Networks ?? {})) networks[name] = net.IPAddress ?? '';
  const ports: ContainerPort[] = (c.Ports ?? []).map((p) => ({
    private: p.PrivatePort,
    public: p.PublicPort ?? null,
    ip: p.IP ?? null,
    protocol: p.Type,
  }));
  return {
    id: c.Id,
    name: (c.Names?.[0] ?? c.Id).replace(/^\//, ''),
    image: c.Image,
    state: c.State,
    status: c.Status,
    health: healthFromStatus(c.Status ?? ''),
    created_at: new Date(c.Created * 1000).toISOString(),
    labels,
    deployment: labels[PROJECT_LABEL] ?? null,
    service: labels[SERVICE_LABEL] ?? null,
    ports,
    networks,
  };
}

function portsFromInspect(ports: Record<string, { HostIp: string; HostPort: string }[] | null> | undefined): ContainerPort[] {
  const out: ContainerPort[] = [];
  for (const [key, bindings] of Object.entries(ports ?? {})) {
    const [port, protocol] = key.split('/');
    if (!bindings || bindings.length === 0) out.push({ private: Number(port), public: null, ip: null, protocol: protocol ?? 'tcp' });
    else for (const b of bindings) out.push({ private: Number(port), public: Number(b.HostPort) || null, ip: b.HostIp || null, protocol: protocol ?? 'tcp' });
  }
  return out;
}

function humanStatus(state: Docker.ContainerInspectInfo['State']): string {
  const health = state.Health?.Status;
  if (state.Running) return `Up since ${state.StartedAt}${health ? ` (${health === 'starting' ? 'health: starting' : health})` : ''}`;
  if (state.Status === 'created') return 'Created';
  return `Exited (${state.ExitCode})${isoOrNull(state.FinishedAt) ? ` at ${state.FinishedAt}` : ''}`;
}

export function detailsFromInspect(i: Docker.ContainerInspectInfo): ContainerDetails {
  const labels = i.Config?.Labels ?? {};
  const networks: Record<string, string> = {};
  for (const [name, net] of Object.entries(i.NetworkSettings?.Networks ?? {})) networks[name] = net.IPAddress ?? '';
  return {
    id: i.Id,
    name: i.Name.replace(/^\//, ''),
    image: i.Config?.Image ?? i.Image,
    state: i.State.Status,
    status: humanStatus(i.State),
    health: healthFromState(i.State.Health?.Status),
    created_at: i.Created,
    labels,
    deployment: labels[PROJECT_LABEL] ?? null,
    service: labels[SERVICE_LABEL] ?? null,
    ports: portsFromInspect(i.NetworkSettings?.Ports as never),
    networks,
    env: i.Config?.Env ?? [],
    cmd: i.Config?.Cmd ?? [],
    started_at: isoOrNull(i.State.StartedAt),
    finished_at: isoOrNull(i.State.FinishedAt),
    exit_code: i.State.Running ? null : (i.State.ExitCode ?? null),
    restart_count: i.RestartCount ?? 0,
    mounts: (i.Mounts ?? []).map((m) => ({
      type: m.Type ?? 'bind',
      source: m.Source ?? (m as { Name?: string }).Name ?? '',
      destination: m.Destination,
      rw: m.RW,
    })),
    has_healthcheck: Boolean(i.Config?.Healthcheck?.Test?.length && i.Config.Healthcheck.Test[0] !== 'NONE'),
  };
}

interface RawStats {
  read: string;
  cpu_stats: { cpu_usage: { total_usage: number; percpu_usage?: number[] }; system_cpu_usage?: number; online_cpus?: number };
  precpu_stats: { cpu_usage: { total_usage: number }; system_cpu_usage?: number };
  memory_stats: { usage?: number; limit?: number; stats?: Record<string, number> };
  networks?: Record<string, { rx_bytes: number; tx_bytes: number }>;
  blkio_stats?: { io_service_bytes_recursive?: { op: string; value: number }[] | null };
  pids_stats?: { current?: number };
}

export function statsFrom(summary: Pick<ContainerSummary, 'id' | 'name' | 'deployment' | 'service'>, raw: RawStats): ContainerStats {
  const cpuDelta = raw.cpu_stats.cpu_usage.total_usage - (raw.precpu_stats?.cpu_usage?.total_usage ?? 0);
  const systemDelta = (raw.cpu_stats.system_cpu_usage ?? 0) - (raw.precpu_stats?.system_cpu_usage ?? 0);
  const cpus = raw.cpu_stats.online_cpus ?? raw.cpu_stats.cpu_usage.percpu_usage?.length ?? 1;
  const cpu = systemDelta > 0 && cpuDelta > 0 && raw.precpu_stats?.system_cpu_usage ? (cpuDelta / systemDelta) * cpus * 100 : 0;
  // Page cache is not memory the container needs: subtract it like `docker stats` does (cgroup v1 and v2 keys).
  const inner = raw.memory_stats.stats ?? {};
  const cache = inner.total_inactive_file ?? inner.inactive_file ?? inner.cache ?? 0;
  const usage = Math.max(0, (raw.memory_stats.usage ?? 0) - cache);
  const limit = raw.memory_stats.limit ?? 0;
  let rx = 0;
  let tx = 0;
  for (const n of Object.values(raw.networks ?? {})) {
    rx += n.rx_bytes;
    tx += n.tx_bytes;
  }
  let read = 0;
  let write = 0;
  for (const entry of raw.blkio_stats?.io_service_bytes_recursive ?? []) {
    const op = entry.op.toLowerCase();
    if (op === 'read') read += entry.value;
    else if (op === 'write') write += entry.value;
  }
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    id: summary.id,
    name: summary.name,
    deployment: summary.deployment,
    service: summary.service,
    cpu_percent: round(cpu),
    memory_usage: usage,
    memory_limit: limit,
    memory_percent: limit > 0 ? round((usage / limit) * 100) : 0,
    network_rx: rx,
    network_tx: tx,
    block_read: read,
    block_write: write,
    pids: raw.pids_stats?.current ?? 0,
    read_at: raw.read,
  };
}
