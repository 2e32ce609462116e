/** Host figures, every deployment the principal reaches with its status and health, and the firing alerts. */
import { useMemo, useState } from 'preact/hooks';
import { get, isGlobal } from '../api.js';
import { ActionForm, Badge, fmtBytes, fmtDate, Link, Loading, pct, Section, Table, useLoad, useSession } from '../ui.js';

export function health(services: { health?: string; status?: string }[]): string {
  if (!services?.length) return 'none';
  if (services.some((s) => s.health === 'unhealthy')) return 'unhealthy';
  if (services.some((s) => s.health === 'starting')) return 'starting';
  if (services.every((s) => s.health === 'healthy')) return 'healthy';
  return services.some((s) => s.health === 'healthy') ? 'partial' : 'none';
}

export function Overview() {
  const session = useSession();
  const global = isGlobal(session.principal);
  const stats = useLoad(() => (session.can('GET', '/stats') && global ? get('/stats') : Promise.resolve(null)), [], 10_000);
  const deployments = useLoad(() => get<any[]>('/deployments'), [], 10_000);
  const firing = useLoad(
    () => (session.can('GET', '/plugin/observability/alerts/firing') ? get<any[]>('/plugin/observability/alerts/firing') : Promise.resolve([])),
    [],
    15_000,
  );
  const [filter, setFilter] = useState('');
  const shown = useMemo(() => (deployments.data ?? []).filter((d) => !filter || d.name.includes(filter)), [deployments.data, filter]);
  return (
    <>
      <h1>Overview</h1>
      {global && stats.data ? (
        <section class="stats" aria-label="Host">
          <Stat label="CPU" value={pct(stats.data.host.cpu.usage_percent)} detail={`${stats.data.host.cpu.count} cores, load ${stats.data.host.load['1m']}`} />
          <Stat
            label="Memory"
            value={pct(stats.data.host.memory.usage_percent)}
            detail={`${fmtBytes(stats.data.host.memory.used_bytes)} of ${fmtBytes(stats.data.host.memory.total_bytes)}`}
          />
          <Stat label="Disk" value={pct(stats.data.host.disk.usage_percent)} detail={`${fmtBytes(stats.data.host.disk.free_bytes)} free`} />
          <Stat
            label="Containers"
            value={String(stats.data.docker?.containers?.running ?? '—')}
            detail={`running of ${stats.data.docker?.containers?.total ?? '—'}`}
          />
          <Stat label="Agent" value={fmtBytes(stats.data.agent.rss_bytes)} detail={`v${stats.data.agent.version}, resident memory`} />
        </section>
      ) : null}
      <Section
        title={`Deployments (${deployments.data?.length ?? '…'})`}
        actions={
          <>
            <label class="sr-only" for="deployment-filter">
              Filter deployments
            </label>
            <input id="deployment-filter" type="search" placeholder="Filter" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
            {session.can('GET', '/templates') && global ? <Link href="/templates">Deploy a template</Link> : null}
            <ActionForm method="POST" template="/deployments" path="/deployments" label="New deployment" onDone={() => deployments.reload()} />
          </>
        }
      >
        <Loading load={deployments}>
          {() => (
            <Table
              rows={shown}
              pageSize={100}
              empty="No deployments."
              columns={[
                { label: 'Name', value: (d) => <Link href={`/deployments/${encodeURIComponent(d.name)}`}>{d.name}</Link> },
                { label: 'Status', value: (d) => <Badge value={d.status} /> },
                { label: 'Health', value: (d) => <Badge value={health(d.services)} /> },
                { label: 'Services', value: (d) => d.services?.map((s: any) => s.name).join(', ') },
                { label: 'Created', value: (d) => fmtDate(d.created_at) },
              ]}
            />
          )}
        </Loading>
      </Section>
      {session.can('GET', '/plugin/observability/alerts/firing') ? (
        <Section title="Firing alerts">
          <Loading load={firing}>
            {(rows) => (
              <Table
                rows={rows}
                empty="No alert is firing."
                columns={[
                  { label: 'Rule', value: (a) => a.rule_name ?? a.rule ?? a.rule_id },
                  { label: 'Deployment', value: (a) => a.deployment ?? '—' },
                  { label: 'Container', value: (a) => a.container ?? '—' },
                  { label: 'State', value: (a) => <Badge value={a.state ?? a.status} /> },
                  { label: 'Value', value: (a) => String(a.value ?? '—') },
                ]}
              />
            )}
          </Loading>
        </Section>
      ) : null}
    </>
  );
}

function Stat({ label, value, detail }: { label: string; value: string; detail: string }) {
  return (
    <div class="stat">
      <div class="stat-label">{label}</div>
      <div class="stat-value">{value}</div>
      <div class="muted">{detail}</div>
    </div>
  );
}
