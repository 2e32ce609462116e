/** Settings (each with its schema, secrets masked; changed through PUT /settings) and the doctor's report. */
import { useState } from 'preact/hooks';
import { get } from '../api.js';
import { Badge, ErrorBox, textOrPassword, Loading, Section, Table, useLoad, useSession } from '../ui.js';

export function Settings() {
  const session = useSession();
  const settings = useLoad(() => get<any>('/settings'), []);
  const [edits, setEdits] = useState<Record<string, unknown>>({});
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState('');
  const writable = session.can('PUT', '/settings');
  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const patch: Record<string, Record<string, unknown>> = {};
    for (const [key, value] of Object.entries(edits)) {
      const [plugin, name] = [key.slice(0, key.indexOf('.')), key.slice(key.indexOf('.') + 1)];
      (patch[plugin] ??= {})[name] = value;
    }
    try {
      await session.change('PUT', '/settings', '/settings', patch);
      setEdits({});
      setSaved(`Saved ${Object.keys(edits).length} setting(s).`);
      settings.reload();
    } catch (err) {
      if (err !== 'closed') setError(err);
    }
  };
  return (
    <>
      <h1>Settings</h1>
      <Loading load={settings}>
        {(s) => (
          <form onSubmit={save}>
            <Table
              rows={s.settings ?? []}
              columns={[
                { label: 'Setting', value: (r: any) => <label for={`setting-${r.key}`}>{r.key}</label> },
                {
                  label: 'Value',
                  value: (r: any) => (
                    <SettingInput r={r} value={edits[r.key] ?? r.value} disabled={!writable} onChange={(v) => setEdits((old) => ({ ...old, [r.key]: v }))} />
                  ),
                },
                { label: 'Applies', value: (r: any) => r.apply },
                { label: 'What', value: (r: any) => <small>{r.description}</small> },
              ]}
            />
            <ErrorBox error={error} />
            <p role="status" class="muted">
              {saved}
            </p>
            {writable ? (
              <button type="submit" class="primary" disabled={!Object.keys(edits).length}>
                Save changes
              </button>
            ) : null}
          </form>
        )}
      </Loading>
    </>
  );
}

function SettingInput({ r, value, onChange, disabled }: { r: any; value: unknown; onChange: (v: unknown) => void; disabled: boolean }) {
  const id = `setting-${r.key}`;
  const type = r.schema?.type;
  if (type === 'boolean')
    return <input id={id} type="checkbox" disabled={disabled} checked={value === true} onChange={(e) => onChange((e.target as HTMLInputElement).checked)} />;
  if (type === 'integer' || type === 'number')
    return (
      <input
        id={id}
        type="number"
        disabled={disabled}
        min={r.schema.minimum}
        max={r.schema.maximum}
        value={String(value ?? '')}
        onInput={(e) => onChange(Number((e.target as HTMLInputElement).value))}
      />
    );
  if (type === 'string')
    return (
      <input
        id={id}
        type={textOrPassword(Boolean(r.secret))}
        disabled={disabled}
        value={String(value ?? '')}
        autoComplete="off"
        onInput={(e) => onChange((e.target as HTMLInputElement).value)}
      />
    );
  return (
    <input
      id={id}
      class="mono"
      disabled={disabled}
      value={JSON.stringify(value)}
      onInput={(e) => {
        try {
          onChange(JSON.parse((e.target as HTMLInputElement).value));
        } catch {
          /* kept until it parses */
        }
      }}
    />
  );
}

export function Doctor() {
  const report = useLoad(() => get<any>('/system/doctor'), []);
  return (
    <>
      <h1>Doctor</h1>
      <Section
        title="What works on this host"
        actions={
          <button type="button" onClick={report.reload}>
            Check again
          </button>
        }
      >
        <Loading load={report}>
          {(r) => (
            <Table
              rows={r.checks ?? []}
              columns={[
                { label: 'Check', value: (c: any) => c.title },
                { label: 'Status', value: (c: any) => <Badge value={c.status} /> },
                { label: 'Detail', value: (c: any) => c.detail },
                { label: 'Fix', value: (c: any) => (c.fix ? <code>{c.fix}</code> : '') },
              ]}
            />
          )}
        </Loading>
      </Section>
    </>
  );
}
