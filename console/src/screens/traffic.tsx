/**
 * Traffic: requests per deployment and status group (bars), requests per minute by status group (from the latest
 * logged requests), and host names no deployment owns.
 */
import { useMemo, useState } from 'preact/hooks';
import { get } from '../api.js';
import { Chart } from '../chart.js';
import { fmtBytes, Loading, Section, Table, useLoad } from '../ui.js';

const GROUPS = ['2xx', '3xx', '4xx', '5xx'] as const;

export function Traffic() {
  const [since, setSince] = useState('24h');
  const stats = useLoad(() => get<any>('/traffic/stats', { start_time: new Date(Date.now() - hours(since) * 3600_000).toISOString() }), [since], 30_000);
  const logs = useLoad(() => get<any[]>('/traffic/logs', { limit: 1000 }), [], 30_000);
  const unknown = useLoad(() => get<any[]>('/traffic/unknown-domains'), []);
  const perMinute = useMemo(() => bucket(logs.data ?? []), [logs.data]);
  return (
    <>
      <h1>Traffic</h1>
      <div class="toolbar">
        <label for="traffic-since">Period</label>
        <select id="traffic-since" value={since} onChange={(e) => setSince((e.target as HTMLSelectElement).value)}>
          <option value="1h">last hour</option>
          <option value="24h">last 24 hours</option>
          <option value="168h">last 7 days</option>
        </select>
      </div>
      <Section title="Requests per deployment and status group">
        <Loading load={stats}>
          {(s) => (
            <>
              <p>
                {s.total.requests} requests, {fmtBytes(s.total.bytes)}; p50 {s.total.p50_ms ?? '—'} ms, p95 {s.total.p95_ms ?? '—'} ms
              </p>
              <StatusBars rows={s.deployments ?? []} />
            </>
          )}
        </Loading>
      </Section>
      <Section title="Requests per minute (latest 1,000 requests)">
        {perMinute.x.length ? (
          <Chart title="Requests per minute by status group" x={perMinute.x} series={perMinute.series} />
        ) : (
          <p class="muted">No request logged yet.</p>
        )}
      </Section>
      <Section title="Unknown domains">
        <Loading load={unknown}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No request for a host name no deployment owns."
              columns={[
                { label: 'Host', value: (r) => <code>{r.host ?? r.domain}</code> },
                { label: 'Requests', value: (r) => String(r.requests ?? r.count) },
                { label: 'Last seen', value: (r) => r.last_seen ?? '' },
              ]}
            />
          )}
        </Loading>
      </Section>
    </>
  );
}

const hours = (s: string) => Number(s.replace('h', ''));

function StatusBars({ rows }: { rows: any[] }) {
  if (!rows.length) return <p class="muted">No request in this period.</p>;
  const max = Math.max(...rows.map((r) => r.requests ?? 0), 1);
  return (
    <div class="bars" role="table" aria-label="Requests per deployment by status group">
      <div role="row" class="bar-legend">
        <span role="columnheader">deployment</span>
        {GROUPS.map((g) => (
          <span role="columnheader" class={`key s${g}`}>
            {g}
          </span>
        ))}
      </div>
      {rows.map((r) => (
        <div role="row" class="bar-row">
          <span role="rowheader" class="bar-name">
            {r.deployment ?? r.name}
          </span>
          <span role="cell" class="bar" style={{ width: `${((r.requests ?? 0) / max) * 100}%` }}>
            {GROUPS.map((g) => {
              const n = r.status?.[g] ?? 0;
              return n ? <span class={`seg s${g}`} style={{ flexGrow: n }} title={`${g}: ${n}`} /> : null;
            })}
          </span>
          <span role="cell" class="bar-count">
            {GROUPS.map((g) => `${g} ${r.status?.[g] ?? 0}`).join(' · ')}
          </span>
        </div>
      ))}
    </div>
  );
}

function bucket(logs: any[]) {
  const counts = new Map<number, Record<string, number>>();
  for (const l of logs) {
    const t = Math.floor(Date.parse(l.time ?? l.timestamp) / 60_000) * 60;
    if (!Number.isFinite(t)) continue;
    const group = `${String(l.status)[0]}xx`;
    const c = counts.get(t) ?? {};
    c[group] = (c[group] ?? 0) + 1;
    counts.set(t, c);
  }
  const x = [...counts.keys()].sort((a, b) => a - b);
  return { x, series: GROUPS.map((g) => ({ label: g, values: x.map((t) => counts.get(t)?.[g] ?? 0) })) };
}
