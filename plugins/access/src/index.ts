/**
 * access: the endpoints of users, API keys, per-deployment access and the audit journal. The principals and the
 * journal themselves belong to the core (`coreServices.identity`, `coreServices.audit`); this plugin serves them.
 */
import { coreServices, definePlugin, deploymentsService } from '@agent/sdk';
import { registerApiKeyRoutes } from './apikeys.js';
import { registerAuditRoutes } from './audit/routes.js';
import { registerGrantRoutes } from './grants.js';
import { registerUserRoutes } from './users.js';

export default definePlugin({
  name: 'access',
  version: '0.1.0',
  description: 'Users, API keys, per-deployment access and audit events',
  resources: {
    users: { description: 'user accounts and their deployment access (admin only by default)', operator: 'none', viewer: 'none' },
    apikeys: { description: 'your own API keys (every key for an admin)', operator: 'write', viewer: 'read' },
    audit: { description: 'the audit journal (non-admins see their deployments and their own actions)', operator: 'read', viewer: 'none' },
  },
  optional: [deploymentsService],

  setup(ctx) {
    const identity = ctx.services.get(coreServices.identity);
    const audit = ctx.services.get(coreServices.audit);
    const deployments = () => ctx.services.optional(deploymentsService);
    registerUserRoutes(ctx, identity);
    registerGrantRoutes(ctx, identity, deployments);
    registerApiKeyRoutes(ctx, identity);
    registerAuditRoutes(ctx, identity, audit);
    // Grants on a removed deployment must not carry over to a new deployment of the same name.
    ctx.events.on('deployment.deleted', ({ name }) => identity.grants.removeDeployment(name));
  },
});
