/**
 * The metric catalogue shared by the observability app, alert rules and dashboards. Names follow the OpenTelemetry
 * semantic conventions; rates are per second; utilizations are ratios between 0 and 1.
 */

export interface MetricInfo {
  /** OpenTelemetry name, e.g. `container.cpu.usage`. */
  name: string;
  /** UCUM-style unit: `{cpu}`, `By`, `By/s`, `1` (ratio), `s`, `{request}/s`. */
  unit: string;
  description: string;
  /** Name in the Prometheus text exposition. */
  prometheus: string;
}

export const CONTAINER_METRICS = [
  { name: 'container.cpu.usage', unit: '{cpu}', description: 'CPU in use by the container, in CPUs (1 = one full core)', prometheus: 'container_cpu_usage' },
  {
    name: 'container.memory.usage',
    unit: 'By',
    description: 'memory in use by the container, without the page cache',
    prometheus: 'container_memory_usage_bytes',
  },
  {
    name: 'container.memory.limit',
    unit: 'By',
    description: 'memory limit of the container (the host memory when unlimited)',
    prometheus: 'container_memory_limit_bytes',
  },
  {
    name: 'container.network.io.rx',
    unit: 'By/s',
    description: 'bytes received per second, all interfaces',
    prometheus: 'container_network_io_rx_bytes_per_second',
  },
  {
    name: 'container.network.io.tx',
    unit: 'By/s',
    description: 'bytes sent per second, all interfaces',
    prometheus: 'container_network_io_tx_bytes_per_second',
  },
] as const satisfies readonly MetricInfo[];

export const HOST_METRICS = [
  { name: 'system.cpu.utilization', unit: '1', description: 'share of the host CPU time not idle (0..1)', prometheus: 'system_cpu_utilization_ratio' },
  {
    name: 'system.memory.utilization',
    unit: '1',
    description: 'share of the host memory in use, MemAvailable excluded (0..1)',
    prometheus: 'system_memory_utilization_ratio',
  },
  { name: 'system.memory.usage', unit: 'By', description: 'host memory in use (MemTotal - MemAvailable)', prometheus: 'system_memory_usage_bytes' },
  { name: 'system.disk.utilization', unit: '1', description: 'share of the data file system in use (0..1)', prometheus: 'system_disk_utilization_ratio' },
  {
    name: 'system.network.io.rx',
    unit: 'By/s',
    description: 'bytes received per second by the host, loopback excluded',
    prometheus: 'system_network_io_rx_bytes_per_second',
  },
  {
    name: 'system.network.io.tx',
    unit: 'By/s',
    description: 'bytes sent per second by the host, loopback excluded',
    prometheus: 'system_network_io_tx_bytes_per_second',
  },
] as const satisfies readonly MetricInfo[];

/** Series of the serving path (the reverse proxy in front of deployments). */
export const SERVING_METRICS = [
  { name: 'http.server.request.rate', unit: '{request}/s', description: 'requests served per second', prometheus: 'http_server_request_rate' },
  { name: 'http.server.error.rate', unit: '{request}/s', description: 'responses with status 5xx per second', prometheus: 'http_server_error_rate' },
  { name: 'http.server.request.duration', unit: 's', description: 'mean time to answer a request', prometheus: 'http_server_request_duration_seconds' },
  {
    name: 'http.server.response.body.size',
    unit: 'By/s',
    description: 'response bytes sent per second',
    prometheus: 'http_server_response_body_size_bytes_per_second',
  },
] as const satisfies readonly MetricInfo[];

export type ContainerMetricName = (typeof CONTAINER_METRICS)[number]['name'];
export type HostMetricName = (typeof HOST_METRICS)[number]['name'];
export type ServingMetricName = (typeof SERVING_METRICS)[number]['name'];
