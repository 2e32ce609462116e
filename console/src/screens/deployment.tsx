/**
 * One deployment: services and health, live logs (websocket, with follow, filter and source), stats charts,
 * domains, environment (secrets masked), the compose editor (CodeMirror, loaded here only) whose save is reviewed as
 * a plan, backups and restore, revisions and rollback (when the agent has them), jobs with live output and cancel,
 * and who has access.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { get, openSocket, type Socket } from '../api.js';
import { Chart, type Series } from '../chart.js';
import type { Editor } from '../editor.js';
import {
  ActionButton,
  ActionForm,
  Badge,
  Dialog,
  ErrorBox,
  fmtBytes,
  fmtTime,
  Link,
  Loading,
  pct,
  PlanChanges,
  Section,
  Table,
  Tabs,
  useLoad,
  useSession,
} from '../ui.js';
import { health } from './overview.js';

export function DeploymentPage({ name }: { name: string }) {
  const session = useSession();
  const dep = useLoad(() => get<any>(`/deployments/${encodeURIComponent(name)}`), [name], 15_000);
  const hasRevisions = Boolean(session.op('GET', '/deployments/{name}/revisions'));
  const tabs: [string, string][] = [
    ['services', 'Services'],
    ['logs', 'Logs'],
    ['stats', 'Stats'],
    ['domains', 'Domains'],
    ['env', 'Environment'],
    ['compose', 'Compose'],
    ['backups', 'Backups'],
    ...(hasRevisions ? ([['revisions', 'Revisions']] as [string, string][]) : []),
    ['jobs', 'Jobs'],
    ['access', 'Access'],
  ];
  const [tab, setTab] = useState(() => new URLSearchParams(location.search).get('tab') ?? 'services');
  const choose = (id: string) => {
    setTab(id);
    history.replaceState(null, '', `?tab=${id}`);
  };
  const path = `/deployments/${encodeURIComponent(name)}`;
  return (
    <>
      <p class="crumbs">
        <Link href="/">Overview</Link> / deployment
      </p>
      <Loading load={dep}>
        {(d) => (
          <>
            <div class="title-row">
              <h1>{d.name}</h1>
              <Badge value={d.status} /> <Badge value={health(d.services)} />
              <div class="card-actions">
                {d.status === 'running' ? (
                  <>
                    <ActionButton
                      method="POST"
                      template="/deployments/{name}/restart"
                      path={`${path}/restart`}
                      label="Restart"
                      deployment={name}
                      onDone={dep.reload}
                    />
                    <ActionButton method="POST" template="/deployments/{name}/stop" path={`${path}/stop`} label="Stop" deployment={name} onDone={dep.reload} />
                  </>
                ) : (
                  <ActionButton method="POST" template="/deployments/{name}/start" path={`${path}/start`} label="Start" deployment={name} onDone={dep.reload} />
                )}
                <ActionForm
                  method="POST"
                  template="/deployments/{name}/redeploy"
                  path={`${path}/redeploy`}
                  label="Redeploy"
                  deployment={name}
                  onDone={() => choose('jobs')}
                />
                <ActionButton
                  method="DELETE"
                  template="/deployments/{name}"
                  path={path}
                  label="Delete"
                  deployment={name}
                  className="danger"
                  onDone={() => session.navigate('/')}
                />
              </div>
            </div>
            <Tabs tabs={tabs} current={tab} onChange={choose} label="Deployment" />
            <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`} class="panel">
              {tab === 'services' ? <Services d={d} /> : null}
              {tab === 'logs' ? <Logs name={name} services={d.services.map((s: any) => s.name)} /> : null}
              {tab === 'stats' ? <Stats name={name} /> : null}
              {tab === 'domains' ? <Domains name={name} services={d.services.map((s: any) => s.name)} /> : null}
              {tab === 'env' ? <Env d={d} onSaved={dep.reload} /> : null}
              {tab === 'compose' ? <Compose d={d} onSaved={dep.reload} /> : null}
              {tab === 'backups' ? <Backups name={name} /> : null}
              {tab === 'revisions' ? <Revisions name={name} onDone={() => choose('jobs')} /> : null}
              {tab === 'jobs' ? <Jobs name={name} /> : null}
              {tab === 'access' ? <Access name={name} /> : null}
            </div>
          </>
        )}
      </Loading>
    </>
  );
}

function Services({ d }: { d: any }) {
  return (
    <>
      <Table
        caption="Services"
        rows={(d.services ?? []) as any[]}
        columns={[
          { label: 'Service', value: (s) => s.name },
          { label: 'Status', value: (s) => <Badge value={s.status} /> },
          { label: 'Health', value: (s) => <Badge value={s.health} /> },
          { label: 'Image', value: (s) => <code>{s.image}</code> },
          { label: 'Container', value: (s) => s.container_name ?? '—' },
        ]}
      />
      <Table
        caption="Published ports"
        rows={(d.ports ?? []) as any[]}
        empty="No published port."
        columns={[
          { label: 'Service', value: (p) => p.service },
          { label: 'Host', value: (p) => `${p.host_ip ?? ''}:${p.host_port ?? p.published ?? ''}` },
          { label: 'Container', value: (p) => String(p.container_port ?? p.target ?? '') },
        ]}
      />
      {d.file_problems?.length ? <ErrorBox error={new Error(d.file_problems.map((p: any) => p.message ?? JSON.stringify(p)).join('; '))} /> : null}
    </>
  );
}

interface Line {
  service?: string;
  stream?: string;
  time?: string;
  text: string;
}

const MAX_LINES = 2000;

function Logs({ name, services }: { name: string; services: string[] }) {
  const sources = useLoad(() => get<any[]>(`/deployments/${encodeURIComponent(name)}/log-sources`), [name]);
  const [source, setSource] = useState('stdout');
  const [service, setService] = useState('');
  const [filter, setFilter] = useState('');
  const [applied, setApplied] = useState('');
  const [follow, setFollow] = useState(true);
  const [lines, setLines] = useState<Line[]>([]);
  const [state, setState] = useState('connecting');
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    setLines([]);
    setState('connecting');
    let buffer: Line[] = [];
    let frame = 0;
    const flush = () => {
      frame = 0;
      const add = buffer;
      buffer = [];
      setLines((old) => (old.length + add.length > MAX_LINES ? [...old, ...add].slice(-MAX_LINES) : [...old, ...add]));
    };
    const socket: Socket = openSocket(
      `/deployments/${encodeURIComponent(name)}/logs/stream`,
      { tail: 200, source, service: service || undefined, filter: applied || undefined },
      (msg) => {
        if (msg.type === 'ready') setState('following');
        else if (msg.type === 'line') {
          buffer.push(msg);
          // Lines come in bursts: one render per frame.
          if (!frame) frame = requestAnimationFrame(flush);
        } else if (msg.type === 'end') setState('ended (the containers stopped)');
      },
      (code, reason) => setState((s) => (s.startsWith('ended') ? s : `closed (${code}${reason ? `: ${reason}` : ''})`)),
    );
    return () => {
      cancelAnimationFrame(frame);
      socket.close();
    };
  }, [name, source, service, applied]);
  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines, follow]);
  return (
    <>
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied(filter);
        }}
      >
        <label for="log-source">Source</label>
        <select id="log-source" value={source} onChange={(e) => setSource((e.target as HTMLSelectElement).value)}>
          {(sources.data ?? [{ id: 'stdout', name: 'Container output' }]).map((s) => (
            <option value={s.id}>{s.name}</option>
          ))}
        </select>
        <label for="log-service">Service</label>
        <select id="log-service" value={service} onChange={(e) => setService((e.target as HTMLSelectElement).value)}>
          <option value="">all</option>
          {services.map((s) => (
            <option value={s}>{s}</option>
          ))}
        </select>
        <label for="log-filter">Filter</label>
        <input id="log-filter" type="search" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} placeholder="text in the line" />
        <button type="submit">Apply</button>
        <label class="inline">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow((e.target as HTMLInputElement).checked)} /> Follow
        </label>
        <span class="muted" role="status">
          {state}, {lines.length} lines
        </span>
      </form>
      <div class="logs" ref={box} tabIndex={0} role="log" aria-label="Log lines" aria-live="off">
        {lines.map((l) => (
          <div class={`log-line ${l.stream === 'stderr' ? 'stderr' : ''}`}>
            <span class="muted">{l.time ? l.time.slice(11, 23) : ''}</span> {l.service ? <span class="svc">{l.service}</span> : null} {l.text}
          </div>
        ))}
      </div>
    </>
  );
}

/** The collector's container metrics: name, title, unit, factor (CPU comes in cores: shown as % of one core). */
const METRICS: [string, string, string, number][] = [
  ['container.cpu.usage', 'CPU', ' % of a core', 100],
  ['container.memory.usage', 'Memory', ' B', 1],
  ['container.network.io.rx', 'Network received', ' B/s', 1],
  ['container.network.io.tx', 'Network sent', ' B/s', 1],
];

function Stats({ name }: { name: string }) {
  const session = useSession();
  const canSeries = session.can('GET', '/plugin/observability/metrics/timeseries');
  const now = useLoad(() => get<any[]>(`/deployments/${encodeURIComponent(name)}/stats`), [name], 10_000);
  const series = useLoad(
    () => (canSeries ? get<any>('/plugin/observability/metrics/timeseries', { deployment: name, since: '1h' }) : Promise.resolve(null)),
    [name],
    30_000,
  );
  return (
    <>
      <Loading load={now}>
        {(rows) => (
          <Table
            caption="Now"
            rows={rows}
            empty="No running container."
            columns={[
              { label: 'Container', value: (r) => r.name },
              { label: 'CPU', value: (r) => pct(r.cpu_percent) },
              { label: 'Memory', value: (r) => `${fmtBytes(r.memory_usage)} (${pct(r.memory_percent)})` },
              { label: 'Network in/out', value: (r) => `${fmtBytes(r.network_rx)} / ${fmtBytes(r.network_tx)}` },
              { label: 'Processes', value: (r) => String(r.pids) },
            ]}
          />
        )}
      </Loading>
      {canSeries ? <MetricCharts data={series.data} /> : <p class="muted">History needs the observability app.</p>}
    </>
  );
}

export function MetricCharts({ data }: { data: any }) {
  const charts = useMemo(() => {
    if (!data?.timestamps?.length) return [];
    const x = data.timestamps.map((t: number) => t / 1000);
    return METRICS.map(([metric, title, unit, factor]) => ({
      title,
      unit,
      x,
      series: data.series
        .filter((s: any) => s.metric === metric)
        .map((s: any): Series => ({
          label: s.container,
          values: factor === 1 ? s.values : s.values.map((v: number | null) => (v === null ? null : v * factor)),
        })),
    })).filter((c) => c.series.length);
  }, [data]);
  if (!data) return <p class="muted">Loading history…</p>;
  if (!charts.length) return <p class="muted">No history yet (the collector samples every few seconds).</p>;
  return (
    <div class="charts">
      {charts.map((c) => (
        <Chart title={c.title} x={c.x} series={c.series} unit={c.unit} />
      ))}
    </div>
  );
}

function Domains({ name, services }: { name: string; services: string[] }) {
  const base = `/deployments/${encodeURIComponent(name)}/domains`;
  const list = useLoad(() => get<any[]>(base), [name]);
  return (
    <Section
      title="Domains"
      actions={
        <ActionForm
          method="POST"
          template="/deployments/{name}/domains"
          path={base}
          label="Add a domain"
          deployment={name}
          initial={{ service: services[0], container_port: 80 }}
          onDone={list.reload}
        />
      }
    >
      <Loading load={list}>
        {(rows) => (
          <Table
            rows={rows}
            empty="No domain routes here."
            columns={[
              { label: 'Domain', value: (r) => r.domain },
              { label: 'Service', value: (r) => `${r.service}:${r.container_port}` },
              { label: 'Path', value: (r) => r.path_prefix ?? '/' },
              { label: 'TLS', value: (r) => <Badge value={r.ssl?.enabled ? (r.ssl?.status ?? 'on') : 'off'} /> },
              {
                label: '',
                value: (r) => (
                  <ActionButton
                    method="DELETE"
                    template="/deployments/{name}/domains/{domainId}"
                    path={`${base}/${encodeURIComponent(r.id)}`}
                    label="Remove"
                    deployment={name}
                    onDone={list.reload}
                  />
                ),
              },
            ]}
          />
        )}
      </Loading>
    </Section>
  );
}

const looksSecret = (key: string) => /pass|secret|token|key|credential|private/i.test(key);

function Env({ d, onSaved }: { d: any; onSaved: () => void }) {
  const session = useSession();
  const [show, setShow] = useState<Record<string, boolean>>({});
  const rows = (d.env ?? []) as { key: string; value: string; secret?: boolean }[];
  return (
    <Section
      title="Environment"
      actions={
        session.can('PUT', '/deployments/{name}', d.name) ? (
          <ActionForm
            method="PUT"
            template="/deployments/{name}"
            path={`/deployments/${encodeURIComponent(d.name)}`}
            label="Change variables"
            deployment={d.name}
            initial={{ env_vars: rows.filter((r) => !(r.secret ?? looksSecret(r.key))).map((r) => ({ key: r.key, value: r.value })) }}
            hidden={['compose_content', 'backup']}
            onDone={onSaved}
          />
        ) : null
      }
    >
      <Table
        rows={rows}
        empty="No variables."
        columns={[
          { label: 'Variable', value: (r) => <code>{r.key}</code> },
          {
            label: 'Value',
            value: (r) =>
              (r.secret ?? looksSecret(r.key)) ? (
                <span class="muted">•••••• (secret: kept by the agent, never sent back)</span>
              ) : show[r.key] ? (
                <code>{r.value}</code>
              ) : (
                <button type="button" class="ghost" onClick={() => setShow((s) => ({ ...s, [r.key]: true }))}>
                  Show value
                </button>
              ),
          },
        ]}
      />
    </Section>
  );
}

function Compose({ d, onSaved }: { d: any; onSaved: () => void }) {
  const session = useSession();
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<Editor | null>(null);
  const [ready, setReady] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [reason, setReason] = useState('');
  const writable = session.can('PUT', '/deployments/{name}', d.name);
  useEffect(() => {
    let gone = false;
    void import('../editor.js').then(({ createEditor }) => {
      if (gone || !host.current) return;
      editor.current = createEditor(host.current, d.compose_content ?? '', `Compose file of ${d.name}`);
      setReady(true);
    });
    return () => {
      gone = true;
      editor.current?.destroy();
    };
  }, [d.name]);
  const save = async () => {
    setError(null);
    try {
      await session.change('PUT', '/deployments/{name}', `/deployments/${encodeURIComponent(d.name)}`, {
        compose_content: editor.current!.value(),
        ...(reason ? { reason } : {}),
      });
      onSaved();
    } catch (err) {
      if (err !== 'closed') setError(err);
    }
  };
  return (
    <>
      <div ref={host} class="editor" data-ready={ready ? 'yes' : 'no'} />
      {writable ? (
        <div class="toolbar">
          <label for="compose-reason">Why</label>
          <input id="compose-reason" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} placeholder="recorded with the revision" />
          <button type="button" class="primary" onClick={save} disabled={!ready}>
            Save: review the plan
          </button>
        </div>
      ) : null}
      <ErrorBox error={error} />
    </>
  );
}

function Backups({ name }: { name: string }) {
  const base = `/deployments/${encodeURIComponent(name)}`;
  const list = useLoad(() => get<any[]>(`${base}/backups`), [name], 5_000);
  const [restoring, setRestoring] = useState<any>(null);
  return (
    <Section
      title="Backups"
      actions={
        <ActionButton
          method="POST"
          template="/deployments/{name}/backups"
          path={`${base}/backups`}
          label="Back up now"
          deployment={name}
          onDone={list.reload}
        />
      }
    >
      <Loading load={list}>
        {(rows) => (
          <Table
            rows={rows}
            empty="No backup yet."
            columns={[
              { label: 'Backup', value: (b) => <code>{b.id}</code> },
              { label: 'Status', value: (b) => <Badge value={b.status} /> },
              { label: 'Size', value: (b) => fmtBytes(b.size_bytes ?? b.size) },
              { label: 'Created', value: (b) => fmtTime(b.created_at) },
              {
                label: '',
                value: (b) =>
                  b.status === 'completed' ? (
                    <button type="button" onClick={() => setRestoring(b)}>
                      Restore…
                    </button>
                  ) : null,
              },
            ]}
          />
        )}
      </Loading>
      {restoring ? (
        <Dialog title={`Restore ${restoring.id}`} onClose={() => setRestoring(null)}>
          <p>Restores the files and databases of this backup into the deployment (or a new one). It is verified before anything changes.</p>
          <ActionForm
            method="POST"
            template="/backups/{id}/restore"
            path={`/backups/${encodeURIComponent(restoring.id)}/restore`}
            label="Restore"
            onDone={() => setRestoring(null)}
          />
        </Dialog>
      ) : null}
    </Section>
  );
}

function Revisions({ name, onDone }: { name: string; onDone: () => void }) {
  const base = `/deployments/${encodeURIComponent(name)}`;
  const list = useLoad(() => get<any[]>(`${base}/revisions`), [name]);
  const [open, setOpen] = useState<any>(null);
  return (
    <Section title="Revisions">
      <Loading load={list}>
        {(rows) => (
          <Table
            rows={rows}
            columns={[
              { label: 'Rev', value: (r) => String(r.rev) },
              { label: 'Action', value: (r) => r.action },
              { label: 'Outcome', value: (r) => <Badge value={r.status} /> },
              { label: 'By', value: (r) => r.created_by_name ?? r.created_by },
              { label: 'When', value: (r) => fmtTime(r.created_at) },
              { label: 'Why', value: (r) => r.reason ?? '' },
              {
                label: '',
                value: (r) => (
                  <>
                    <button type="button" onClick={() => get(`${base}/revisions/${r.rev}`).then(setOpen)}>
                      Diff
                    </button>{' '}
                    <ActionButton
                      method="POST"
                      template="/deployments/{name}/rollback"
                      path={`${base}/rollback`}
                      body={{ revision: r.rev }}
                      label={`Roll back to ${r.rev}`}
                      deployment={name}
                      onDone={onDone}
                    />
                  </>
                ),
              },
            ]}
          />
        )}
      </Loading>
      {open ? (
        <Dialog title={`Revision ${open.rev}`} onClose={() => setOpen(null)}>
          <PlanChanges
            plan={{
              summary: `${open.action} by ${open.created_by_name ?? open.created_by}`,
              status: open.status,
              changes: open.diff
                ? [{ type: 'file', id: 'compose', actions: ['compare with now'], diff: typeof open.diff === 'string' ? open.diff : open.diff?.compose }]
                : [],
            }}
          />
          <pre>{open.compose_content ?? ''}</pre>
        </Dialog>
      ) : null}
    </Section>
  );
}

function Jobs({ name }: { name: string }) {
  const list = useLoad(() => get<any[]>('/jobs', { deployment: name, limit: 20 }), [name], 5_000);
  const [open, setOpen] = useState<string | null>(null);
  return (
    <Section title="Jobs">
      <Loading load={list}>
        {(rows) => (
          <Table
            rows={rows}
            empty="No job for this deployment."
            columns={[
              { label: 'Job', value: (j) => <code>{j.id}</code> },
              { label: 'Kind', value: (j) => j.kind },
              { label: 'Status', value: (j) => <Badge value={j.status} /> },
              { label: 'Started', value: (j) => fmtTime(j.started_at ?? j.created_at) },
              {
                label: '',
                value: (j) => (
                  <button type="button" onClick={() => setOpen(j.id)}>
                    Output
                  </button>
                ),
              },
            ]}
          />
        )}
      </Loading>
      {open ? <JobDialog id={open} onClose={() => setOpen(null)} /> : null}
    </Section>
  );
}

export function JobDialog({ id, onClose }: { id: string; onClose: () => void }) {
  const [job, setJob] = useState<any>(null);
  const [lines, setLines] = useState<string[]>([]);
  const [progress, setProgress] = useState<any>(null);
  useEffect(() => {
    const socket = openSocket(
      `/jobs/${encodeURIComponent(id)}/stream`,
      {},
      (msg) => {
        if (msg.type === 'job' || msg.type === 'end') setJob(msg.job);
        else if (msg.type === 'line') setLines((old) => [...old.slice(-1000), msg.text ?? '']);
        else if (msg.type === 'progress') setProgress(msg.progress);
      },
      () => undefined,
    );
    return () => socket.close();
  }, [id]);
  return (
    <Dialog title={`Job ${id}`} onClose={onClose}>
      <p>
        {job?.title ?? job?.kind} <Badge value={job?.status} />{' '}
        {progress?.percent !== null && progress?.percent !== undefined ? `${Math.round(progress.percent)} %` : ''} {progress?.step ?? job?.progress?.step ?? ''}
      </p>
      <pre class="logs" tabIndex={0} role="log" aria-label="Job output">
        {lines.join('\n')}
      </pre>
      {job && ['running', 'queued', 'pending'].includes(job.status) ? (
        <ActionButton method="POST" template="/jobs/{id}/cancel" path={`/jobs/${encodeURIComponent(id)}/cancel`} label="Cancel the job" />
      ) : null}
    </Dialog>
  );
}

function Access({ name }: { name: string }) {
  const list = useLoad(() => get<any[]>(`/deployments/${encodeURIComponent(name)}/users`), [name]);
  return (
    <Section title="Who has access">
      <Loading load={list}>
        {(rows) => (
          <Table
            rows={rows}
            columns={[
              { label: 'User', value: (u) => u.username },
              { label: 'Role', value: (u) => u.role },
              { label: 'Level', value: (u) => <Badge value={u.access_level} /> },
              { label: 'Through', value: (u) => u.source },
              { label: 'Active', value: (u) => <Badge value={u.is_active} /> },
            ]}
          />
        )}
      </Loading>
    </Section>
  );
}
