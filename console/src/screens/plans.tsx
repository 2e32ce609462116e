/** Plans: every plan the principal may see, its changes as diffs, apply or discard; stale and expired stand out. */
import { useState } from 'preact/hooks';
import { get } from '../api.js';
import { ActionButton, Badge, fmtTime, Loading, PlanChanges, Section, Table, useLoad } from '../ui.js';

export function Plans() {
  const list = useLoad(() => get<any[]>('/plans'), [], 10_000);
  const [open, setOpen] = useState<string | null>(null);
  return (
    <>
      <h1>Plans</h1>
      <Section title="Plans">
        <Loading load={list}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No plan."
              columns={[
                { label: 'Change', value: (p) => p.summary ?? p.action },
                { label: 'Status', value: (p) => <Badge value={expired(p) ? 'expired' : p.status} /> },
                { label: 'By', value: (p) => p.created_by?.name ?? '—' },
                { label: 'Made', value: (p) => fmtTime(p.created_at) },
                { label: 'Expires', value: (p) => fmtTime(p.expires_at) },
                {
                  label: '',
                  value: (p) => (
                    <button type="button" aria-expanded={open === p.id} onClick={() => setOpen(open === p.id ? null : p.id)}>
                      {open === p.id ? 'Hide' : 'Review'}
                    </button>
                  ),
                },
              ]}
            />
          )}
        </Loading>
      </Section>
      {open ? <PlanDetail id={open} onDone={() => (setOpen(null), list.reload())} /> : null}
    </>
  );
}

const expired = (p: any) => p.status === 'available' && p.expires_at && Date.parse(p.expires_at) < Date.now();

function PlanDetail({ id, onDone }: { id: string; onDone: () => void }) {
  const plan = useLoad(() => get<any>(`/plans/${encodeURIComponent(id)}`), [id]);
  return (
    <Section title="Review">
      <Loading load={plan}>
        {(p) => (
          <>
            <PlanChanges plan={expired(p) ? { ...p, status: 'expired' } : p} />
            {p.status === 'available' && !expired(p) ? (
              <div class="actions">
                <ActionButton
                  method="POST"
                  template="/plans/{id}/apply"
                  path={`/plans/${encodeURIComponent(id)}/apply`}
                  label="Apply"
                  className="primary"
                  onDone={onDone}
                />
                <ActionButton method="DELETE" template="/plans/{id}" path={`/plans/${encodeURIComponent(id)}`} label="Discard" onDone={onDone} />
              </div>
            ) : null}
          </>
        )}
      </Loading>
    </Section>
  );
}
