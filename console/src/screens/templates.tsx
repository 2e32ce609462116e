/** Templates: pick one, name the deployment, fill its variables, review the plan, apply. */
import { useState } from 'preact/hooks';
import { get } from '../api.js';
import { Dialog, ErrorBox, textOrPassword, Loading, Section, Table, useLoad, useSession } from '../ui.js';

export function Templates() {
  const list = useLoad(() => get<any[]>('/templates'), []);
  const [chosen, setChosen] = useState<any>(null);
  const [search, setSearch] = useState('');
  return (
    <>
      <h1>Templates</h1>
      <Section
        title="Templates"
        actions={
          <>
            <label class="sr-only" for="template-search">
              Search templates
            </label>
            <input id="template-search" type="search" placeholder="Search" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />
          </>
        }
      >
        <Loading load={list}>
          {(rows) => (
            <Table
              rows={rows.filter((t) => !search || `${t.name} ${t.description} ${t.tags?.join(' ')}`.toLowerCase().includes(search.toLowerCase()))}
              columns={[
                { label: 'Template', value: (t) => t.name },
                { label: 'Category', value: (t) => t.category },
                { label: 'What', value: (t) => t.description },
                {
                  label: '',
                  value: (t) => (
                    <button type="button" onClick={() => setChosen(t)} aria-label={`Deploy ${t.name}`}>
                      Deploy
                    </button>
                  ),
                },
              ]}
            />
          )}
        </Loading>
      </Section>
      {chosen ? <DeployTemplate template={chosen} onClose={() => setChosen(null)} /> : null}
    </>
  );
}

function DeployTemplate({ template, onClose }: { template: any; onClose: () => void }) {
  const session = useSession();
  const [name, setName] = useState(template.id);
  const [env, setEnv] = useState<Record<string, string>>(() => Object.fromEntries((template.env ?? []).map((e: any) => [e.key, e.default ?? ''])));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // One call: the agent fills the template's compose file with these variables (the rest keep their defaults).
      await session.change('POST', '/deployments', '/deployments', {
        name,
        template: template.id,
        variables: Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')),
        auto_start: true,
      });
      onClose();
      session.navigate(`/deployments/${encodeURIComponent(name)}`);
    } catch (err) {
      if (err !== 'closed') setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title={`Deploy ${template.name}`} onClose={onClose}>
      <form onSubmit={submit}>
        <div class="field">
          <label for="deploy-name">Deployment name</label>
          <input id="deploy-name" value={name} pattern="[a-z0-9][a-z0-9_\-]{0,62}" required onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        </div>
        {(template.env ?? []).map((v: any) => (
          <div class="field">
            <label for={`env-${v.key}`}>
              {v.key}
              {v.required ? ' *' : ''}
            </label>
            <input
              id={`env-${v.key}`}
              type={textOrPassword(Boolean(v.secret))}
              autoComplete="off"
              required={v.required}
              placeholder={v.secret ? 'generated when left empty' : ''}
              value={env[v.key] ?? ''}
              aria-describedby={`env-${v.key}-hint`}
              onInput={(e) => setEnv((old) => ({ ...old, [v.key]: (e.target as HTMLInputElement).value }))}
            />
            <small id={`env-${v.key}-hint`} class="muted">
              {v.description}
            </small>
          </div>
        ))}
        <ErrorBox error={error} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            Preview the plan
          </button>
        </div>
      </form>
    </Dialog>
  );
}
