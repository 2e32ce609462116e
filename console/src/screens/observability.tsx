/** Observability (the app at /api/plugin/observability): host and deployment charts, alert rules, firing, health. */
import { useMemo, useState } from 'preact/hooks';
import { get } from '../api.js';
import { Chart } from '../chart.js';
import { ActionForm, Badge, fmtTime, Loading, Section, Table, useLoad, useSession } from '../ui.js';
import { MetricCharts } from './deployment.js';

const BASE = '/plugin/observability';

export function Observability() {
  const session = useSession();
  const host = useLoad(() => get<any>(`${BASE}/metrics/host`), [], 15_000);
  const deployments = useLoad(() => get<any[]>('/deployments'), []);
  const [deployment, setDeployment] = useState('');
  const series = useLoad(
    () => (deployment ? get<any>(`${BASE}/metrics/timeseries`, { deployment, since: '1h' }) : Promise.resolve(null)),
    [deployment],
    30_000,
  );
  const rules = useLoad(() => get<any[]>(`${BASE}/alerts/rules`), []);
  const firing = useLoad(() => get<any[]>(`${BASE}/alerts/firing`), [], 15_000);
  const health = useLoad(() => get<any[]>(`${BASE}/health`), [], 15_000);
  const hostCharts = useMemo(() => {
    const d = host.data;
    if (!d?.timestamps?.length) return [];
    const x = d.timestamps.map((t: number) => t / 1000);
    const of = (metric: string, scale = 1) =>
      (d.series.find((s: any) => s.metric === metric)?.values ?? []).map((v: number | null) => (v === null ? null : v * scale));
    return [
      { title: 'Host CPU', unit: ' %', x, series: [{ label: 'cpu', values: of('system.cpu.utilization', 100) }] },
      { title: 'Host memory', unit: ' %', x, series: [{ label: 'memory', values: of('system.memory.utilization', 100) }] },
      {
        title: 'Host network',
        unit: ' B/s',
        x,
        series: [
          { label: 'rx', values: of('system.network.io.rx') },
          { label: 'tx', values: of('system.network.io.tx') },
        ],
      },
    ];
  }, [host.data]);
  return (
    <>
      <h1>Observability</h1>
      <Section title="Host">
        <Loading load={host}>
          {() => <div class="charts">{hostCharts.length ? hostCharts.map((c) => <Chart {...c} />) : <p class="muted">No sample yet.</p>}</div>}
        </Loading>
      </Section>
      <Section
        title="Deployment metrics"
        actions={
          <>
            <label for="obs-deployment">Deployment</label>
            <select id="obs-deployment" value={deployment} onChange={(e) => setDeployment((e.target as HTMLSelectElement).value)}>
              <option value="">choose…</option>
              {(deployments.data ?? []).map((d) => (
                <option value={d.name}>{d.name}</option>
              ))}
            </select>
          </>
        }
      >
        {deployment ? <MetricCharts data={series.data} /> : <p class="muted">Choose a deployment.</p>}
      </Section>
      <Section title="Firing">
        <Loading load={firing}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No alert is firing."
              columns={[
                { label: 'Rule', value: (a) => a.rule_name ?? a.rule_id },
                { label: 'Container', value: (a) => a.container ?? 'host' },
                { label: 'State', value: (a) => <Badge value={a.state ?? a.status} /> },
                { label: 'Since', value: (a) => fmtTime(a.since ?? a.started_at) },
              ]}
            />
          )}
        </Loading>
      </Section>
      <Section
        title="Alert rules"
        actions={
          session.can('PUT', `${BASE}/alerts/rules`) ? (
            <ActionForm
              method="PUT"
              template={`${BASE}/alerts/rules`}
              path={`${BASE}/alerts/rules`}
              label="Edit the rules"
              initial={{ body: rules.data ?? [] }}
              onDone={rules.reload}
            />
          ) : null
        }
      >
        <Loading load={rules}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No alert rule."
              columns={[
                { label: 'Rule', value: (r) => r.name },
                { label: 'Metric', value: (r) => <code>{r.metric}</code> },
                { label: 'Condition', value: (r) => `${r.operator ?? r.condition ?? ''} ${r.threshold ?? ''}` },
                { label: 'Deployment', value: (r) => r.deployment ?? 'all' },
                { label: 'Enabled', value: (r) => <Badge value={r.enabled !== false} /> },
              ]}
            />
          )}
        </Loading>
      </Section>
      <Section title="Container health">
        <Loading load={health}>
          {(rows) => (
            <Table
              rows={rows}
              columns={[
                { label: 'Container', value: (h) => h.container },
                { label: 'Deployment', value: (h) => h.deployment ?? '—' },
                { label: 'State', value: (h) => <Badge value={h.state} /> },
                { label: 'Health', value: (h) => <Badge value={h.status} /> },
                { label: 'Restarts by the watcher', value: (h) => String(h.restarts_by_watcher) },
              ]}
            />
          )}
        </Loading>
      </Section>
    </>
  );
}
