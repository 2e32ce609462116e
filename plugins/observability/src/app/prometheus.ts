/**
 * The latest readings in the Prometheus text exposition format (version 0.0.4), each sample with the time it was
 * read. Written here rather than by prom-client (bench/libraries): prom-client has no sample timestamps, costs
 * ≈11 MB of RSS in the app when loaded and 3× the CPU a scrape (a registry per scrape: what a scrape shows depends
 * on the principal).
 */
import { CONTAINER_METRICS, HOST_METRICS } from '../metrics.js';
import type { ContainerReading } from './collector.js';

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
const num = (v: number) => (Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v));

export function exposition(readings: ContainerReading[], host: { metrics: Record<string, number>; updated: number }): string {
  const out: string[] = [];
  for (const m of CONTAINER_METRICS) {
    const rows = readings.filter((r) => r.metrics[m.name] !== undefined);
    out.push(`# HELP ${m.prometheus} ${escapeHelp(`${m.description} (${m.name})`)}`, `# TYPE ${m.prometheus} gauge`);
    for (const r of rows) {
      const labels = [`container="${escapeLabel(r.info.name)}"`, `deployment="${escapeLabel(r.info.deployment ?? '')}"`];
      if (r.info.service) labels.push(`service="${escapeLabel(r.info.service)}"`);
      out.push(`${m.prometheus}{${labels.join(',')}} ${num(r.metrics[m.name]!)} ${r.updated}`);
    }
  }
  for (const m of HOST_METRICS) {
    const v = host.metrics[m.name];
    if (v === undefined) continue;
    out.push(
      `# HELP ${m.prometheus} ${escapeHelp(`${m.description} (${m.name})`)}`,
      `# TYPE ${m.prometheus} gauge`,
      `${m.prometheus} ${num(v)} ${host.updated}`,
    );
  }
  return `${out.join('\n')}\n`;
}
