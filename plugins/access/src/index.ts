/**
 * access: users, API keys and per-deployment grants (stored here, in SQLite), which makes it the agent's principal
 * directory: the kernel authenticates every request through it; and the audit journal: the kernel writes its
 * records to this plugin (`auditSink`), which stores, searches and serves them.
 */
import { join } from 'node:path';
import { auditSink, coreServices, definePlugin, optional, principalDirectory, principalFrom, retiredName } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { auditJournalService, identityService, type AuditJournalService } from './api.js';
import { AuditJournal, type Journal } from './audit/journal.js';
import { AuditReads } from './audit/reads.js';
import { auditRetention } from './audit/retention.js';
import { Identity } from './identity/identity.js';
import { LoginLimiter } from './identity/login-limiter.js';
import { LEGACY_FILE, migrateLegacyFile } from './identity/migrate.js';
import { IdentityStore } from './identity/store.js';
import { apiKeyOperations } from './operations/apikeys.js';
import { auditOperations } from './operations/audit.js';
import { grantOperations } from './operations/grants.js';
import { loginOperation } from './operations/login.js';
import { userOperations } from './operations/users.js';
import { apiKeyRoutes } from './routes/apikeys.js';
import { auditRoutes } from './routes/audit.js';
import { authRoutes } from './routes/auth.js';
import { grantRoutes } from './routes/grants.js';
import { userRoutes } from './routes/users.js';

export default definePlugin({
  name: 'access',
  version: '0.1.0',
  description: 'Users, API keys, per-deployment access and audit events',
  resources: {
    users: { description: 'user accounts and their deployment access (admin only by default)', operator: 'none', viewer: 'none', owner: 'global' },
    apikeys: { description: 'your own API keys (every key for an admin)', operator: 'write', viewer: 'read', owner: 'global' },
    audit: {
      description: 'the audit journal (non-admins see the events of their deployments; global ones also their own actions)',
      operator: 'read',
      viewer: 'none',
      owner: 'both',
    },
  },
  // Deployments are only looked up when a request needs them (and the deployments plugin needs nothing from this
  // one at setup): optional, so either order works.
  deps: { auth: coreServices.auth, deployments: optional(deploymentsService) },
  provides: { identity: identityService, principals: principalDirectory, sink: auditSink, journal: auditJournalService },

  async setup(ctx, { auth, ...deps }) {
    // Opened first: the kernel and every other plugin write to it from their own start on. Events of an older
    // agent, kept in the core's journal, are taken over at the first open.
    const audit = new AuditJournal(
      ctx.store.journal('audit', { syncBeforeAck: false }) as unknown as Journal,
      join(ctx.agent.dataDir, 'core', 'journal.sqlite'),
    );
    const store = new IdentityStore(ctx.store.journal());
    const migrated = migrateLegacyFile(join(ctx.agent.dataDir, ...LEGACY_FILE), store);
    if (migrated !== null) ctx.log.info('users, API keys and grants imported from identity.json (renamed identity.json.migrated)', { users: migrated });
    // Whose rights changed goes on the bus: the kernel checks those users' open connections again at once.
    const identity = new Identity(store, auth, (user_ids) => ctx.events.emit('principals.changed', { user_ids }));
    const admin = await identity.bootstrapAdmin(auth.settings.admin_password);
    if (admin.generated) {
      const change = 'Change it with PUT /api/users/me/password (or set AGENT_ADMIN_PASSWORD before the first start).';
      auth.announce({
        event: 'admin.first_password',
        message: `first start: created user "admin"; its password (field "password") is shown once. ${change}`,
        fields: { username: 'admin', password: admin.generated },
        banner: ['', `First start: created user "admin" with password: ${admin.generated}`, `This password is shown once. ${change}`, ''],
      });
    } else if (admin.created) ctx.log.info('created user "admin" with the configured password');
    const { login_max_failures, login_max_failures_per_ip, lockout } = auth.settings;
    const limiter = new LoginLimiter(login_max_failures, login_max_failures_per_ip, lockout * 1000);

    // Each change is an operation (src/operations), run by its route (src/routes): checks in `prepare`, the change in `apply`.
    const deployments = () => deps.deployments;
    authRoutes(ctx, auth, loginOperation(identity, limiter, audit));
    userRoutes(ctx, identity, userOperations(identity));
    grantRoutes(ctx, identity, deployments, grantOperations(identity, deployments));
    apiKeyRoutes(ctx, identity, apiKeyOperations(identity));
    const reads = new AuditReads(identity, audit);
    auditRoutes(ctx, reads, auditOperations(reads, auditRetention(ctx, reads)));
    // Whoever creates a deployment administers it. Synchronous, so the grant is there when the creation is answered.
    ctx.events.on('deployment.created', ({ name, created_by }) => {
      const creator = created_by ? identity.principalById(created_by) : null;
      if (creator) identity.grantCreator(principalFrom(creator), name);
    });
    // Grants on a removed deployment must not carry over to a new deployment of the same name.
    ctx.events.on('deployment.deleted', ({ name }) => identity.removeDeployment(name));
    // Nor its audit history: when the name is used again, the events about the earlier deployment (its deletion
    // included, which is recorded after the deletion event) are kept under a retired name only admins reach.
    ctx.events.on('deployment.created', ({ name }) => {
      const retired = retireAuditHistory(audit, name, retiredName(name, new Date()));
      if (retired) ctx.log.info('audit events of an earlier deployment of the same name retired', { deployment: name, events: retired });
    });
    return {
      provides: { identity, principals: identity, sink: audit, journal: audit },
      // Usage stamps of API keys are written every few seconds, the last ones here; the host stops this plugin last
      // and closes the journal after `stop`: every record accepted is committed.
      stop: async () => {
        identity.flush();
        await audit.close();
      },
    };
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
