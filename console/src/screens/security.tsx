/** Security: events detected from the proxy traffic, blocked addresses, the whitelist, protected routes. */
import { get } from '../api.js';
import { ActionButton, ActionForm, Badge, fmtTime, Loading, Section, Table, useLoad } from '../ui.js';

export function Security() {
  const stats = useLoad(() => get<any>('/security/stats'), [], 15_000);
  const events = useLoad(() => get<any[]>('/security/events', { limit: 50 }), [], 15_000);
  const blocked = useLoad(() => get<any[]>('/security/blocked-ips'), []);
  const whitelist = useLoad(() => get<any[]>('/security/whitelist'), []);
  const routes = useLoad(() => get<any[]>('/security/protected-routes'), []);
  return (
    <>
      <h1>Security</h1>
      {stats.data ? (
        <section class="stats" aria-label="Summary">
          <div class="stat">
            <div class="stat-label">Events (24 h)</div>
            <div class="stat-value">{stats.data.events.last_24h}</div>
          </div>
          <div class="stat">
            <div class="stat-label">Blocked addresses</div>
            <div class="stat-value">{stats.data.blocked_ips}</div>
          </div>
          <div class="stat">
            <div class="stat-label">Auto-block</div>
            <div class="stat-value">{stats.data.auto_block ? 'on' : 'off'}</div>
          </div>
        </section>
      ) : null}
      <Section title="Events">
        <Loading load={events}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No security event."
              columns={[
                { label: 'Time', value: (e) => fmtTime(e.time ?? e.created_at) },
                { label: 'Type', value: (e) => e.type },
                { label: 'Severity', value: (e) => <Badge value={e.severity} /> },
                { label: 'Source', value: (e) => e.source_ip ?? e.ip },
                { label: 'Deployment', value: (e) => e.deployment ?? '—' },
                { label: 'Detail', value: (e) => e.description ?? e.path ?? '' },
              ]}
            />
          )}
        </Loading>
      </Section>
      <Section
        title="Blocked addresses"
        actions={<ActionForm method="POST" template="/security/blocked-ips" path="/security/blocked-ips" label="Block an address" onDone={blocked.reload} />}
      >
        <Loading load={blocked}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No address is blocked."
              columns={[
                { label: 'Address', value: (b) => <code>{b.ip}</code> },
                { label: 'Deployment', value: (b) => b.deployment ?? 'all' },
                { label: 'Why', value: (b) => b.reason ?? '' },
                { label: 'Until', value: (b) => fmtTime(b.expires_at) },
                {
                  label: '',
                  value: (b) => (
                    <ActionButton
                      method="DELETE"
                      template="/security/blocked-ips/{ip}"
                      path={`/security/blocked-ips/${encodeURIComponent(b.ip)}`}
                      label="Unblock"
                      onDone={blocked.reload}
                    />
                  ),
                },
              ]}
            />
          )}
        </Loading>
      </Section>
      <Section
        title="Whitelist"
        actions={<ActionForm method="POST" template="/security/whitelist" path="/security/whitelist" label="Whitelist" onDone={whitelist.reload} />}
      >
        <Loading load={whitelist}>
          {(rows) => (
            <Table
              rows={rows}
              empty="The whitelist is empty."
              columns={[
                { label: 'Entry', value: (w) => <code>{w.value ?? w.ip ?? w.path}</code> },
                { label: 'Kind', value: (w) => w.type ?? '' },
                { label: 'Why', value: (w) => w.reason ?? w.description ?? '' },
                {
                  label: '',
                  value: (w) => (
                    <ActionButton
                      method="DELETE"
                      template="/security/whitelist/{id}"
                      path={`/security/whitelist/${w.id}`}
                      label="Remove"
                      onDone={whitelist.reload}
                    />
                  ),
                },
              ]}
            />
          )}
        </Loading>
      </Section>
      <Section
        title="Protected routes"
        actions={
          <ActionForm method="POST" template="/security/protected-routes" path="/security/protected-routes" label="Protect a path" onDone={routes.reload} />
        }
      >
        <Loading load={routes}>
          {(rows) => (
            <Table
              rows={rows}
              empty="No protected route."
              columns={[
                { label: 'Deployment', value: (r) => r.deployment },
                { label: 'Path', value: (r) => <code>{r.path}</code> },
                { label: 'Users', value: (r) => (r.users ?? []).map((u: any) => u.username ?? u).join(', ') },
                {
                  label: '',
                  value: (r) => (
                    <ActionButton
                      method="DELETE"
                      template="/security/protected-routes/{id}"
                      path={`/security/protected-routes/${r.id}`}
                      label="Remove"
                      onDone={routes.reload}
                    />
                  ),
                },
              ]}
            />
          )}
        </Loading>
      </Section>
    </>
  );
}
