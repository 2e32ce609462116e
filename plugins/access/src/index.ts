/**
 * access: the endpoints of users, API keys, per-deployment access, and the audit journal itself: the kernel writes
 * its records to this plugin (`auditSink`), which stores, searches and serves them. The principals belong to the
 * core (`coreServices.identity`); this plugin serves them.
 */
import { join } from 'node:path';
import { auditSink, coreServices, definePlugin, optional, retiredName } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { auditJournalService, type AuditJournalService } from './api.js';
import { AuditJournal, type Journal } from './audit/journal.js';
import { registerApiKeyRoutes } from './apikeys.js';
import { registerAuditRoutes } from './audit/routes.js';
import { registerGrantRoutes } from './grants.js';
import { registerUserRoutes } from './users.js';

export default definePlugin({
  name: 'access',
  version: '0.1.0',
  description: 'Users, API keys, per-deployment access and audit events',
  resources: {
    users: { description: 'user accounts and their deployment access (admin only by default)', operator: 'none', viewer: 'none', owner: 'global' },
    apikeys: { description: 'your own API keys (every key for an admin)', operator: 'write', viewer: 'read', owner: 'global' },
    audit: { description: 'the audit journal (non-admins see their deployments and their own actions)', operator: 'read', viewer: 'none', owner: 'both' },
  },
  deps: { identity: coreServices.identity, deployments: optional(deploymentsService) },
  provides: { sink: auditSink, journal: auditJournalService },

  setup(ctx, { identity, ...deps }) {
    // Opened here, not at start: the kernel and every other plugin write to it from their own start on. Events of
    // an older agent, kept in the core's journal, are taken over at the first open.
    const audit = new AuditJournal(ctx.store.journal('audit') as unknown as Journal, join(ctx.agent.dataDir, 'core', 'journal.sqlite'));
    const deployments = () => deps.deployments;
    registerUserRoutes(ctx, identity);
    registerGrantRoutes(ctx, identity, deployments);
    registerApiKeyRoutes(ctx, identity);
    registerAuditRoutes(ctx, identity, audit);
    // Grants on a removed deployment must not carry over to a new deployment of the same name.
    ctx.events.on('deployment.deleted', ({ name }) => identity.grants.removeDeployment(name));
    // Nor its audit history: when the name is used again, the events about the earlier deployment (its deletion
    // included, which is recorded after the deletion event) are kept under a retired name only admins reach.
    ctx.events.on('deployment.created', ({ name }) => {
      const retired = retireAuditHistory(audit, name, retiredName(name, new Date()));
      if (retired) ctx.log.info('audit events of an earlier deployment of the same name retired', { deployment: name, events: retired });
    });
    // The host stops this plugin last and closes the journal after `stop`: every record accepted is committed.
    return { provides: { sink: audit, journal: audit }, stop: () => audit.close() };
  },
});

/** Moves the events about `name` (all of them, written before now) to `retiredAs`; returns how many. */
export function retireAuditHistory(audit: AuditJournalService, name: string, retiredAs: string): number {
  const ids: number[] = [];
  for (let offset = 0; ; offset += 5000) {
    const page = audit.search({ equals: { deployment: name }, limit: 5000, offset, countCap: 1, idsOnly: true });
    ids.push(...page.ids);
    if (page.ids.length < 5000) break;
  }
  if (!ids.length) return 0;
  const update = audit.database.prepare('UPDATE audit_events SET deployment = ? WHERE id = ?');
  audit.database.transaction(() => {
    for (const id of ids) update.run(retiredAs, id);
  })();
  return ids.length;
}
