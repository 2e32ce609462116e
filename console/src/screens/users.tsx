/** Users (admins) and API keys: create, change, revoke; a new key's secret is shown once. */
import { useState } from 'preact/hooks';
import { get } from '../api.js';
import { ActionButton, ActionForm, Badge, Dialog, fmtTime, Loading, Section, Table, useLoad, useSession } from '../ui.js';

export function Users() {
  const session = useSession();
  const canUsers = session.can('GET', '/users');
  const users = useLoad(() => (canUsers ? get<any[]>('/users') : Promise.resolve([])), []);
  const keys = useLoad(() => get<any[]>('/apikeys'), []);
  const [secret, setSecret] = useState<string | null>(null);
  return (
    <>
      <h1>Users and API keys</h1>
      {canUsers ? (
        <Section title="Users" actions={<ActionForm method="POST" template="/users" path="/users" label="New user" onDone={users.reload} />}>
          <Loading load={users}>
            {(rows) => (
              <Table
                rows={rows}
                columns={[
                  { label: 'User', value: (u) => u.username },
                  { label: 'Role', value: (u) => u.role },
                  { label: 'Scope', value: (u) => u.scope },
                  { label: 'Active', value: (u) => <Badge value={u.is_active} /> },
                  { label: 'Last login', value: (u) => fmtTime(u.last_login) },
                  {
                    label: '',
                    value: (u) => (
                      <>
                        <ActionForm method="PUT" template="/users/{id}" path={`/users/${u.id}`} label={`Edit ${u.username}`} onDone={users.reload} />{' '}
                        <ActionForm
                          method="POST"
                          template="/users/{id}/deployments"
                          path={`/users/${u.id}/deployments`}
                          label={`Grant ${u.username}`}
                          onDone={users.reload}
                        />
                      </>
                    ),
                  },
                ]}
              />
            )}
          </Loading>
        </Section>
      ) : null}
      <Section
        title="API keys"
        actions={
          <ActionForm
            method="POST"
            template="/apikeys"
            path="/apikeys"
            label="New API key"
            onDone={(data) => {
              setSecret(data?.key ?? data?.api_key ?? data?.secret ?? null);
              keys.reload();
            }}
          />
        }
      >
        <Loading load={keys}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No API key."
              columns={[
                { label: 'Name', value: (k) => k.name },
                { label: 'Prefix', value: (k) => <code>{k.prefix ?? k.key_prefix ?? '—'}</code> },
                { label: 'Owner', value: (k) => k.owner ?? k.username ?? k.user_id },
                { label: 'Role', value: (k) => k.role ?? '—' },
                { label: 'Status', value: (k) => <Badge value={k.status} /> },
                { label: 'Last used', value: (k) => fmtTime(k.last_used_at ?? k.last_used) },
                {
                  label: '',
                  value: (k) =>
                    k.status !== 'active' ? null : (
                      <ActionButton
                        method="POST"
                        template="/apikeys/{id}/revoke"
                        path={`/apikeys/${k.id}/revoke`}
                        label={`Revoke ${k.name}`}
                        confirm={`Revoke the key ${k.name}? It stops working at once.`}
                        onDone={keys.reload}
                      />
                    ),
                },
              ]}
            />
          )}
        </Loading>
      </Section>
      {secret ? (
        <Dialog title="Your new API key" onClose={() => setSecret(null)}>
          <p>Copy it now: the agent keeps only its hash and will never show it again.</p>
          <pre class="secret" tabIndex={0} aria-label="API key">
            {secret}
          </pre>
          <button type="button" onClick={() => void navigator.clipboard?.writeText(secret)}>
            Copy
          </button>
        </Dialog>
      ) : null}
    </>
  );
}
