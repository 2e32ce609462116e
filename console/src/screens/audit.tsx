/** Audit: filters of the API (actor, action, resource, deployment, outcome, time), pages, export as CSV or JSON. */
import { useState } from 'preact/hooks';
import { call, download } from '../api.js';
import { Badge, ErrorBox, fmtTime, Loading, Section, Table, useLoad, useSession } from '../ui.js';

const FIELDS = ['actor_id', 'action', 'resource_type', 'resource_id', 'deployment', 'client_ip'] as const;
const PAGE = 50;

export function Audit() {
  const session = useSession();
  const [draft, setDraft] = useState<Record<string, string>>({});
  const [filters, setFilters] = useState<Record<string, string>>({});
  const [offset, setOffset] = useState(0);
  const [error, setError] = useState<unknown>(null);
  const page = useLoad(() => call<any[]>('GET', '/audit/events', { query: { ...filters, limit: PAGE, offset } }), [filters, offset]);
  const set = (k: string, v: string) => setDraft((d) => ({ ...d, [k]: v }));
  const exportAs = async (format: 'csv' | 'json') => {
    setError(null);
    const body: Record<string, unknown> = { format };
    for (const [k, v] of Object.entries(filters)) if (v) body[k] = k === 'success' ? v === 'true' : v;
    await download('POST', '/audit/export', body, `audit.${format}`).catch(setError);
  };
  return (
    <>
      <h1>Audit</h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setOffset(0);
          setFilters(Object.fromEntries(Object.entries(draft).filter(([k, v]) => v && k !== 'start_local')));
        }}
      >
        {FIELDS.map((f) => (
          <div class="field">
            <label for={`audit-${f}`}>{f.replace('_', ' ')}</label>
            <input id={`audit-${f}`} value={draft[f] ?? ''} onInput={(e) => set(f, (e.target as HTMLInputElement).value)} />
          </div>
        ))}
        <div class="field">
          <label for="audit-success">outcome</label>
          <select id="audit-success" value={draft.success ?? ''} onChange={(e) => set('success', (e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            <option value="true">succeeded</option>
            <option value="false">failed</option>
          </select>
        </div>
        <div class="field">
          <label for="audit-start">from</label>
          <input
            id="audit-start"
            type="datetime-local"
            value={draft.start_local ?? ''}
            onInput={(e) => {
              const v = (e.target as HTMLInputElement).value;
              setDraft((d) => ({ ...d, start_local: v, start_time: v ? new Date(v).toISOString() : '' }));
            }}
          />
        </div>
        <div class="actions">
          <button type="submit" class="primary">
            Search
          </button>
          {session.can('POST', '/audit/export') ? (
            <>
              <button type="button" onClick={() => void exportAs('csv')}>
                Export CSV
              </button>
              <button type="button" onClick={() => void exportAs('json')}>
                Export JSON
              </button>
            </>
          ) : null}
        </div>
      </form>
      <ErrorBox error={error} />
      <Section title={`Events (${page.data?.meta?.total ?? '…'})`}>
        <Loading load={page}>
          {(res) => (
            <>
              <Table
                rows={res.data}
                empty="No event matches."
                columns={[
                  { label: 'Time', value: (e) => fmtTime(e.time) },
                  { label: 'Actor', value: (e) => e.actor_name ?? e.actor_id },
                  { label: 'Action', value: (e) => <code>{e.action}</code> },
                  { label: 'Resource', value: (e) => `${e.resource_type}${e.resource_id ? ` ${e.resource_id}` : ''}` },
                  { label: 'Deployment', value: (e) => e.deployment ?? '—' },
                  { label: 'Outcome', value: (e) => <Badge value={e.success ? 'succeeded' : 'failed'} /> },
                  { label: 'Status', value: (e) => String(e.status ?? '') },
                  { label: 'From', value: (e) => e.client_ip ?? '' },
                ]}
              />
              <div class="pager">
                <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
                  Newer
                </button>
                <span class="muted">
                  {offset + 1}–{offset + res.data.length} of {res.meta?.total ?? '?'}
                </span>
                <button type="button" disabled={offset + PAGE >= (res.meta?.total ?? 0)} onClick={() => setOffset(offset + PAGE)}>
                  Older
                </button>
              </div>
            </>
          )}
        </Loading>
      </Section>
    </>
  );
}
