/** Dashboards: saved dashboards rendered as panels (line charts and single values), created and edited here. */
import { useMemo, useState } from 'preact/hooks';
import { get } from '../api.js';
import { Chart } from '../chart.js';
import { ActionButton, ActionForm, Loading, Section, Table, useLoad } from '../ui.js';

export function Dashboards() {
  const list = useLoad(() => get<any[]>('/dashboards'), []);
  const [open, setOpen] = useState<string | null>(null);
  return (
    <>
      <h1>Dashboards</h1>
      <Section
        title="Saved dashboards"
        actions={
          <ActionForm
            method="POST"
            template="/dashboards"
            path="/dashboards"
            label="New dashboard"
            initial={{ panels: [] }}
            onDone={(d) => (list.reload(), d?.id && setOpen(d.id))}
          />
        }
      >
        <Loading load={list}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No dashboard yet."
              columns={[
                { label: 'Dashboard', value: (d) => d.name },
                { label: 'Panels', value: (d) => String(d.panels?.length ?? 0) },
                { label: 'Shared', value: (d) => (d.shared ? 'yes' : 'no') },
                {
                  label: '',
                  value: (d) => (
                    <>
                      <button type="button" onClick={() => setOpen(d.id)}>
                        Open {d.name}
                      </button>{' '}
                      <ActionForm
                        method="PUT"
                        template="/dashboards/{id}"
                        path={`/dashboards/${d.id}`}
                        label={`Edit ${d.name}`}
                        initial={{ name: d.name, panels: d.panels, shared: d.shared }}
                        onDone={list.reload}
                      />{' '}
                      <ActionButton
                        method="DELETE"
                        template="/dashboards/{id}"
                        path={`/dashboards/${d.id}`}
                        label={`Delete ${d.name}`}
                        confirm={`Delete ${d.name}?`}
                        onDone={list.reload}
                      />
                    </>
                  ),
                },
              ]}
            />
          )}
        </Loading>
      </Section>
      {open ? <Board id={open} /> : null}
    </>
  );
}

function Board({ id }: { id: string }) {
  const board = useLoad(() => get<any>(`/dashboards/${id}`), [id]);
  return (
    <Loading load={board}>
      {(d) => (
        <section aria-label={`Dashboard ${d.name}`}>
          <h2>{d.name}</h2>
          <div class="grid12">
            {(d.panels ?? []).map((p: any) => (
              <div class="card" style={{ gridColumn: `span ${p.width ?? 6}` }}>
                <Panel panel={p} />
              </div>
            ))}
          </div>
        </section>
      )}
    </Loading>
  );
}

function Panel({ panel }: { panel: any }) {
  const data = useLoad(
    () => (panel.deployment ? get<any>('/plugin/observability/metrics/timeseries', { deployment: panel.deployment, since: '1h' }) : Promise.resolve(null)),
    [panel.deployment],
    30_000,
  );
  const series = useMemo(() => {
    const d = data.data;
    if (!d?.timestamps?.length) return null;
    return {
      x: d.timestamps.map((t: number) => t / 1000),
      series: d.series.filter((s: any) => s.metric === panel.series).map((s: any) => ({ label: s.container, values: s.values })),
    };
  }, [data.data, panel.series]);
  if (!panel.deployment) return <p class="muted">{panel.title}: no deployment chosen.</p>;
  if (!series?.series.length) return <p class="muted">{panel.title}: no data yet.</p>;
  if (panel.type === 'stat') {
    const last = series.series.map((s: any) => [...s.values].reverse().find((v: number | null) => v !== null) ?? 0).reduce((a: number, b: number) => a + b, 0);
    return (
      <div class="stat">
        <div class="stat-label">{panel.title}</div>
        <div class="stat-value">{+last.toFixed(2)}</div>
      </div>
    );
  }
  return <Chart title={panel.title} x={series.x} series={series.series} />;
}
